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
        batch_head top = {false, false, 0, 0, 0, 0, NO_BELOW, 0};
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

/* Whether the source was never rewritten up to top: every batch then sits at
 * the seq of its first message (no drift anywhere below a top without one). */
static bool never_rewritten(const batch_head *top)
{
    return top->s == top->e - top->n;
}

/* A piece of the source to copy: the batch at slot, its messages [start, hi). */
typedef struct piece {
    int64_t slot, start, hi;
} piece;

/* What the walk over the source found: the pieces, highest first, and while
 * they fit in COPY_FLUSH_BYTES their batches too (w, in the same order). */
typedef struct source {
    piece *p;
    size_t count, cap, bytes;
    bool kept;
    walk w;
} source;

static int source_add(call *c, source *src, const bson_t *doc, const batch_head *h, int64_t hi)
{
    if (src->count == src->cap) {
        size_t cap = src->cap ? src->cap * 2 : 64;
        piece *grown = realloc(src->p, cap * sizeof *grown);
        if (!grown)
            return convo__mg_no_memory(c);
        src->p = grown;
        src->cap = cap;
    }
    src->p[src->count++] = (piece){h->s, h->e - h->n, hi};
    src->bytes += doc->len;
    if (src->kept && src->bytes > COPY_FLUSH_BYTES) { /* large: copy it in a second pass */
        convo__mg_walk_free(&src->w);
        src->w = (walk){NULL, NULL, 0, 0};
        src->kept = false;
    }
    if (src->kept && convo__mg_walk_keep(&src->w, doc) != 0)
        return convo__mg_no_memory(c);
    return 0;
}

/* The source's batches at or below the top slot (and, never rewritten, below
 * upto), highest (dir -1) or lowest first. */
static mongoc_cursor_t *source_batches(call *c, const bson_oid_t *gs, const batch_head *top,
                                       int64_t upto, int dir)
{
    bson_t *filter = BCON_NEW("g", BCON_OID(gs), "s", "{", "$lte", BCON_INT64(top->s), "}");
    if (never_rewritten(top))
        BCON_APPEND(filter, "s", "{", "$lt", BCON_INT64(upto), "}");
    bson_t *opts = BCON_NEW("sort", "{", "s", BCON_INT32(dir), "}", "projection", "{", "cp",
                            BCON_INT32(0), "dc", BCON_INT32(0), "}");
    mongoc_cursor_t *cur = mongoc_collection_find_with_opts(c->batches, filter, opts, c->b->primary);
    bson_destroy(filter);
    bson_destroy(opts);
    return cur;
}

/* The batches holding src's messages [0, upto) as of its top batch, walked down
 * as a load walks them (convo__mg_walk_step), in one cursor: from top itself
 * when the source was rewritten, else from the batches below upto. *complete is
 * false when the chain has a gap: a delete, or the collection after a rewrite
 * newer than top, removed batches this walk needs. */
static int read_source(call *c, const bson_oid_t *gs, const batch_head *top, int64_t upto,
                       source *src, bool *complete)
{
    bool jump = never_rewritten(top);
    mongoc_cursor_t *cur = source_batches(c, gs, top, upto, -1);
    const bson_t *doc;
    chain_walk cw = {jump ? upto : top->e, NO_BELOW, false};
    int rc = 0;
    *complete = upto == 0;
    while (rc == 0 && !*complete && mongoc_cursor_next(cur, &doc)) {
        batch_head h;
        int64_t hi = 0;
        convo__mg_parse_head(doc, &h);
        if (!cw.started && !jump && h.s != top->s)
            break; /* top itself is gone */
        int step = convo__mg_walk_step(&cw, &h, &hi);
        if (step == STEP_GAP)
            break;
        if (step == STEP_TAKE && h.e - h.n < upto)
            rc = source_add(c, src, doc, &h, hi < upto ? hi : upto);
        *complete = cw.lim <= 0;
    }
    bson_error_t e;
    if (rc == 0 && mongoc_cursor_error(cur, &e))
        rc = convo__mg_fail(c, &e, "reading messages to copy");
    mongoc_cursor_destroy(cur);
    return rc;
}

/* A copy for dst of the messages [p->start, p->hi) of source batch src: at the
 * slot of its first message (dst's chain has no rewrite in it), rewrite count r. */
static bool copy_batch(const convo_backend *b, const bson_t *src, const piece *p,
                       const bson_oid_t *gd, int64_t r, int64_t now, bson_t *doc)
{
    bson_iter_t it, item;
    int64_t n = p->hi - p->start;
    bson_init(doc);
    BSON_APPEND_OID(doc, "g", gd);
    BSON_APPEND_INT64(doc, "s", p->start);
    BSON_APPEND_INT64(doc, "e", p->hi);
    BSON_APPEND_INT64(doc, "n", n);
    if (r)
        BSON_APPEND_INT64(doc, "r", r);
    BSON_APPEND_INT64(doc, "k", p->start); /* the source's key is not copied */
    BSON_APPEND_INT64(doc, "at", convo__mg_get_int(src, "at", 0));
    if (b->ttl_ms)
        BSON_APPEND_DATE_TIME(doc, "exp", now + 3 * b->ttl_ms + TTL_MARGIN_MS);
    if (!bson_iter_init_find(&it, src, "m") || !BSON_ITER_HOLDS_ARRAY(&it))
        return false;
    bson_t arr;
    BSON_APPEND_ARRAY_BEGIN(doc, "m", &arr);
    bson_iter_recurse(&it, &item);
    for (int64_t i = 0; i < n && bson_iter_next(&item); i++)
        bson_append_iter(&arr, NULL, 0, &item);
    return bson_append_array_end(doc, &arr);
}

/* Copies one piece into the bulk (made on first use), flushing every 8 MiB. */
static int copy_piece(call *c, mongoc_bulk_operation_t **bulk, size_t *pending,
                      const bson_t *src, const piece *p, const bson_oid_t *gd, int64_t r,
                      int64_t now)
{
    bson_error_t e;
    bson_t copy;
    int rc = 0;
    if (!*bulk) {
        bson_t *opts = BCON_NEW("ordered", BCON_BOOL(false));
        *bulk = mongoc_collection_create_bulk_operation_with_opts(c->batches, opts);
        bson_destroy(opts);
    }
    if (!copy_batch(c->b, src, p, gd, r, now, &copy))
        rc = convo__mg_corrupt(c, "batch without messages");
    else if (!mongoc_bulk_operation_insert_with_opts(*bulk, &copy, NULL, &e))
        rc = convo__mg_fail(c, &e, "copying messages");
    *pending += copy.len;
    bson_destroy(&copy);
    if (rc == 0 && *pending >= COPY_FLUSH_BYTES) {
        if (!mongoc_bulk_operation_execute(*bulk, NULL, &e))
            rc = convo__mg_fail(c, &e, "copying messages");
        mongoc_bulk_operation_destroy(*bulk);
        *bulk = NULL;
        *pending = 0;
    }
    return rc;
}

/* A source larger than COPY_FLUSH_BYTES: its pieces' batches read again, lowest
 * slot first; *complete false when one of them is gone meanwhile. */
static int copy_second_pass(call *c, const bson_oid_t *gs, const batch_head *top, int64_t upto,
                            const source *src, mongoc_bulk_operation_t **bulk, size_t *pending,
                            const bson_oid_t *gd, int64_t now, bool *complete)
{
    mongoc_cursor_t *cur = source_batches(c, gs, top, upto, 1);
    const bson_t *doc;
    size_t next = src->count;
    bson_error_t e;
    int rc = 0;
    while (rc == 0 && next > 0 && mongoc_cursor_next(cur, &doc)) {
        const piece *p = &src->p[next - 1];
        int64_t slot = convo__mg_get_int(doc, "s", -1);
        if (slot < p->slot)
            continue; /* replaced by a rewrite */
        if (slot > p->slot)
            break; /* p's batch is gone */
        rc = copy_piece(c, bulk, pending, doc, p, gd, top->r, now);
        next--;
    }
    if (rc == 0 && mongoc_cursor_error(cur, &e))
        rc = convo__mg_fail(c, &e, "reading messages to copy");
    mongoc_cursor_destroy(cur);
    *complete = next == 0;
    return rc;
}

/* Copies src's messages [0, upto) as of its top batch into generation gd of dst,
 * lowest first, in unordered bulks of 8 MiB; *complete is false when src lost
 * batches on the way (deleted, or rewritten and collected). Every batch at or
 * below top is as it was when top was read, or gone: the copy is all of one
 * rewrite count of src. Up to 8 MiB is copied from the one walk that found the
 * batches; a larger source is read a second time. *top_slot: the slot of dst's
 * top batch (-1: none). */
static int copy_batches(call *c, const bson_oid_t *gs, const batch_head *top, const bson_oid_t *gd,
                        int64_t upto, bool *complete, int64_t *top_slot)
{
    source src = {NULL, 0, 0, 0, true, {NULL, NULL, 0, 0}};
    mongoc_bulk_operation_t *bulk = NULL;
    size_t pending = 0;
    int64_t now = convo__mg_now_ms();
    bson_error_t e;
    int rc = read_source(c, gs, top, upto, &src, complete);
    if (rc == 0 && *complete && src.count == 0 && top->r) {
        /* no message to copy: an empty batch alone carries the rewrite count, as
         * a rewrite that removed everything leaves one */
        bool dup;
        bson_t *doc = BCON_NEW("g", BCON_OID(gd), "s", BCON_INT64(0), "e", BCON_INT64(0), "n",
                               BCON_INT64(0), "r", BCON_INT64(top->r), "pb", BCON_INT64(-1),
                               "k", BCON_INT64(0), "at", BCON_INT64(convo__now_micros()), "m",
                               "[", "]");
        if (c->b->ttl_ms)
            BSON_APPEND_DATE_TIME(doc, "exp", now + 3 * c->b->ttl_ms + TTL_MARGIN_MS);
        rc = convo__mg_insert_doc(c, c->batches, doc, &dup, "copying messages");
        bson_destroy(doc);
    }
    if (rc == 0 && *complete && !src.kept)
        rc = copy_second_pass(c, gs, top, upto, &src, &bulk, &pending, gd, now, complete);
    for (size_t i = src.w.count; rc == 0 && *complete && src.kept && i-- > 0;)
        rc = copy_piece(c, &bulk, &pending, src.w.docs[i], &src.p[i], gd, top->r, now);
    if (rc == 0 && bulk && !mongoc_bulk_operation_execute(bulk, NULL, &e))
        rc = convo__mg_fail(c, &e, "copying messages");
    mongoc_bulk_operation_destroy(bulk);
    *top_slot = src.count ? src.p[0].start : top->r ? 0 : -1;
    convo__mg_walk_free(&src.w);
    free(src.p);
    return rc;
}

/* The fork becomes visible in one step: its placeholder turns live, unless a
 * writer cancelled it meanwhile. */
static int commit_fork(call *c, const char *dst, const bson_oid_t *gd, int64_t length,
                       int64_t top_slot, bool *committed)
{
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(dst), "g", BCON_OID(gd), "forking", BCON_BOOL(true));
    bson_t *update = BCON_NEW("$set", "{", "live", BCON_BOOL(true), "}", "$unset", "{", "forking",
                              BCON_UTF8(""), "c", BCON_UTF8(""), "}");
    if (convo__mg_listable(dst)) { /* a fork is a new thread: its own times, in the index */
        int64_t us = convo__now_micros();
        bson_t *times = BCON_NEW("$set", "{", "live", BCON_BOOL(true), "ua", BCON_INT64(us), "ca",
                                 BCON_INT64(us), "ln", BCON_INT64(length), "sl",
                                 BCON_INT64(top_slot), "}", "$unset", "{", "forking",
                                 BCON_UTF8(""), "c", BCON_UTF8(""), "}");
        bson_destroy(update);
        update = times;
    }
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

/* One try at a fork (cps: with the checkpoints, copied before the commit);
 * *again when src was rewritten while being copied. */
static int fork_attempt(call *c, const char *src, const char *dst, int64_t upto,
                        int64_t expected_generation, bool cps, bool *again)
{
    thread_doc s;
    batch_head top = {false, false, 0, 0, 0, 0, NO_BELOW, 0};
    bson_oid_t gd;
    bool complete = false, committed = false;
    int rc = convo__mg_read_thread(c, src, true, &s);
    if (rc == 0 && s.found && !s.forking && !convo__mg_expired(&s, convo__mg_now_ms()))
        rc = convo__mg_top_batch(c, &s.g, &top);
    else if (rc == 0)
        rc = convo__error(c->err, CONVO_ENOTFOUND, NULL, "source thread not found");
    int64_t length = top.found ? top.e : 0;
    if (rc == 0 && ((top.found && top.fence) || (!s.live && !top.found)))
        rc = convo__error(c->err, CONVO_ENOTFOUND, NULL, "source thread not found");
    if (rc == 0 && expected_generation >= 0 && expected_generation != top.r)
        rc = convo__mg_generation_conflict(c, length, top.r, expected_generation);
    if (rc == 0 && upto > length)
        rc = convo__error(c->err, CONVO_EINVAL, NULL, "fork upto %lld is past the end (%lld)",
                          (long long)upto, (long long)length);
    if (rc == 0)
        rc = claim_destination(c, dst, &s.extra, &gd);
    if (rc != 0) {
        convo__mg_thread_free(&s);
        return rc;
    }
    int64_t top_slot = -1;
    rc = copy_batches(c, &s.g, &top, &gd, upto < 0 ? length : upto, &complete, &top_slot);
    if (rc == 0 && complete && cps)
        rc = convo__mg_copy_checkpoints(c, src, &s.g, &gd, upto < 0 ? length : upto);
    if (rc == 0 && complete)
        rc = commit_fork(c, dst, &gd, upto < 0 ? length : upto, top_slot, &committed);
    if (rc == 0 && !complete) { /* deleted, or rewritten and collected meanwhile */
        thread_doc now;
        batch_head now_top = {false, false, 0, 0, 0, 0, NO_BELOW, 0};
        rc = convo__mg_read_thread(c, src, false, &now);
        if (rc == 0 && now.found && bson_oid_equal(&now.g, &s.g))
            rc = convo__mg_top_batch(c, &s.g, &now_top);
        if (rc == 0 && now_top.found && !now_top.fence && now_top.s != top.s)
            *again = true;
        else if (rc == 0)
            rc = convo__error(c->err, CONVO_ENOTFOUND, NULL,
                              "source thread was deleted while being forked");
        convo__mg_thread_free(&now);
    } else if (rc == 0 && !committed) {
        rc = convo__error(c->err, CONVO_ECONFLICT, NULL,
                          "destination thread was written to while being forked");
    }
    if (!committed)
        quietly(c, cancel_own_fork, dst, &gd);
    convo__mg_thread_free(&s);
    return rc;
}

static int fork_thread(convo_backend *b, const char *src, const char *dst, int64_t upto,
                       int64_t expected_generation, bool cps, convo_error *err)
{
    call c;
    convo__mg_call_begin(&c, b, err);
    int rc = 0;
    for (int attempt = 0;; attempt++) {
        bool again = false;
        if (attempt == ATTEMPTS) {
            rc = convo__error(err, CONVO_EIO, NULL,
                              "MongoDB: the source thread kept being rewritten under the fork");
            break;
        }
        convo__mg_backoff(attempt);
        rc = fork_attempt(&c, src, dst, upto, expected_generation, cps, &again);
        if (rc != 0 || !again)
            break;
    }
    convo__mg_call_end(&c);
    return rc;
}

int convo__mg_thread_fork(convo_backend *b, const char *src, const char *dst, int64_t upto,
                          int64_t expected_generation, convo_error *err)
{
    return fork_thread(b, src, dst, upto, expected_generation, false, err);
}

int convo__mg_thread_copy(convo_backend *b, const char *src, const char *dst, int64_t upto,
                          int64_t expected_generation, convo_error *err)
{
    return fork_thread(b, src, dst, upto, expected_generation, true, err);
}
