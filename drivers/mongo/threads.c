/* threads.c — the MongoDB driver: append, load, save_extra, delete, list. */
#include "mongo_int.h"

/* ---- append ---- */

/* Appends message i as {r: role, b: bytes} (+ a: created_at when it differs from
 * the batch's at) to the messages array; false when it grows past limit. */
bool convo__mg_add_message(bson_t *arr, uint32_t i, const convo_message_in *msg, bool own_at,
                        int64_t at, size_t limit)
{
    char buf[16];
    const char *key;
    bson_t item;
    bson_uint32_to_string(i, &key, buf, sizeof buf);
    if (msg->len >= DOC_LIMIT || !bson_append_document_begin(arr, key, -1, &item))
        return false;
    bool ok = bson_append_utf8(&item, "r", 1, msg->role, -1) &&
              bson_append_binary(&item, "b", 1, BSON_SUBTYPE_BINARY,
                                 (const uint8_t *)msg->bytes, (uint32_t)msg->len) &&
              (!own_at || bson_append_int64(&item, "a", 1, at));
    return bson_append_document_end(arr, &item) && ok && arr->len <= limit;
}

/* The messages array [{r: role, b: bytes}, ...] of a batch document. */
int convo__mg_build_messages(call *c, const convo_message_in *msgs, size_t n, bson_t *arr)
{
    bson_init(arr);
    for (size_t i = 0; i < n; i++)
        if (!convo__mg_add_message(arr, (uint32_t)i, &msgs[i], false, 0, DOC_LIMIT))
            return convo__error(c->err, CONVO_ETOOLARGE, NULL,
                                "batch is larger than a MongoDB document (16 MiB); split it");
    return 0;
}

/* The same, refused (CONVO_ETOOLARGE, too_large) when a batch document of
 * them with idempotency key `key` would pass MongoDB's limit: its size is the
 * same whatever slot, numbers and times it gets. arr is made in any case. */
int convo__mg_batch_messages(call *c, const convo_message_in *msgs, size_t n, const char *key,
                             const char *too_large, bson_t *arr)
{
    const batch_pos far = {INT64_MAX, 0, INT64_MAX, INT64_MAX}; /* the largest s, e, r, pb */
    bson_oid_t zero;
    bson_t probe;
    int rc = convo__mg_build_messages(c, msgs, n, arr);
    if (rc != 0)
        return rc;
    bson_oid_init_from_string(&zero, "000000000000000000000000");
    if (!convo__mg_build_batch(c->b, &zero, &far, n, key, 0, 0, arr, &probe))
        rc = convo__error(c->err, CONVO_ETOOLARGE, NULL, "%s", too_large);
    bson_destroy(&probe);
    return rc;
}

/* A batch document at p: slot s, messages [start, start + n), generation r
 * (left out while 0). */
bool convo__mg_build_batch(const convo_backend *b, const bson_oid_t *g, const batch_pos *p,
                           size_t n, const char *key, int64_t at, int64_t now, const bson_t *m,
                           bson_t *doc)
{
    bson_init(doc);
    BSON_APPEND_OID(doc, "g", g);
    BSON_APPEND_INT64(doc, "s", p->slot);
    BSON_APPEND_INT64(doc, "e", p->start + (int64_t)n);
    BSON_APPEND_INT64(doc, "n", (int64_t)n);
    if (p->r)
        BSON_APPEND_INT64(doc, "r", p->r);
    if (p->pb != NO_BELOW)
        BSON_APPEND_INT64(doc, "pb", p->pb);
    BSON_APPEND_INT64(doc, "at", at);
    if (key) /* k is unique per generation: the caller's key, or else the slot */
        BSON_APPEND_UTF8(doc, "k", key);
    else
        BSON_APPEND_INT64(doc, "k", p->slot);
    if (b->ttl_ms)
        BSON_APPEND_DATE_TIME(doc, "exp", now + 3 * b->ttl_ms + TTL_MARGIN_MS);
    return BSON_APPEND_ARRAY(doc, "m", m) && doc->len <= DOC_LIMIT;
}

/* A stage {$lookup: {from, let: {g: "$g"}, pipeline, as}}: documents of the
 * thread doc's generation in collection from. The join is the pipeline's first
 * $match, an $expr equality that MongoDB 4.4 answers from an index (no
 * localField with a pipeline: that is MongoDB 5.0's form), with the conditions
 * of match, if any, beside it. */
void convo__mg_lookup(bson_t *stages, const char *pos, const char *from, const bson_t *match,
                      const bson_t *rest, const char *as)
{
    bson_t stage, lookup, let, pipeline, first, cond, expr, eq;
    BSON_APPEND_DOCUMENT_BEGIN(stages, pos, &stage);
    BSON_APPEND_DOCUMENT_BEGIN(&stage, "$lookup", &lookup);
    BSON_APPEND_UTF8(&lookup, "from", from);
    BSON_APPEND_DOCUMENT_BEGIN(&lookup, "let", &let);
    BSON_APPEND_UTF8(&let, "g", "$g");
    bson_append_document_end(&lookup, &let);
    BSON_APPEND_ARRAY_BEGIN(&lookup, "pipeline", &pipeline);
    BSON_APPEND_DOCUMENT_BEGIN(&pipeline, "0", &first);
    BSON_APPEND_DOCUMENT_BEGIN(&first, "$match", &cond);
    BSON_APPEND_DOCUMENT_BEGIN(&cond, "$expr", &expr);
    BSON_APPEND_ARRAY_BEGIN(&expr, "$eq", &eq);
    BSON_APPEND_UTF8(&eq, "0", "$g");
    BSON_APPEND_UTF8(&eq, "1", "$$g");
    bson_append_array_end(&expr, &eq);
    bson_append_document_end(&cond, &expr);
    if (match)
        bson_concat(&cond, match);
    bson_append_document_end(&first, &cond);
    bson_append_document_end(&pipeline, &first);
    bson_iter_t it;
    char key[16];
    uint32_t n = 1;
    if (bson_iter_init(&it, rest)) {
        while (bson_iter_next(&it)) {
            const char *k;
            bson_uint32_to_string(n++, &k, key, sizeof key);
            bson_append_value(&pipeline, k, -1, bson_iter_value(&it));
        }
    }
    bson_append_array_end(&lookup, &pipeline);
    BSON_APPEND_UTF8(&lookup, "as", as);
    bson_append_document_end(&stage, &lookup);
    bson_append_document_end(stages, &stage);
}

/* convo__mg_lookup on the batches. */
void convo__mg_lookup_batches(call *c, bson_t *stages, const char *pos, const bson_t *match,
                              const bson_t *rest, const char *as)
{
    convo__mg_lookup(stages, pos, c->b->batches_name, match, rest, as);
}

/* The first document of array field name of doc, if any. */
bool convo__mg_first_of(const bson_t *doc, const char *name, bson_t *out)
{
    bson_iter_t it, arr;
    uint32_t len;
    const uint8_t *data;
    if (!bson_iter_init_find(&it, doc, name) || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &arr) || !bson_iter_next(&arr) || !BSON_ITER_HOLDS_DOCUMENT(&arr))
        return false;
    bson_iter_document(&arr, &len, &data);
    return bson_init_static(out, data, len);
}

/* What an append reads, in one round trip (an aggregate on the thread doc): the
 * thread doc without its extra, the top batch of its generation and, with a key,
 * the batch holding that key (*replayed, res). The thread doc is read before
 * the batches, as two separate finds would. */
int convo__mg_read_for_append(call *c, const char *id, const char *key, thread_doc *t,
                           batch_head *top, bool *replayed, convo_append_result *res)
{
    bson_t stages = BSON_INITIALIZER, *match = BCON_NEW("$match", "{", "_id", BCON_UTF8(id), "}");
    bson_t *project = BCON_NEW("$project", "{", "extra", BCON_INT32(0), "}");
    bson_t *highest = BCON_NEW("0", "{", "$sort", "{", "s", BCON_INT32(-1), "}", "}", "1", "{",
                               "$limit", BCON_INT32(1), "}", "2", "{", "$project", "{", "m",
                               BCON_INT32(0), "cp", BCON_INT32(0), "dc", BCON_INT32(0), "}", "}");
    BSON_APPEND_DOCUMENT(&stages, "0", match);
    BSON_APPEND_DOCUMENT(&stages, "1", project);
    convo__mg_lookup_batches(c, &stages, "2", NULL, highest, "top");
    if (key) { /* a string: never the position a batch without a key has in k */
        bson_t *cond = BCON_NEW("k", "{", "$eq", BCON_UTF8(key), "}");
        bson_t *keyed = BCON_NEW("0", "{", "$limit", BCON_INT32(1), "}", "1", "{", "$project",
                                 "{", "e", BCON_INT32(1), "n", BCON_INT32(1), "}", "}");
        convo__mg_lookup_batches(c, &stages, "3", cond, keyed, "kb");
        bson_destroy(cond);
        bson_destroy(keyed);
    }
    mongoc_cursor_t *cur =
        mongoc_collection_aggregate(c->threads, MONGOC_QUERY_NONE, &stages, NULL, c->b->primary);
    const bson_t *doc;
    bson_t item;
    bson_error_t e;
    int rc = 0;
    memset(t, 0, sizeof *t);
    bson_init(&t->extra);
    memset(top, 0, sizeof *top);
    *replayed = false;
    if (mongoc_cursor_next(cur, &doc)) {
        t->found = true;
        rc = convo__mg_parse_thread(c, doc, t);
        if (convo__mg_first_of(doc, "top", &item))
            convo__mg_parse_head(&item, top);
        if (convo__mg_first_of(doc, "kb", &item)) { /* its messages are [e - n, e) */
            *replayed = true;
            res->count = (size_t)convo__mg_get_int(&item, "n", 0);
            res->first_seq = convo__mg_get_int(&item, "e", 0) - (int64_t)res->count;
            res->replayed = 1;
        }
    } else if (mongoc_cursor_error(cur, &e)) {
        rc = convo__mg_fail(c, &e, "reading a thread");
    }
    mongoc_cursor_destroy(cur);
    bson_destroy(&stages);
    bson_destroy(match);
    bson_destroy(project);
    bson_destroy(highest);
    return rc;
}

/* With ttl, moves the thread's expiry; matching nothing means a delete retired
 * this incarnation meanwhile. */
static int touch_thread(call *c, const char *id, const bson_oid_t *g, int64_t now,
                        bool refreshed, int64_t *matched)
{
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(id), "g", BCON_OID(g));
    bson_t update = BSON_INITIALIZER;
    convo__mg_append_expiry(c->b, &update, now, refreshed);
    int rc = convo__mg_update_one(c, c->threads, filter, &update, matched, "updating a thread");
    bson_destroy(&update);
    bson_destroy(filter);
    return rc;
}

/* With ttl, the batches' expiry and then the thread doc's move before a batch
 * lands, so a stored batch never expires first; *again when the incarnation was
 * retired meanwhile. */
int convo__mg_extend_expiry(call *c, const char *id, const thread_doc *t, int64_t now, bool *again)
{
    bool refreshed = false;
    int64_t matched = 1;
    if (!c->b->ttl_ms)
        return 0;
    int rc = convo__mg_refresh_batches(c, t, now, &refreshed);
    if (rc == 0)
        rc = touch_thread(c, id, &t->g, now, refreshed, &matched);
    *again = rc == 0 && matched == 0;
    return rc;
}

/* Marks a thread doc live; *matched (may be NULL) 0: a delete removed it meanwhile. */
int convo__mg_mark_live(call *c, const char *id, const bson_oid_t *g, int64_t *matched)
{
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(id), "g", BCON_OID(g));
    bson_t *update = BCON_NEW("$set", "{", "live", BCON_BOOL(true), "}");
    int rc = convo__mg_update_one(c, c->threads, filter, update, matched, "updating a thread");
    bson_destroy(filter);
    bson_destroy(update);
    return rc;
}

/* One try at an append; *again when a race was lost and it must start over. */
static int append_attempt(call *c, const char *id, const bson_t *m, size_t n,
                          const convo_append_opts *o, convo_append_result *res, bool *again)
{
    thread_doc t;
    batch_head top;
    bool replayed = false, created = false, dup = false;
    int64_t now = convo__mg_now_ms();
    int rc = convo__mg_read_for_append(c, id, o->idempotency_key, &t, &top, &replayed, res);
    if (rc == 0) /* a new placeholder has no batch yet: length 0, no key to find */
        rc = convo__mg_clear_way(c, id, true, &t, &created, again);
    if (rc || *again || replayed)
        goto out;
    if (top.found && top.fence) { /* a delete is under way: finish it, then start over */
        rc = convo__mg_finish_delete(c, id, &t.g, false);
        *again = true;
        goto out;
    }
    batch_pos pos;
    convo__mg_next_pos(&top, &pos);
    int64_t length = pos.start;
    if (o->expected_length >= 0 && o->expected_length != length) {
        rc = convo__error(c->err, CONVO_ECONFLICT, NULL, "thread has %lld messages, expected %lld",
                          (long long)length, (long long)o->expected_length);
        goto out;
    }
    if ((rc = convo__mg_generation_conflict(c, length, pos.r, o->expected_generation)) != 0)
        goto out;
    if ((rc = convo__mg_extend_expiry(c, id, &t, now, again)) != 0 || *again)
        goto out;
    bson_t doc;
    int64_t at = convo__now_micros();
    convo__mg_build_batch(c->b, &t.g, &pos, n, o->idempotency_key, at, now, m, &doc);
    rc = convo__mg_insert_batch(c, &doc, &dup, "appending");
    bson_destroy(&doc);
    if (rc || (*again = dup))
        goto out;
    /* the batch is the append; the index follows it in the same call, without
     * waiting for the server's answer (lost, or a crash in between: repaired by
     * the next write, load or listing of the thread) */
    quietly(c, convo__mg_index_after_write, id, &t.g, pos.slot, length + (int64_t)n, at);
    res->first_seq = length;
    res->count = n;
    res->replayed = 0;
out:
    convo__mg_thread_free(&t);
    return rc;
}

typedef struct append_args {
    const char *id;
    const bson_t *m;
    size_t n;
    const convo_append_opts *opts;
    convo_append_result *res;
} append_args;

static int append_try(call *c, const void *arg, bool *again)
{
    const append_args *a = arg;
    return append_attempt(c, a->id, a->m, a->n, a->opts, a->res, again);
}

int convo__mg_append(convo_backend *b, const char *id, const convo_message_in *msgs, size_t n,
                        const convo_append_opts *opts, convo_append_result *res,
                        convo_error *err)
{
    call c;
    bson_t m;
    convo__mg_call_begin(&c, b, err);
    int rc = convo__mg_batch_messages(&c, msgs, n, opts->idempotency_key,
                                      "batch is larger than a MongoDB document (16 MiB); split it",
                                      &m);
    if (rc == 0) {
        append_args a = {id, &m, n, opts, res};
        rc = convo__mg_retry(&c, append_try, &a);
    }
    bson_destroy(&m);
    convo__mg_call_end(&c);
    return rc;
}

/* ---- load ---- */

void convo__mg_walk_free(walk *w)
{
    for (size_t i = 0; i < w->count; i++)
        bson_destroy(w->docs[i]);
    free(w->docs);
    free(w->hi);
}

/* Keeps a copy of doc; its hi (where a later batch replaced its messages) is
 * INT64_MAX until the caller sets it. */
int convo__mg_walk_keep(walk *w, const bson_t *doc)
{
    if (w->count == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 16;
        bson_t **grown = realloc(w->docs, cap * sizeof *grown);
        if (!grown)
            return CONVO_ENOMEM;
        w->docs = grown;
        int64_t *hi = realloc(w->hi, cap * sizeof *hi);
        if (!hi)
            return CONVO_ENOMEM;
        w->hi = hi;
        w->cap = cap;
    }
    w->hi[w->count] = INT64_MAX;
    w->docs[w->count++] = bson_copy(doc);
    return 0;
}

/* Adds the messages of one batch document that fall in [from, to). */
static int add_messages(call *c, convo_history *h, const bson_t *doc, int64_t from, int64_t to)
{
    int64_t n = convo__mg_get_int(doc, "n", -1), at = convo__mg_get_int(doc, "at", 0);
    int64_t s = convo__mg_get_int(doc, "e", 0) - n; /* its first message */
    bson_iter_t it, arr;
    if (!bson_iter_init_find(&it, doc, "m") || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &arr))
        return convo__mg_corrupt(c, "batch without messages");
    int64_t i = 0;
    for (; bson_iter_next(&arr); i++) {
        bson_iter_t item, role, bytes;
        if (s + i < from || s + i >= to)
            continue;
        uint32_t len, rlen;
        const uint8_t *data;
        bson_subtype_t sub;
        if (!BSON_ITER_HOLDS_DOCUMENT(&arr) || !bson_iter_recurse(&arr, &item) ||
            !bson_iter_find_descendant(&item, "r", &role) || !BSON_ITER_HOLDS_UTF8(&role))
            return convo__mg_corrupt(c, "message without a role");
        const char *r = bson_iter_utf8(&role, &rlen);
        if (!bson_iter_recurse(&arr, &item) || !bson_iter_find_descendant(&item, "b", &bytes) ||
            !BSON_ITER_HOLDS_BINARY(&bytes))
            return convo__mg_corrupt(c, "message without bytes");
        bson_iter_binary(&bytes, &sub, &len, &data);
        int64_t when = bson_iter_recurse(&arr, &item) && bson_iter_find(&item, "a") &&
                               BSON_ITER_HOLDS_INT64(&item)
                           ? bson_iter_int64(&item)
                           : at;
        if (convo__history_add(h, (const char *)data, len, r, s + i, when) != 0)
            return convo__mg_no_memory(c);
    }
    return i == n ? 0
                  : convo__mg_corrupt(c, "batch holds a different number of messages than it says");
}

/* Walks generation g downwards by slot (convo__mg_walk_step) and keeps the
 * batches covering [from, to), each with hi, where its messages stop counting.
 * From the top (*length < 0), the first batch is *top and gives the length;
 * else (a window of a thread whose top batch has no drift: never
 * rewritten, so every batch sits at the seq of its first message) it starts
 * with the batches below `to`. A gap means a delete (or the collection after a
 * rewrite newer than the top read) is removing batches: *again. A fence at the
 * top means the thread was deleted. *any: some batch was seen. */
static int walk_down(call *c, const thread_doc *t, const convo_load_opts *o, batch_head *top,
                     int64_t *length, int64_t *from, int64_t *to, walk *w, bool *any,
                     bool *again, bool *deleted)
{
    bool from_top = *length < 0;
    bson_t *filter = convo__mg_generation_filter(&t->g);
    if (!from_top)
        BCON_APPEND(filter, "s", "{", "$lt", BCON_INT64(*to), "}");
    int64_t most = from_top ? (o->tail > 0 ? o->tail + 1 : 0) : *to - *from;
    bson_t *opts = BCON_NEW("sort", "{", "s", BCON_INT32(-1), "}", "projection", "{", "cp",
                            BCON_INT32(0), "dc", BCON_INT32(0), "}");
    if (most > 0) /* not a limit: replaced batches may come between */
        BCON_APPEND(opts, "batchSize", BCON_INT64(most < 1000 ? most : 1000));
    mongoc_cursor_t *cur =
        mongoc_collection_find_with_opts(c->batches, filter, opts, c->b->primary);
    const bson_t *doc;
    chain_walk cw = {*to, NO_BELOW, false};
    bool covered = false;
    int rc = 0;
    *any = false;
    while (rc == 0 && !covered && mongoc_cursor_next(cur, &doc)) {
        batch_head h;
        int64_t hi = 0;
        convo__mg_parse_head(doc, &h);
        if (!*any && from_top) {
            *top = h;
            if ((*deleted = h.fence))
                break;
            *length = cw.lim = h.e;
            convo__load_range(o, *length, from, to);
        }
        *any = true;
        int step = convo__mg_walk_step(&cw, &h, &hi);
        if (step == STEP_GAP) {
            *again = true;
            break;
        }
        if (step == STEP_TAKE && h.e - h.n < *to && hi > *from) {
            if ((rc = convo__mg_walk_keep(w, doc)) != 0)
                rc = convo__mg_no_memory(c);
            else
                w->hi[w->count - 1] = hi;
        }
        covered = cw.lim <= *from;
    }
    bson_error_t e;
    if (rc == 0 && mongoc_cursor_error(cur, &e))
        rc = convo__mg_fail(c, &e, "loading messages");
    if (rc == 0 && !*any && from_top && !*deleted) {
        *length = 0; /* no batch at all */
        *from = *to = 0;
    } else if (rc == 0 && !covered && !*deleted && *from < *to) {
        *again = true; /* the chain stopped short */
    }
    mongoc_cursor_destroy(cur);
    bson_destroy(filter);
    bson_destroy(opts);
    return rc;
}

/* A thread doc with no messages could also be one whose delete finished between
 * our two reads: look again. */
static int still_there(call *c, const char *id, const thread_doc *t, bool *again)
{
    thread_doc now;
    int rc = convo__mg_read_thread(c, id, false, &now);
    if (rc == 0 && !(now.found && bson_oid_equal(&now.g, &t->g) && !now.forking))
        *again = true;
    convo__mg_thread_free(&now);
    return rc;
}

static int load_attempt(call *c, const char *id, const convo_load_opts *o, convo_history *h,
                        bool *again)
{
    thread_doc t;
    walk w = {NULL, NULL, 0, 0};
    batch_head top = {false, false, 0, 0, 0, 0, NO_BELOW, 0};
    bool deleted = false, any = false;
    int64_t length = -1, from = 0, to = 0;
    int rc = convo__mg_read_thread(c, id, o->with_extra, &t);
    if (rc == 0 && (!t.found || t.forking || convo__mg_expired(&t, convo__mg_now_ms())))
        rc = convo__error(c->err, CONVO_ENOTFOUND, NULL, "thread not found");
    if (rc == 0 && o->limit > 0) { /* the window depends on the length: read it first */
        rc = convo__mg_top_batch(c, &t.g, &top);
        deleted = top.found && top.fence;
        length = top.found ? top.e : 0;
        any = top.found;
        convo__load_range(o, length, &from, &to);
        if (top.found && top.s != top.e - top.n) /* rewritten: walk from the top */
            length = -1;
    }
    if (rc == 0 && !deleted && (length < 0 || from < to))
        rc = walk_down(c, &t, o, &top, &length, &from, &to, &w,
                       length < 0 ? &any : &(bool){false}, again, &deleted);
    if (rc == 0 && !*again && (deleted || (!any && !t.live)))
        rc = convo__error(c->err, CONVO_ENOTFOUND, NULL, "thread not found");
    if (rc == 0 && !*again && !any)
        rc = still_there(c, id, &t, again);
    if (rc == 0 && !*again && convo__history_reserve(h, (size_t)(to - from)) != 0)
        rc = convo__mg_no_memory(c);
    for (size_t i = w.count; rc == 0 && !*again && i-- > 0;)
        rc = add_messages(c, h, w.docs[i], from, to < w.hi[i] ? to : w.hi[i]);
    if (rc == 0 && !*again && !deleted && length >= 0) /* a writer died before the index */
        quietly(c, convo__mg_index_repair, id, &t, &top);
    convo__history_set_length(h, length);
    convo__history_set_generation(h, top.r);
    char *extra = NULL;
    if (rc == 0 && !*again && o->with_extra &&
        (rc = convo__mg_extra_to_json(c, &t.extra, &extra)) == 0 &&
        convo__history_set_extra(h, extra, strlen(extra)) != 0)
        rc = convo__mg_no_memory(c);
    free(extra);
    convo__mg_walk_free(&w);
    convo__mg_thread_free(&t);
    return rc;
}

int convo__mg_load(convo_backend *b, const char *id, const convo_load_opts *opts,
                      convo_history **out, convo_error *err)
{
    call c;
    convo__mg_call_begin(&c, b, err);
    int rc = 0;
    convo_history *h = NULL;
    for (int attempt = 0; rc == 0; attempt++) {
        bool again = false;
        convo_history_free(h);
        convo__mg_backoff(attempt);
        if (attempt == LOAD_ATTEMPTS) {
            h = NULL;
            rc = convo__error(err, CONVO_EIO, NULL,
                              "MongoDB: the thread kept changing under the load");
            break;
        }
        if (!(h = convo__history_new())) {
            rc = convo__mg_no_memory(&c);
            break;
        }
        rc = load_attempt(&c, id, opts, h, &again);
        if (!again)
            break;
    }
    convo__mg_call_end(&c);
    if (rc != 0) {
        convo_history_free(h);
        return rc;
    }
    *out = h;
    return 0;
}

/* ---- save_extra ---- */

/* Escaped extra document from a patch object. */
static int patch_to_bson(call *c, json_t *patch, bson_t *out)
{
    const char *k;
    json_t *v;
    int rc = 0;
    bson_init(out);
    json_object_foreach(patch, k, v) {
        char *ek = convo__mg_key_escape(k);
        rc = ek ? convo__mg_put_json(c, out, ek, v, 0) : convo__mg_no_memory(c);
        free(ek);
        if (rc != 0)
            break;
    }
    return rc;
}

/* No thread doc yet: the patch becomes the whole extra of a new, live thread. */
static int create_with_extra(call *c, const char *id, json_t *patch, bool *again)
{
    bson_t extra, doc;
    bson_oid_t g;
    int rc = patch_to_bson(c, patch, &extra);
    convo__mg_new_generation(id, &g);
    if (rc == 0) {
        if (!convo__mg_build_thread(c->b, id, &g, true, false, 1, &extra, convo__mg_now_ms(), &doc))
            rc = convo__error(c->err, CONVO_ETOOLARGE, NULL, "extra is too large for MongoDB");
        else
            rc = convo__mg_insert_doc(c, c->threads, &doc, again, "saving extra");
        bson_destroy(&doc);
    }
    bson_destroy(&extra);
    return rc;
}

/* {$set: {live: true, "extra.<escaped key>": value, ...}, $inc: {v: 1}}. */
static int build_extra_update(call *c, const char *id, json_t *patch, int64_t now,
                              bool refreshed, bson_t *update)
{
    bson_t set;
    const char *k;
    json_t *v;
    int rc = 0;
    bson_init(update);
    BSON_APPEND_DOCUMENT_BEGIN(update, "$set", &set);
    BSON_APPEND_BOOL(&set, "live", true);
    json_object_foreach(patch, k, v) {
        char *ek = convo__mg_key_escape(k);
        char *path = ek ? convo__mg_join("extra.", ek) : NULL;
        rc = path ? convo__mg_put_json(c, &set, path, v, 1) : convo__mg_no_memory(c);
        free(ek);
        free(path);
        if (rc != 0)
            break;
    }
    bson_append_document_end(update, &set);
    BCON_APPEND(update, "$inc", "{", "v", BCON_INT64(1), "}");
    bson_t max = BSON_INITIALIZER, min = BSON_INITIALIZER; /* updated_at in the same write */
    convo__mg_index_times(id, &max, &min, convo__now_micros());
    convo__mg_expiry_fields(c->b, &max, now, refreshed);
    if (!bson_empty(&max)) /* MongoDB 4.4 refuses an empty operator */
        BSON_APPEND_DOCUMENT(update, "$max", &max);
    if (!bson_empty(&min))
        BSON_APPEND_DOCUMENT(update, "$min", &min);
    bson_destroy(&max);
    bson_destroy(&min);
    return rc;
}

/* One try: read the extra, check the merged size, then $set the patch's keys only
 * if nothing changed since (v); *again when another writer got in between. */
static int save_attempt(call *c, const char *id, const char *patch, json_t *patch_obj,
                        bool *again)
{
    thread_doc t;
    char *current = NULL, *merged = NULL;
    size_t merged_len;
    bool refreshed = false;
    int64_t now = convo__mg_now_ms(), matched = 0;
    int rc = convo__mg_writable_thread(c, id, true, false, &t, again);
    if (rc == 0 && !*again && !t.found)
        rc = create_with_extra(c, id, patch_obj, again);
    if (rc || *again || !t.found)
        goto out;
    if ((rc = convo__mg_extra_to_json(c, &t.extra, &current)) != 0 ||
        (rc = convo__extra_merge(current, strlen(current), patch, c->b->limits.max_extra_bytes,
                                 &merged, &merged_len, c->err)) != 0 ||
        (rc = convo__mg_refresh_batches(c, &t, now, &refreshed)) != 0)
        goto out;
    bson_t update;
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(id), "g", BCON_OID(&t.g), "v", BCON_INT64(t.v));
    rc = build_extra_update(c, id, patch_obj, now, refreshed, &update);
    if (rc == 0)
        rc = convo__mg_update_one(c, c->threads, filter, &update, &matched, "saving extra");
    *again = rc == 0 && matched == 0;
    bson_destroy(&update);
    bson_destroy(filter);
out:
    free(current);
    free(merged);
    convo__mg_thread_free(&t);
    return rc;
}

int convo__mg_save_extra(convo_backend *b, const char *id, const char *patch, void *patch_obj,
                            convo_error *err)
{
    call c;
    convo__mg_call_begin(&c, b, err);
    int rc = 0;
    for (int attempt = 0;; attempt++) {
        bool again = false;
        if (attempt == ATTEMPTS) {
            rc = convo__mg_contention(&c);
            break;
        }
        convo__mg_backoff(attempt);
        rc = save_attempt(&c, id, patch, (json_t *)patch_obj, &again);
        if (rc != 0 || !again)
            break;
    }
    convo__mg_call_end(&c);
    return rc;
}

/* ---- delete ---- */

int convo__mg_not_found(call *c)
{
    return convo__error(c->err, CONVO_ENOTFOUND, NULL, "thread not found");
}

/* An invisible placeholder (no batch, never live) is nobody's thread: fence it
 * at 0, so an append still aiming at it starts over, and remove it. */
int convo__mg_drop_placeholder(call *c, const char *id, const bson_oid_t *g, bool *again)
{
    bool dup;
    int rc = convo__mg_insert_fence(c, g, NULL, &dup);
    if (rc == 0 && dup)
        *again = true; /* a first batch landed: it is a thread after all */
    else if (rc == 0)
        rc = convo__mg_retire(c, id, g);
    return rc;
}

static int delete_attempt(call *c, const char *id, bool *again)
{
    thread_doc t;
    batch_head top = {false, false, 0, 0, 0, 0, NO_BELOW, 0};
    int64_t matched = 0, now = convo__mg_now_ms();
    int rc = convo__mg_read_thread(c, id, false, &t);
    if (rc == 0 && t.found && !t.forking && !convo__mg_expired(&t, now))
        rc = convo__mg_top_batch(c, &t.g, &top);
    if (rc != 0 || !t.found)
        goto out;
    if (t.forking) { /* a fork's placeholder: not a thread; clear it if abandoned */
        if (now - t.created_ms > FORK_STALE_MS)
            rc = convo__mg_abort_fork(c, id, &t.g);
    } else if (convo__mg_expired(&t, now) || (top.found && top.fence) || t.dying) {
        rc = convo__mg_finish_delete(c, id, &t.g,
                                     false); /* gone, or another delete's: help it finish */
    } else if (!t.live && !top.found) {
        rc = convo__mg_drop_placeholder(c, id, &t.g, again);
    } else {
        /* the mark makes save_extra stop writing here; the fence stops appends */
        rc = convo__mg_mark_dying(c, id, &t.g, true, &matched);
        if (rc == 0 && (*again = matched == 0))
            goto out;
        if (rc == 0 && (rc = convo__mg_finish_delete(c, id, &t.g, true)) == 0)
            quietly(c, convo__mg_collect_garbage, id);
        convo__mg_thread_free(&t);
        return rc;
    }
out:
    convo__mg_thread_free(&t);
    return rc ? rc : *again ? 0 : convo__mg_not_found(c);
}

int convo__mg_thread_delete(convo_backend *b, const char *id, convo_error *err)
{
    call c;
    convo__mg_call_begin(&c, b, err);
    int rc = 0;
    for (int attempt = 0;; attempt++) {
        bool again = false;
        if (attempt == ATTEMPTS) {
            rc = convo__mg_contention(&c);
            break;
        }
        convo__mg_backoff(attempt);
        rc = delete_attempt(&c, id, &again);
        if (rc != 0 || !again)
            break;
    }
    convo__mg_call_end(&c);
    return rc;
}

/* ---- list ---- */

/* Whether a thread doc is a thread a caller can see. */
int convo__mg_visible(call *c, const thread_doc *t, int64_t now, bool *yes)
{
    *yes = false;
    if (t->forking || convo__mg_expired(t, now))
        return 0;
    if (t->live && !t->dying) {
        *yes = true;
        return 0;
    }
    batch_head top;
    int rc = convo__mg_top_batch(c, &t->g, &top);
    *yes = rc == 0 && !(top.found && top.fence) && (top.found || t->live);
    return rc;
}

static int list_threads(call *c, const char *after, size_t limit, convo_thread_page *p)
{
    bson_t *filter = after ? BCON_NEW("_id", "{", "$gt", BCON_UTF8(after), "}") : bson_new();
    bson_t *opts = BCON_NEW("sort", "{", "_id", BCON_INT32(1), "}", "projection", "{", "extra",
                            BCON_INT32(0), "}");
    mongoc_cursor_t *cur =
        mongoc_collection_find_with_opts(c->threads, filter, opts, c->b->primary);
    const bson_t *doc;
    int64_t now = convo__mg_now_ms();
    int rc = 0;
    const char *last = NULL;
    while (rc == 0 && mongoc_cursor_next(cur, &doc)) {
        bson_iter_t it;
        thread_doc t;
        bool yes = false;
        memset(&t, 0, sizeof t);
        bson_init(&t.extra);
        if (!bson_iter_init_find(&it, doc, "_id") || !BSON_ITER_HOLDS_UTF8(&it)) {
            convo__mg_thread_free(&t);
            continue;
        }
        uint32_t len;
        const char *id = bson_iter_utf8(&it, &len);
        rc = convo__mg_parse_thread(c, doc, &t);
        if (rc == 0)
            rc = convo__mg_visible(c, &t, now, &yes);
        convo__mg_thread_free(&t);
        if (rc != 0 || !yes)
            continue;
        if (convo_thread_page_count(p) == limit) {
            if (convo__thread_page_set_next(p, last) != 0)
                rc = convo__mg_no_memory(c);
            break;
        }
        if (convo__thread_page_add(p, id, len) != 0)
            rc = convo__mg_no_memory(c);
        last = convo_thread_page_id(p, convo_thread_page_count(p) - 1);
    }
    bson_error_t e;
    if (rc == 0 && mongoc_cursor_error(cur, &e))
        rc = convo__mg_fail(c, &e, "listing threads");
    mongoc_cursor_destroy(cur);
    bson_destroy(filter);
    bson_destroy(opts);
    return rc;
}

int convo__mg_thread_list(convo_backend *b, const char *after, size_t limit,
                             convo_thread_page **out, convo_error *err)
{
    convo_thread_page *p = convo__thread_page_new();
    if (!p)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    call c;
    convo__mg_call_begin(&c, b, err);
    int rc = list_threads(&c, after, limit, p);
    convo__mg_call_end(&c);
    if (rc != 0) {
        convo_thread_page_free(p);
        return rc;
    }
    *out = p;
    return 0;
}
