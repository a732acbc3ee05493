/* rewrite.c — the MongoDB driver: the tail rewrite (convo_replace_tail).
 *
 * A rewrite is one batch document inserted at the next slot of the chain, as
 * an append is: its messages start at keep instead of at the length, and it
 * carries generation r + 1. Readers walk the chain down by slot, and a batch
 * whose messages start at or above where the batches above it start was
 * replaced: so the insert alone replaces [keep, length), atomically, and the
 * unique slot orders it with every append. The replaced batches are garbage
 * collected afterwards; a rewrite dropping checkpoints carries their keys (dc,
 * marked u) and every reader of checkpoints drops them first, as it settles a
 * put with messages. docs/mongo.md, "Tail rewrite", says why this is safe. */
#include "mongo_int.h"

int convo__mg_generation_conflict(call *c, int64_t length, int64_t generation,
                                  int64_t expected_generation)
{
    if (expected_generation < 0 || expected_generation == generation)
        return 0;
    if (expected_generation == INT64_MAX) /* the core's: the caller's view of the tail differs */
        return convo__error(c->err, CONVO_ECONFLICT, NULL,
                            "thread has %lld messages at generation %lld: not the expected tail",
                            (long long)length, (long long)generation);
    return convo__error(c->err, CONVO_ECONFLICT, NULL,
                        "thread has %lld messages at generation %lld, expected generation %lld",
                        (long long)length, (long long)generation,
                        (long long)expected_generation);
}

/* ---- dropping checkpoints ---- */

/* Queues a delete of filter into *bulk (made on first use, unordered; w: 0
 * unless wait). */
static int queue_delete(call *c, mongoc_collection_t *coll, mongoc_bulk_operation_t **bulk,
                        bool wait, bson_t *filter)
{
    bson_error_t e;
    bson_t *opts = wait ? BCON_NEW("ordered", BCON_BOOL(false))
                        : BCON_NEW("ordered", BCON_BOOL(false), "writeConcern", "{", "w",
                                   BCON_INT32(0), "}");
    if (!*bulk)
        *bulk = mongoc_collection_create_bulk_operation_with_opts(coll, opts);
    bool ok = mongoc_bulk_operation_remove_many_with_opts(*bulk, filter, NULL, &e);
    bson_destroy(opts);
    bson_destroy(filter);
    return ok ? 0 : convo__mg_fail(c, &e, "dropping checkpoints");
}

static int run_deletes(call *c, mongoc_bulk_operation_t *bulk, bool wait)
{
    bson_error_t e;
    bson_t reply;
    int rc = 0;
    if (bulk && !mongoc_bulk_operation_execute(bulk, &reply, &e) && wait)
        rc = convo__mg_fail(c, &e, "dropping checkpoints");
    if (bulk)
        bson_destroy(&reply);
    mongoc_bulk_operation_destroy(bulk);
    return rc;
}

/* Drops the checkpoints a rewrite listed in dc: {c: keep, l: [{ns, id, w}]}:
 * each at the version (w) the rewrite saw, so one put again since stays, and
 * the pending writes of its key; then unmarks the rewrite. Every step can run
 * again, from any process. The writer (wait false) sends the deletes
 * unacknowledged and waits for the unmark only, as settle does. */
int convo__mg_settle_drop(call *c, const bson_oid_t *g, const bson_t *batch, bool wait)
{
    bson_iter_t it, list;
    mongoc_bulk_operation_t *cps = NULL, *writes = NULL;
    int rc = 0;
    if (!bson_iter_init(&it, batch) || !bson_iter_find_descendant(&it, "dc.l", &list) ||
        !BSON_ITER_HOLDS_ARRAY(&list) || !bson_iter_recurse(&list, &list))
        return convo__mg_corrupt(c, "rewrite without its list of checkpoints");
    while (rc == 0 && bson_iter_next(&list)) {
        bson_t item;
        uint32_t len;
        const uint8_t *data;
        if (!BSON_ITER_HOLDS_DOCUMENT(&list))
            return convo__mg_corrupt(c, "checkpoint of a rewrite is not a document");
        bson_iter_document(&list, &len, &data);
        bson_init_static(&item, data, len);
        const char *ns = convo__mg_get_utf8(&item, "ns"), *id = convo__mg_get_utf8(&item, "id");
        if (!ns || !id) {
            rc = convo__mg_corrupt(c, "checkpoint of a rewrite without its key");
            break;
        }
        bson_t *cp = BCON_NEW("g", BCON_OID(g), "ns", BCON_UTF8(ns), "id", BCON_UTF8(id));
        if (bson_iter_init_find(&it, &item, "w"))
            BSON_APPEND_INT64(cp, "w", bson_iter_as_int64(&it));
        else
            BCON_APPEND(cp, "w", "{", "$exists", BCON_BOOL(false), "}");
        rc = queue_delete(c, convo__mg_kind(c, CHECKPOINTS), &cps, wait, cp);
        if (rc == 0)
            rc = queue_delete(c, convo__mg_kind(c, WRITES), &writes, wait,
                              BCON_NEW("g", BCON_OID(g), "ns", BCON_UTF8(ns), "cp", BCON_UTF8(id)));
    }
    if (rc == 0)
        rc = run_deletes(c, cps, wait);
    else
        mongoc_bulk_operation_destroy(cps);
    if (rc == 0)
        rc = run_deletes(c, writes, wait);
    else
        mongoc_bulk_operation_destroy(writes);
    return rc == 0 ? convo__mg_unmark(c, g, batch) : rc;
}

/* ---- the rewrite ---- */

/* The slot of the batch a load reads message keep - 1 from: the highest slot
 * whose messages [e - n, e) hold it (a batch above it holding that seq would
 * be the one a load reads). Known from the top batch when top holds it; else
 * read (*found false when a delete took the batches meanwhile). Not from the
 * pb of a top that starts at keep: with appends racing pops that pb named a
 * batch other than the one a load reads, and a message was lost
 * (test_rewrite_race_appends failed 4 times in 36 parallel runs). */
static int batch_below(call *c, const bson_oid_t *g, const batch_head *top, int64_t keep,
                       int64_t *slot, bool *found)
{
    *found = true;
    if (keep == 0) {
        *slot = -1;
        return 0;
    }
    if (top->n > 0 && top->e - top->n < keep && keep <= top->e) {
        *slot = top->s;
        return 0;
    }
    bson_t *filter = BCON_NEW("g", BCON_OID(g), "e", "{", "$gt", BCON_INT64(keep - 1), "}",
                              "$expr", "{", "$lte", "[", "{", "$subtract", "[", BCON_UTF8("$e"),
                              BCON_UTF8("$n"), "]", "}", BCON_INT64(keep - 1), "]", "}");
    bson_t *opts = BCON_NEW("sort", "{", "s", BCON_INT32(-1), "}", "limit", BCON_INT64(1),
                            "projection", "{", "s", BCON_INT32(1), "}");
    bson_t doc;
    int rc = convo__mg_find_one(c, c->batches, filter, opts, &doc, found,
                                "reading the batch below a rewrite");
    if (rc == 0 && *found)
        *slot = convo__mg_get_int(&doc, "s", -1);
    bson_destroy(&doc);
    bson_destroy(filter);
    bson_destroy(opts);
    return rc;
}

/* What a rewrite reads, in one aggregate on the thread doc: the doc (no extra),
 * its top batch (top), the batch of the key (kb), the batches still carrying
 * a checkpoint or a drop (pc) and the checkpoints past keep (cl). */
static int read_for_rewrite(call *c, const char *id, const char *key, int64_t keep, thread_doc *t,
                            bson_t *out)
{
    bson_t stages = BSON_INITIALIZER;
    bson_t *match = BCON_NEW("$match", "{", "_id", BCON_UTF8(id), "}");
    bson_t *project = BCON_NEW("$project", "{", "extra", BCON_INT32(0), "}");
    bson_t *highest = BCON_NEW("0", "{", "$sort", "{", "s", BCON_INT32(-1), "}", "}", "1", "{",
                               "$limit", BCON_INT32(1), "}", "2", "{", "$project", "{", "m",
                               BCON_INT32(0), "cp", BCON_INT32(0), "dc", BCON_INT32(0), "}", "}");
    bson_t *keyed_cond = BCON_NEW("k", "{", "$eq", BCON_UTF8(key ? key : ""), "}");
    bson_t *keyed = BCON_NEW("0", "{", "$limit", BCON_INT32(1), "}", "1", "{", "$project", "{",
                             "e", BCON_INT32(1), "n", BCON_INT32(1), "}", "}");
    bson_t *past = BCON_NEW("ll", "{", "$gt", BCON_INT64(keep), "}");
    bson_t *past_rest = BCON_NEW("0", "{", "$project", "{", "ns", BCON_INT32(1), "id",
                                 BCON_INT32(1), "w", BCON_INT32(1), "ll", BCON_INT32(1), "}", "}");
    BSON_APPEND_DOCUMENT(&stages, "0", match);
    BSON_APPEND_DOCUMENT(&stages, "1", project);
    convo__mg_lookup_batches(c, &stages, "2", NULL, highest, "top");
    convo__mg_lookup_pending(c, &stages, "3");
    convo__mg_lookup(&stages, "4", c->b->kinds_name[CHECKPOINTS], past, past_rest, "cl");
    if (key)
        convo__mg_lookup_batches(c, &stages, "5", keyed_cond, keyed, "kb");
    mongoc_cursor_t *cur =
        mongoc_collection_aggregate(c->threads, MONGOC_QUERY_NONE, &stages, NULL, c->b->primary);
    const bson_t *doc;
    bson_error_t e;
    int rc = 0;
    memset(t, 0, sizeof *t);
    bson_init(&t->extra);
    bson_init(out);
    if (mongoc_cursor_next(cur, &doc)) {
        t->found = true;
        rc = convo__mg_parse_thread(c, doc, t);
        bson_copy_to_excluding_noinit(doc, out, "extra", NULL);
    } else if (mongoc_cursor_error(cur, &e)) {
        rc = convo__mg_fail(c, &e, "reading a thread");
    }
    mongoc_cursor_destroy(cur);
    bson_destroy(&stages);
    bson_destroy(match);
    bson_destroy(project);
    bson_destroy(highest);
    bson_destroy(keyed_cond);
    bson_destroy(keyed);
    bson_destroy(past);
    bson_destroy(past_rest);
    return rc;
}

/* dc: {c: keep, l: [{ns, id, w}, ...]} from the checkpoints past keep (cl). */
static void add_drops(const bson_t *read, int64_t keep, bson_t *doc)
{
    bson_iter_t it, arr;
    bson_t dc, l;
    uint32_t i = 0;
    BSON_APPEND_BOOL(doc, "u", true);
    BSON_APPEND_DOCUMENT_BEGIN(doc, "dc", &dc);
    BSON_APPEND_INT64(&dc, "c", keep);
    BSON_APPEND_ARRAY_BEGIN(&dc, "l", &l);
    if (bson_iter_init_find(&it, read, "cl") && BSON_ITER_HOLDS_ARRAY(&it) &&
        bson_iter_recurse(&it, &arr)) {
        while (bson_iter_next(&arr)) {
            bson_t item, entry;
            uint32_t len;
            const uint8_t *data;
            char buf[16];
            const char *k;
            if (!BSON_ITER_HOLDS_DOCUMENT(&arr))
                continue;
            bson_iter_document(&arr, &len, &data);
            bson_init_static(&item, data, len);
            bson_uint32_to_string(i++, &k, buf, sizeof buf);
            BSON_APPEND_DOCUMENT_BEGIN(&l, k, &entry);
            bson_copy_to_excluding_noinit(&item, &entry, "_id", "ll", NULL);
            bson_append_document_end(&l, &entry);
        }
    }
    bson_append_array_end(&dc, &l);
    bson_append_document_end(doc, &dc);
}

/* Removes (unacknowledged) the batches a rewrite at slot replaced: below it,
 * their messages starting at or above keep. Batches with a key stay (a retry of
 * their append must find the key; the core then sees the messages differ), as
 * do batches carrying a checkpoint not yet settled. */
static void collect_replaced(call *c, const bson_oid_t *g, int64_t keep, int64_t slot)
{
    bson_t *filter = BCON_NEW(
        "g", BCON_OID(g), "s", "{", "$gte", BCON_INT64(keep), "$lt", BCON_INT64(slot), "}", "k",
        "{", "$gte", BCON_INT64(INT64_MIN), "}", "u", "{", "$exists", BCON_BOOL(false), "}",
        "$expr", "{", "$gte", "[", "{", "$subtract", "[", BCON_UTF8("$e"), BCON_UTF8("$n"), "]",
        "}", BCON_INT64(keep), "]", "}");
    bson_t *opts = BCON_NEW("writeConcern", "{", "w", BCON_INT32(0), "}");
    bson_error_t e;
    (void)mongoc_collection_delete_many(c->batches, filter, opts, NULL, &e);
    bson_destroy(filter);
    bson_destroy(opts);
}

/* One try; *again when a race was lost (or a pending checkpoint settled). */
static int rewrite_attempt(call *c, const char *id, int64_t keep, const bson_t *m, size_t n,
                           const convo_rewrite_opts *o, convo_rewrite_result *res, bool *again)
{
    thread_doc t;
    bson_t read, item;
    batch_head top = {false, false, 0, 0, 0, 0, NO_BELOW, 0};
    int64_t now = convo__mg_now_ms();
    int rc = read_for_rewrite(c, id, o->idempotency_key, keep, &t, &read);
    if (rc == 0 && convo__mg_first_of(&read, "top", &item))
        convo__mg_parse_head(&item, &top);
    if (rc != 0)
        goto out;
    if (!t.found || t.forking || convo__mg_expired(&t, now) || (!t.live && !top.found) ||
        t.dying || (top.found && top.fence)) {
        if (t.found && !t.forking && (t.dying || convo__mg_expired(&t, now) || top.fence))
            quietly(c, convo__mg_finish_delete, id, &t.g, false);
        rc = convo__mg_not_found(c);
        goto out;
    }
    if (convo__mg_first_of(&read, "kb", &item)) { /* its messages are [e - n, e) */
        res->count = (size_t)convo__mg_get_int(&item, "n", 0);
        res->first_seq = convo__mg_get_int(&item, "e", 0) - (int64_t)res->count;
        res->removed = 0;
        res->generation = top.r;
        res->replayed = 1;
        goto out;
    }
    if (convo__mg_first_of(&read, "pc", &item)) { /* settle, then read the checkpoints again */
        rc = convo__mg_settle_found(c, &t.g, &read);
        *again = rc == 0;
        goto out;
    }
    batch_pos pos;
    convo__mg_next_pos(&top, &pos);
    int64_t length = pos.start;
    if (o->expected_length >= 0 && o->expected_length != length)
        rc = convo__mg_generation_conflict(c, length, pos.r, INT64_MAX);
    if (rc == 0)
        rc = convo__mg_generation_conflict(c, length, pos.r, o->expected_generation);
    if (rc == 0 && keep > length)
        rc = convo__error(c->err, CONVO_EINVAL, NULL, "keep %lld is past the %lld messages",
                          (long long)keep, (long long)length);
    bool drops = convo__mg_first_of(&read, "cl", &item);
    if (rc == 0 && drops && !o->drop_checkpoints)
        rc = convo__error(c->err, CONVO_ECONFLICT, NULL,
                          "checkpoint %s (namespace '%s') refers to %lld messages; the rewrite "
                          "keeps %lld: nothing written (drop_checkpoints removes such checkpoints)",
                          convo__mg_get_utf8(&item, "id") ? convo__mg_get_utf8(&item, "id") : "?",
                          convo__mg_get_utf8(&item, "ns") ? convo__mg_get_utf8(&item, "ns") : "?",
                          (long long)convo__mg_get_int(&item, "ll", 0), (long long)keep);
    int64_t below = -1; /* the batch a load reads message keep - 1 from */
    bool below_found = true;
    if (rc == 0)
        rc = batch_below(c, &t.g, &top, keep, &below, &below_found);
    *again = rc == 0 && !below_found; /* a delete took the batches meanwhile */
    if (rc != 0 || *again || (rc = convo__mg_extend_expiry(c, id, &t, now, again)) != 0 ||
        *again)
        goto out;
    bson_t doc;
    bool dup = false;
    bson_oid_t bid; /* a drop is unmarked by it */
    batch_pos at = {pos.slot, keep, pos.r + 1, below};
    int64_t at_us = convo__now_micros();
    convo__mg_build_batch(c->b, &t.g, &at, n, o->idempotency_key, at_us, now, m, &doc);
    if (drops) {
        bson_oid_init(&bid, NULL);
        BSON_APPEND_OID(&doc, "_id", &bid);
        add_drops(&read, keep, &doc);
    }
    if (doc.len > DOC_LIMIT)
        rc = convo__error(c->err, CONVO_ETOOLARGE, NULL,
                          "the new tail and the checkpoints it drops are larger than a MongoDB "
                          "document (16 MiB)");
    else
        rc = convo__mg_insert_batch(c, &doc, &dup, "rewriting the tail");
    if (rc == 0 && !dup) { /* committed: the rest only saves readers the work */
        if (drops)
            quietly(c, convo__mg_settle_drop, &t.g, &doc, false);
        collect_replaced(c, &t.g, keep, pos.slot);
        quietly(c, convo__mg_index_after_write, id, &t.g, pos.slot, keep + (int64_t)n, at_us);
        res->first_seq = keep;
        res->count = n;
        res->removed = length - keep;
        res->generation = at.r;
        res->replayed = 0;
    }
    bson_destroy(&doc);
    *again = rc == 0 && dup;
out:
    bson_destroy(&read);
    convo__mg_thread_free(&t);
    return rc;
}

typedef struct rewrite_args {
    const char *id;
    int64_t keep;
    const bson_t *m;
    size_t n;
    const convo_rewrite_opts *opts;
    convo_rewrite_result *res;
} rewrite_args;

static int rewrite_try(call *c, const void *arg, bool *again)
{
    const rewrite_args *a = arg;
    return rewrite_attempt(c, a->id, a->keep, a->m, a->n, a->opts, a->res, again);
}

int convo__mg_replace_tail(convo_backend *b, const char *id, int64_t keep,
                           const convo_message_in *msgs, size_t n, const convo_rewrite_opts *opts,
                           convo_rewrite_result *res, convo_error *err)
{
    call c;
    bson_t m;
    convo__mg_call_begin(&c, b, err);
    int rc = convo__mg_batch_messages(
        &c, msgs, n, opts->idempotency_key,
        "new tail is larger than a MongoDB document (16 MiB); split it", &m);
    if (rc == 0) {
        rewrite_args a = {id, keep, &m, n, opts, res};
        rc = convo__mg_retry(&c, rewrite_try, &a);
    }
    bson_destroy(&m);
    convo__mg_call_end(&c);
    return rc;
}
