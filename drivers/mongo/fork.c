/* fork.c — the MongoDB driver: thread fork. */
#include "mongo_int.h"

/* ---- fork ---- */

/* Makes the invisible placeholder {forking: true} for dst with src's extra, after
 * clearing what may be there; CONVO_ECONFLICT when dst is a thread. */
static int claim_destination(call *c, const char *dst, const bson_t *extra, bson_oid_t *gd)
{
    for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
        bson_t doc;
        thread_doc d;
        batch_head top = {false, false, 0, 0};
        bool dup, again = false;
        int64_t now = convo__mg_now_ms();
        convo__mg_backoff(attempt);
        convo__mg_new_generation(dst, gd);
        if (!convo__mg_build_thread(c->b, dst, gd, false, true, 0, extra, now, &doc)) {
            bson_destroy(&doc);
            return convo__error(c->err, CONVO_ETOOLARGE, NULL, "extra is too large for MongoDB");
        }
        int rc = convo__mg_insert_doc(c, c->threads, &doc, &dup, "creating the fork");
        bson_destroy(&doc);
        if (rc != 0 || !dup)
            return rc;
        if ((rc = convo__mg_read_thread(c, dst, false, &d)) == 0 && d.found && !d.forking)
            rc = convo__mg_top_batch(c, &d.g, &top);
        if (rc == 0 && d.found) {
            if (d.forking && now - d.created_ms <= FORK_STALE_MS)
                rc = convo__error(c->err, CONVO_ECONFLICT, NULL,
                                  "another fork into the destination thread is under way");
            else if (d.forking)
                rc = convo__mg_abort_fork(c, dst, &d.g);
            else if (convo__mg_expired(&d, now) || (top.found && top.fence))
                rc = convo__mg_finish_delete(c, dst, &d.g, false);
            else if (d.live || top.found)
                rc = convo__error(c->err, CONVO_ECONFLICT, NULL,
                                  "destination thread already exists");
            else
                rc = convo__mg_drop_placeholder(c, dst, &d.g, &again);
        }
        convo__mg_thread_free(&d);
        if (rc != 0)
            return rc;
    }
    return convo__mg_contention(c);
}

/* A copy of a source batch for dst, cut at upto. */
static bool copy_batch(const convo_backend *b, const bson_t *src, const batch_head *h,
                       const bson_oid_t *gd, int64_t upto, int64_t now, bson_t *doc)
{
    int64_t e = h->e < upto ? h->e : upto;
    bson_iter_t it, item;
    bson_init(doc);
    BSON_APPEND_OID(doc, "g", gd);
    BSON_APPEND_INT64(doc, "s", h->s);
    BSON_APPEND_INT64(doc, "e", e);
    BSON_APPEND_INT64(doc, "n", e - h->s);
    BSON_APPEND_INT64(doc, "k", h->s); /* the source's key is not copied */
    BSON_APPEND_INT64(doc, "at", convo__mg_get_int(src, "at", 0));
    if (b->ttl_ms)
        BSON_APPEND_DATE_TIME(doc, "exp", now + 3 * b->ttl_ms + TTL_MARGIN_MS);
    if (!bson_iter_init_find(&it, src, "m") || !BSON_ITER_HOLDS_ARRAY(&it))
        return false;
    if (e == h->e)
        return bson_append_iter(doc, "m", 1, &it);
    bson_t arr;
    BSON_APPEND_ARRAY_BEGIN(doc, "m", &arr);
    bson_iter_recurse(&it, &item);
    for (int64_t i = 0; i < e - h->s && bson_iter_next(&item); i++)
        bson_append_iter(&arr, NULL, 0, &item);
    return bson_append_array_end(doc, &arr);
}

static int flush(call *c, mongoc_bulk_operation_t **bulk)
{
    bson_error_t e;
    int rc = 0;
    if (*bulk && !mongoc_bulk_operation_execute(*bulk, NULL, &e))
        rc = convo__mg_fail(c, &e, "copying messages");
    mongoc_bulk_operation_destroy(*bulk);
    *bulk = NULL;
    return rc;
}

/* Copies src's batches [0, upto) into generation gd of dst; *complete is false
 * when src lost batches on the way (it was deleted meanwhile). */
static int copy_batches(call *c, const bson_oid_t *gs, const bson_oid_t *gd, int64_t upto,
                        bool *complete)
{
    bson_t *filter = BCON_NEW("g", BCON_OID(gs), "s", "{", "$lt", BCON_INT64(upto), "}");
    bson_t *opts = BCON_NEW("sort", "{", "s", BCON_INT32(1), "}");
    bson_t *bulk_opts = BCON_NEW("ordered", BCON_BOOL(false));
    mongoc_cursor_t *cur =
        mongoc_collection_find_with_opts(c->batches, filter, opts, c->b->primary);
    mongoc_bulk_operation_t *bulk = NULL;
    const bson_t *doc;
    size_t pending = 0;
    int64_t next = 0, now = convo__mg_now_ms();
    bson_error_t e;
    int rc = 0;
    while (rc == 0 && next < upto && mongoc_cursor_next(cur, &doc)) {
        batch_head h;
        bson_t copy;
        convo__mg_parse_head(doc, &h);
        if (h.fence || h.s != next)
            break;
        if (!bulk)
            bulk = mongoc_collection_create_bulk_operation_with_opts(c->batches, bulk_opts);
        if (!copy_batch(c->b, doc, &h, gd, upto, now, &copy))
            rc = convo__mg_corrupt(c, "batch without messages");
        else if (!mongoc_bulk_operation_insert_with_opts(bulk, &copy, NULL, &e))
            rc = convo__mg_fail(c, &e, "copying messages");
        pending += copy.len;
        bson_destroy(&copy);
        next = h.e < upto ? h.e : upto;
        if (rc == 0 && pending >= COPY_FLUSH_BYTES) {
            rc = flush(c, &bulk);
            pending = 0;
        }
    }
    if (rc == 0 && mongoc_cursor_error(cur, &e))
        rc = convo__mg_fail(c, &e, "reading messages to copy");
    if (rc == 0)
        rc = flush(c, &bulk);
    mongoc_bulk_operation_destroy(bulk);
    mongoc_cursor_destroy(cur);
    bson_destroy(filter);
    bson_destroy(opts);
    bson_destroy(bulk_opts);
    *complete = next == upto;
    return rc;
}

/* The fork becomes visible in one step: its placeholder turns live, unless a
 * writer cancelled it meanwhile. */
static int commit_fork(call *c, const char *dst, const bson_oid_t *gd, bool *committed)
{
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(dst), "g", BCON_OID(gd), "forking", BCON_BOOL(true));
    bson_t *update = BCON_NEW("$set", "{", "live", BCON_BOOL(true), "}", "$unset", "{", "forking",
                              BCON_UTF8(""), "c", BCON_UTF8(""), "}");
    int64_t matched = 0;
    int rc = convo__mg_update_one(c, c->threads, filter, update, &matched, "committing the fork");
    *committed = rc == 0 && matched == 1;
    bson_destroy(filter);
    bson_destroy(update);
    return rc;
}

/* Leaves nothing of an uncommitted fork: its placeholder and its batches, unless
 * the thread doc shows the commit did land (its reply may have been lost). */
static int cancel_own_fork(call *c, const char *dst, const bson_oid_t *gd)
{
    thread_doc d;
    int rc = convo__mg_abort_fork(c, dst, gd);
    if (rc == 0)
        rc = convo__mg_read_thread(c, dst, false, &d);
    if (rc == 0 && !(d.found && bson_oid_equal(&d.g, gd)))
        rc = convo__mg_delete_generation(c, gd, "cancelling a fork");
    if (rc == 0)
        convo__mg_thread_free(&d);
    return rc;
}

static int fork_thread(call *c, const char *src, const char *dst, int64_t upto)
{
    thread_doc s;
    batch_head top = {false, false, 0, 0};
    bson_oid_t gd;
    bool complete = false, committed = false;
    int rc = convo__mg_read_thread(c, src, true, &s);
    if (rc == 0 && s.found && !s.forking && !convo__mg_expired(&s, convo__mg_now_ms()))
        rc = convo__mg_top_batch(c, &s.g, &top);
    else if (rc == 0)
        rc = convo__error(c->err, CONVO_ENOTFOUND, NULL, "source thread not found");
    int64_t length = top.found ? top.e : 0;
    if (rc == 0 && ((top.found && top.fence) || (!s.live && length == 0)))
        rc = convo__error(c->err, CONVO_ENOTFOUND, NULL, "source thread not found");
    if (rc == 0 && upto > length)
        rc = convo__error(c->err, CONVO_EINVAL, NULL, "fork upto %lld is past the end (%lld)",
                          (long long)upto, (long long)length);
    if (rc == 0)
        rc = claim_destination(c, dst, &s.extra, &gd);
    if (rc != 0) {
        convo__mg_thread_free(&s);
        return rc;
    }
    rc = copy_batches(c, &s.g, &gd, upto < 0 ? length : upto, &complete);
    if (rc == 0 && complete)
        rc = commit_fork(c, dst, &gd, &committed);
    if (rc == 0 && !complete)
        rc = convo__error(c->err, CONVO_ENOTFOUND, NULL,
                          "source thread was deleted while being forked");
    else if (rc == 0 && !committed)
        rc = convo__error(c->err, CONVO_ECONFLICT, NULL,
                          "destination thread was written to while being forked");
    if (!committed)
        quietly(c, cancel_own_fork, dst, &gd);
    convo__mg_thread_free(&s);
    return rc;
}

int convo__mg_thread_fork(convo_backend *b, const char *src, const char *dst, int64_t upto,
                             int64_t expected_generation, convo_error *err)
{
    call c;
    convo__mg_call_begin(&c, b, err);
    int rc = fork_thread(&c, src, dst, upto);
    convo__mg_call_end(&c);
    return rc;
}
