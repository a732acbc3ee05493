/* checkpoints.c — the MongoDB driver: checkpoint put, put with messages, settling, put_writes. */
#include "mongo_int.h"

/* ---- checkpoints ----
 * <prefix>_checkpoints: one document per (thread, ns, checkpoint id) of a
 * generation, numbered by the store-wide counter in <prefix>_meta in the
 * order first put (o) and last written (w); <prefix>_values: one per (ns, channel, version);
 * <prefix>_writes: one per (ns, checkpoint, task, idx). A delete retires them
 * with the generation, so nothing of a deleted thread can come back. */

bson_t *convo__mg_ns_filter(const bson_oid_t *g, const char *ns)
{
    return BCON_NEW("g", BCON_OID(g), "ns", BCON_UTF8(ns));
}

static void append_exp(const convo_backend *b, bson_t *doc, int64_t now)
{
    if (b->ttl_ms)
        BSON_APPEND_DATE_TIME(doc, "exp", now + 3 * b->ttl_ms + TTL_MARGIN_MS);
}

const char *convo__mg_get_utf8(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_UTF8(&it))
        return bson_iter_utf8(&it, NULL);
    return NULL;
}

const uint8_t *convo__mg_get_binary(const bson_t *doc, const char *key, uint32_t *len)
{
    bson_iter_t it;
    const uint8_t *data = NULL;
    *len = 0;
    if (bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_BINARY(&it))
        bson_iter_binary(&it, NULL, len, &data);
    return data ? data : (const uint8_t *)"";
}

/* True when a failed bulk only hit duplicate keys: two writers upserted the same
 * key at once, and the document is there either way. */
static bool only_duplicates(const bson_t *reply)
{
    bson_iter_t it, errs;
    int n = 0;
    if (bson_iter_init_find(&it, reply, "writeConcernErrors") && bson_iter_recurse(&it, &errs) &&
        bson_iter_next(&errs))
        return false;
    if (!bson_iter_init_find(&it, reply, "writeErrors") || !bson_iter_recurse(&it, &errs))
        return false;
    while (bson_iter_next(&errs)) {
        bson_iter_t e;
        if (!bson_iter_recurse(&errs, &e) || !bson_iter_find(&e, "code") ||
            bson_iter_as_int64(&e) != 11000)
            return false;
        n++;
    }
    return n > 0;
}

/* Runs (and frees) a bulk of upserts. */
static int run_bulk(call *c, mongoc_bulk_operation_t *bulk, const char *what)
{
    bson_t reply;
    bson_error_t e;
    int rc = 0;
    if (bulk && !mongoc_bulk_operation_execute(bulk, &reply, &e) && !only_duplicates(&reply))
        rc = convo__mg_fail(c, &e, what);
    if (bulk)
        bson_destroy(&reply);
    mongoc_bulk_operation_destroy(bulk);
    return rc;
}

/* Queues an upsert of selector with update into *bulk (made on first use). */
static int queue_upsert(call *c, mongoc_collection_t *coll, mongoc_bulk_operation_t **bulk,
                        bson_t *selector, bson_t *update, const char *what)
{
    bson_t *opts = BCON_NEW("upsert", BCON_BOOL(true));
    bson_t *bulk_opts = BCON_NEW("ordered", BCON_BOOL(false));
    bson_error_t e;
    int rc = 0;
    if (!*bulk)
        *bulk = mongoc_collection_create_bulk_operation_with_opts(coll, bulk_opts);
    if (!mongoc_bulk_operation_update_one_with_opts(*bulk, selector, update, opts, &e))
        rc = convo__mg_fail(c, &e, what);
    bson_destroy(opts);
    bson_destroy(bulk_opts);
    bson_destroy(selector);
    bson_destroy(update);
    return rc;
}

/* Queues the upsert of one channel value: stored once per (ns, channel,
 * version); a version stored before keeps its value ($setOnInsert). */
static int queue_value(call *c, mongoc_bulk_operation_t **bulk, const bson_oid_t *g,
                       const char *ns, const char *channel, const char *version,
                       const char *type, const void *bytes, uint32_t len, int64_t now)
{
    bson_t *selector = convo__mg_ns_filter(g, ns), *update = bson_new(), set;
    BSON_APPEND_UTF8(selector, "c", channel);
    BSON_APPEND_UTF8(selector, "v", version);
    BSON_APPEND_DOCUMENT_BEGIN(update, "$setOnInsert", &set);
    BSON_APPEND_UTF8(&set, "ty", type);
    BSON_APPEND_BINARY(&set, "b", BSON_SUBTYPE_BINARY, bytes ? bytes : (const void *)"", len);
    append_exp(c->b, &set, now);
    bson_append_document_end(update, &set);
    return queue_upsert(c, convo__mg_kind(c, VALUES), bulk, selector, update,
                        "storing channel values");
}

/* Values sent with the checkpoint, in one unordered bulk. */
static int put_values(call *c, const convo_checkpoint_in *cp, const bson_oid_t *g, int64_t now)
{
    mongoc_bulk_operation_t *bulk = NULL;
    int rc = 0;
    for (size_t i = 0; i < cp->nchannels && rc == 0; i++) {
        const convo_channel_in *ch = &cp->channels[i];
        if (ch->value)
            rc = queue_value(c, &bulk, g, cp->checkpoint_ns, ch->channel, ch->version,
                             ch->value->type, ch->value->bytes, (uint32_t)ch->value->len, now);
    }
    if (rc != 0) {
        mongoc_bulk_operation_destroy(bulk);
        return rc;
    }
    return run_bulk(c, bulk, "storing channel values");
}

/* The fields of one version of a checkpoint: {p, meta, bt, bb, ch, ll}. */
static void checkpoint_fields(const convo_checkpoint_in *cp, bson_t *doc)
{
    bson_t arr, item;
    bson_init(doc);
    if (cp->parent_id)
        BSON_APPEND_UTF8(doc, "p", cp->parent_id);
    else
        BSON_APPEND_NULL(doc, "p");
    BSON_APPEND_UTF8(doc, "meta", cp->metadata_json);
    if (cp->body.type) {
        BSON_APPEND_UTF8(doc, "bt", cp->body.type);
        BSON_APPEND_BINARY(doc, "bb", BSON_SUBTYPE_BINARY,
                           cp->body.bytes ? cp->body.bytes : (const void *)"",
                           (uint32_t)cp->body.len);
    } else {
        BSON_APPEND_NULL(doc, "bt");
        BSON_APPEND_NULL(doc, "bb");
    }
    BSON_APPEND_ARRAY_BEGIN(doc, "ch", &arr);
    for (size_t i = 0; i < cp->nchannels; i++) {
        char buf[16];
        const char *key;
        bson_uint32_to_string((uint32_t)i, &key, buf, sizeof buf);
        BSON_APPEND_DOCUMENT_BEGIN(&arr, key, &item);
        BSON_APPEND_UTF8(&item, "c", cp->channels[i].channel);
        BSON_APPEND_UTF8(&item, "v", cp->channels[i].version);
        bson_append_document_end(&arr, &item);
    }
    bson_append_array_end(doc, &arr);
    BSON_APPEND_INT64(doc, "ll", cp->log_length);
}

/* The next number of the store-wide counter {_id: "order", n} in <prefix>_meta:
 * every checkpoint put, in any thread, takes one, so the numbers order puts
 * across the whole store. */
int convo__mg_next_order(call *c, int64_t *order)
{
    return convo__mg_take_orders(c, 1, order);
}

/* The next k numbers of the counter, in one step: *last is the highest. */
int convo__mg_take_orders(call *c, int64_t k, int64_t *last)
{
    int64_t *order = last;
    bson_t *query = BCON_NEW("_id", BCON_UTF8("order"));
    bson_t *update = BCON_NEW("$inc", "{", "n", BCON_INT64(k), "}");
    bson_t *fields = BCON_NEW("n", BCON_INT32(1));
    mongoc_find_and_modify_opts_t *opts = mongoc_find_and_modify_opts_new();
    mongoc_find_and_modify_opts_set_update(opts, update);
    mongoc_find_and_modify_opts_set_fields(opts, fields);
    mongoc_find_and_modify_opts_set_flags(opts, MONGOC_FIND_AND_MODIFY_UPSERT |
                                                    MONGOC_FIND_AND_MODIFY_RETURN_NEW);
    bson_error_t e;
    bson_iter_t it, v;
    int rc = 0;
    for (int attempt = 0; attempt < 2; attempt++) {
        bson_t reply;
        bool ok = mongoc_collection_find_and_modify_with_opts(convo__mg_meta_collection(c), query,
                                                              opts, &reply, &e);
        if (ok && bson_iter_init_find(&it, &reply, "value") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
            bson_iter_recurse(&it, &v) && bson_iter_find(&v, "n") && BSON_ITER_HOLDS_NUMBER(&v))
            *order = bson_iter_as_int64(&v);
        else if (ok)
            rc = convo__mg_corrupt(c, "checkpoint counter without a number");
        bson_destroy(&reply);
        /* a duplicate: two first puts of the store made the counter at once */
        if (ok || !convo__mg_is_duplicate(&e) || attempt == 1) {
            if (!ok)
                rc = convo__mg_fail(c, &e, "numbering a checkpoint");
            break;
        }
    }
    mongoc_find_and_modify_opts_destroy(opts);
    bson_destroy(query);
    bson_destroy(update);
    bson_destroy(fields);
    return rc;
}

/* Stores version w (a number of the store-wide counter) of checkpoint (g, ns,
 * id): fields and w with $set, and with $min its position o and created_at, so
 * a key put again keeps the position of its first put. A version numbered
 * higher stored meanwhile wins: the filter on w then matches nothing, the
 * upsert's insert hits the unique key convo_checkpoint_v2, and only the
 * position is lowered. Layout 2 documents have no w and are always replaced.
 * Without wait the writes are sent unacknowledged (see settle). */
static int store_checkpoint(call *c, const bson_oid_t *g, const char *ns, const char *id,
                            const bson_t *fields, int64_t w, int64_t at, int64_t now, bool wait)
{
    bson_t *key = convo__mg_ns_filter(g, ns), update = BSON_INITIALIZER, set, min;
    BSON_APPEND_UTF8(key, "id", id);
    bson_t *selector = bson_copy(key);
    BCON_APPEND(selector, "$or", "[", "{", "w", "{", "$exists", BCON_BOOL(false), "}", "}", "{",
                "w", "{", "$lt", BCON_INT64(w), "}", "}", "]");
    BSON_APPEND_DOCUMENT_BEGIN(&update, "$set", &set);
    bson_concat(&set, fields);
    BSON_APPEND_INT64(&set, "w", w);
    append_exp(c->b, &set, now);
    bson_append_document_end(&update, &set);
    BSON_APPEND_DOCUMENT_BEGIN(&update, "$min", &min);
    BSON_APPEND_INT64(&min, "o", w);
    BSON_APPEND_INT64(&min, "at", at);
    bson_append_document_end(&update, &min);
    bson_t *opts = BCON_NEW("upsert", BCON_BOOL(true));
    bson_error_t e;
    int rc = 0;
    bool stored = false;
    if (!wait) { /* both, in order on this connection; each is right either way */
        bson_t *lower = BCON_NEW("$min", "{", "o", BCON_INT64(w), "at", BCON_INT64(at), "}");
        bson_t *later = BCON_NEW("writeConcern", "{", "w", BCON_INT32(0), "}");
        BCON_APPEND(opts, "writeConcern", "{", "w", BCON_INT32(0), "}");
        (void)mongoc_collection_update_one(convo__mg_kind(c, CHECKPOINTS), selector, &update, opts,
                                           NULL, &e);
        (void)mongoc_collection_update_one(convo__mg_kind(c, CHECKPOINTS), key, lower, later, NULL,
                                           &e);
        bson_destroy(lower);
        bson_destroy(later);
        stored = true;
    }
    /* a duplicate: another put of this new key inserted it first (try again: the
     * filter on w then decides), or a newer version is there */
    for (int attempt = 0; attempt < 2 && !stored && rc == 0; attempt++) {
        if (mongoc_collection_update_one(convo__mg_kind(c, CHECKPOINTS), selector, &update, opts,
                                         NULL, &e))
            stored = true;
        else if (!convo__mg_is_duplicate(&e))
            rc = convo__mg_fail(c, &e, "storing a checkpoint");
    }
    if (rc == 0 && !stored) {
        bson_t *lower = BCON_NEW("$min", "{", "o", BCON_INT64(w), "at", BCON_INT64(at), "}");
        rc = convo__mg_update_one(c, convo__mg_kind(c, CHECKPOINTS), key, lower, NULL,
                                  "storing a checkpoint");
        bson_destroy(lower);
    }
    bson_destroy(&update);
    bson_destroy(selector);
    bson_destroy(key);
    bson_destroy(opts);
    return rc;
}

/* Values first, then the checkpoint document (one write: whole or absent), then
 * a new thread is marked live (a delete that took its placeholder meanwhile
 * makes it start over in a new thread). */
static int put_attempt(call *c, const convo_checkpoint_in *cp, bool *again)
{
    thread_doc t;
    int64_t now = convo__mg_now_ms(), order = 0, matched = 1;
    int rc = convo__mg_writable_thread(c, cp->thread_id, false, true, &t, again);
    if (rc == 0 && !*again)
        rc = convo__mg_extend_expiry(c, cp->thread_id, &t, now, again);
    if (rc == 0 && !*again)
        rc = put_values(c, cp, &t.g, now);
    if (rc == 0 && !*again)
        rc = convo__mg_next_order(c, &order);
    if (rc == 0 && !*again) {
        bson_t fields;
        checkpoint_fields(cp, &fields);
        rc = store_checkpoint(c, &t.g, cp->checkpoint_ns, cp->checkpoint_id, &fields, order,
                              convo__now_micros(), now, true);
        bson_destroy(&fields);
    }
    if (rc == 0 && !*again) /* live, and updated_at: the index lists it by this put */
        rc = convo__mg_index_touch(c, cp->thread_id, &t.g, &matched);
    if (rc == 0 && matched == 0)
        *again = true;
    convo__mg_thread_free(&t);
    return rc;
}

static int too_large(call *c, const char *what)
{
    return convo__error(c->err, CONVO_ETOOLARGE, NULL,
                        "%s is larger than a MongoDB document (16 MiB)", what);
}

static int put_try(call *c, const void *cp, bool *again)
{
    return put_attempt(c, cp, again);
}

int convo__mg_checkpoint_put(convo_backend *b, const convo_checkpoint_in *cp, convo_error *err)
{
    call c;
    bson_t probe;
    convo__mg_call_begin(&c, b, err);
    checkpoint_fields(cp, &probe);
    int rc = probe.len <= DOC_LIMIT - 4096 ? 0 : too_large(&c, "the checkpoint");
    bson_destroy(&probe);
    for (size_t i = 0; i < cp->nchannels && rc == 0; i++)
        if (cp->channels[i].value && cp->channels[i].value->len > DOC_LIMIT - 4096)
            rc = too_large(&c, "a channel value");
    if (rc == 0)
        rc = convo__mg_retry(&c, put_try, cp);
    convo__mg_call_end(&c);
    return rc;
}

/* ---- checkpoint put with messages ----
 * The messages and the checkpoint are committed by one insert: the batch
 * document carries the checkpoint, numbered and with its new values, in a field
 * cp. From then on the checkpoint exists; settle() copies it out to the
 * checkpoint collections and removes cp, and every reader of a thread's
 * checkpoints settles what it finds first, so a process killed after the
 * insert leaves nothing half done. docs/mongo.md says why this takes three
 * round trips and not one. */

/* Adds u: true (the mark index convo_pending_v4 finds) and cp: {ns, id, o, at,
 * p, meta, bt, bb, ch, ll, vs: [{c, v, ty, b}, ...]} to a batch document; false
 * when the document grows past 16 MiB. */
static bool add_pending(const convo_checkpoint_in *cp, int64_t order, int64_t at, bson_t *doc)
{
    bson_t sub, fields, vs, item;
    uint32_t n = 0;
    checkpoint_fields(cp, &fields);
    BSON_APPEND_BOOL(doc, "u", true);
    BSON_APPEND_DOCUMENT_BEGIN(doc, "cp", &sub);
    BSON_APPEND_UTF8(&sub, "ns", cp->checkpoint_ns);
    BSON_APPEND_UTF8(&sub, "id", cp->checkpoint_id);
    BSON_APPEND_INT64(&sub, "o", order);
    BSON_APPEND_INT64(&sub, "at", at);
    bson_concat(&sub, &fields);
    BSON_APPEND_ARRAY_BEGIN(&sub, "vs", &vs);
    for (size_t i = 0; i < cp->nchannels; i++) {
        const convo_channel_in *ch = &cp->channels[i];
        char buf[16];
        const char *key;
        if (!ch->value)
            continue;
        bson_uint32_to_string(n++, &key, buf, sizeof buf);
        BSON_APPEND_DOCUMENT_BEGIN(&vs, key, &item);
        BSON_APPEND_UTF8(&item, "c", ch->channel);
        BSON_APPEND_UTF8(&item, "v", ch->version);
        BSON_APPEND_UTF8(&item, "ty", ch->value->type);
        BSON_APPEND_BINARY(&item, "b", BSON_SUBTYPE_BINARY,
                           ch->value->bytes ? ch->value->bytes : (const void *)"",
                           (uint32_t)ch->value->len);
        bson_append_document_end(&vs, &item);
    }
    bson_append_array_end(&sub, &vs);
    bool ok = bson_append_document_end(doc, &sub);
    bson_destroy(&fields);
    return ok && doc->len <= DOC_LIMIT;
}

/* Copies the checkpoint batch (of generation g) carries out to the checkpoint
 * collections: its values, then the checkpoint with the number it got before
 * its batch was inserted (store_checkpoint: a newer version of the key is
 * kept), then removes cp from the batch. Every step can run again, from any
 * process. Readers wait for each write; the writer of the batch (wait false)
 * sends the values and the checkpoint unacknowledged (w: 0) and waits only for
 * the last write: a connection's operations run in order, so that one round
 * trip covers them all, and a put with messages returns settled. Whatever it
 * misses (a lost connection, a process killed) the next reader does. */
/* Removes the pending mark u and cp (or dc) from a batch, found by its _id. */
int convo__mg_unmark(call *c, const bson_oid_t *g, const bson_t *batch)
{
    bson_iter_t it;
    bson_t *filter = bson_new();
    if (bson_iter_init_find(&it, batch, "_id"))
        bson_append_iter(filter, "_id", 3, &it);
    else
        BCON_APPEND(filter, "g", BCON_OID(g), "s", BCON_INT64(convo__mg_get_int(batch, "s", -1)));
    bson_t *unset = BCON_NEW("$unset", "{", "cp", BCON_UTF8(""), "dc", BCON_UTF8(""), "u",
                             BCON_UTF8(""), "}");
    int rc = convo__mg_update_one(c, c->batches, filter, unset, NULL, "storing a checkpoint");
    bson_destroy(filter);
    bson_destroy(unset);
    return rc;
}

static int settle(call *c, const bson_oid_t *g, const bson_t *batch, bool wait)
{
    static const char *const names[] = {"p", "meta", "bt", "bb", "ch", "ll", NULL};
    bson_iter_t it, vs;
    bson_t cp, fields = BSON_INITIALIZER;
    uint32_t len = 0;
    const uint8_t *data = NULL;
    if (bson_iter_init_find(&it, batch, "dc")) /* a rewrite dropping checkpoints */
        return convo__mg_settle_drop(c, g, batch, wait);
    if (!bson_iter_init_find(&it, batch, "cp"))
        return convo__mg_unmark(c, g, batch); /* a mark whose cp another settle removed (layout 3) */
    if (BSON_ITER_HOLDS_DOCUMENT(&it))
        bson_iter_document(&it, &len, &data);
    if (!data || !bson_init_static(&cp, data, len))
        return convo__mg_corrupt(c, "checkpoint of a batch is not a document");
    const char *ns = convo__mg_get_utf8(&cp, "ns"), *id = convo__mg_get_utf8(&cp, "id");
    int64_t order = convo__mg_get_int(&cp, "o", -1), at = convo__mg_get_int(&cp, "at", 0);
    int64_t s = convo__mg_get_int(batch, "s", -1), now = convo__mg_now_ms();
    if (!ns || !id || order < 0 || s < 0)
        return convo__mg_corrupt(c, "checkpoint of a batch without its key");
    bson_t *unacknowledged = BCON_NEW("ordered", BCON_BOOL(false), "writeConcern", "{", "w",
                                      BCON_INT32(0), "}");
    mongoc_bulk_operation_t *bulk = wait ? NULL
                                         : mongoc_collection_create_bulk_operation_with_opts(
                                               convo__mg_kind(c, VALUES), unacknowledged);
    bool queued = false;
    int rc = 0;
    if (bson_iter_init_find(&it, &cp, "vs") && BSON_ITER_HOLDS_ARRAY(&it) &&
        bson_iter_recurse(&it, &vs)) {
        while (rc == 0 && bson_iter_next(&vs)) {
            bson_t item;
            uint32_t blen = 0;
            if (!BSON_ITER_HOLDS_DOCUMENT(&vs)) {
                rc = convo__mg_corrupt(c, "channel value of a batch is not a document");
                break;
            }
            bson_iter_document(&vs, &len, &data);
            bson_init_static(&item, data, len);
            const char *channel = convo__mg_get_utf8(&item, "c"),
                       *version = convo__mg_get_utf8(&item, "v"),
                       *type = convo__mg_get_utf8(&item, "ty");
            const uint8_t *bytes = convo__mg_get_binary(&item, "b", &blen);
            rc = channel && version && type
                     ? queue_value(c, &bulk, g, ns, channel, version, type, bytes, blen, now)
                     : convo__mg_corrupt(c, "channel value of a batch without its fields");
            queued = true;
        }
    }
    if (rc == 0 && wait) {
        rc = run_bulk(c, bulk, "storing channel values");
    } else {
        bson_t reply;
        bson_error_t e;
        if (rc == 0 && queued) {
            (void)mongoc_bulk_operation_execute(bulk, &reply, &e);
            bson_destroy(&reply);
        }
        mongoc_bulk_operation_destroy(bulk);
    }
    bson_destroy(unacknowledged);
    for (int i = 0; names[i]; i++)
        if (bson_iter_init_find(&it, &cp, names[i]))
            bson_append_iter(&fields, names[i], -1, &it);
    if (rc == 0)
        rc = store_checkpoint(c, g, ns, id, &fields, order, at, now, wait);
    if (rc == 0)
        rc = convo__mg_unmark(c, g, batch);
    bson_destroy(&fields);
    return rc;
}

/* Settles every batch in array field "pc" of doc (what lookup_pending found). */
int convo__mg_settle_found(call *c, const bson_oid_t *g, const bson_t *doc)
{
    bson_iter_t it, arr;
    int rc = 0;
    if (!bson_iter_init_find(&it, doc, "pc") || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &arr))
        return 0;
    while (rc == 0 && bson_iter_next(&arr)) {
        bson_t batch;
        uint32_t len;
        const uint8_t *data;
        if (!BSON_ITER_HOLDS_DOCUMENT(&arr))
            return convo__mg_corrupt(c, "batch is not a document");
        bson_iter_document(&arr, &len, &data);
        bson_init_static(&batch, data, len);
        rc = settle(c, g, &batch, true);
    }
    return rc;
}

/* A stage {$lookup: ... as: "pc"}: the batches of the thread doc's generation
 * still carrying a checkpoint (marked u, index convo_pending_v4), without their
 * messages. */
void convo__mg_lookup_pending(call *c, bson_t *stages, const char *pos)
{
    bson_t *cond = BCON_NEW("u", BCON_BOOL(true));
    bson_t *pending = BCON_NEW("0", "{", "$sort", "{", "s", BCON_INT32(1), "}", "}", "1", "{",
                               "$project", "{", "m", BCON_INT32(0), "}", "}");
    convo__mg_lookup_batches(c, stages, pos, cond, pending, "pc");
    bson_destroy(cond);
    bson_destroy(pending);
}

/* Reads thread doc id (without extra) and, in the same aggregate, the batches
 * still carrying a checkpoint; *yes when callers can see the thread, and then
 * those checkpoints have been settled. */
int convo__mg_read_settled(call *c, const char *id, thread_doc *t, bool *yes)
{
    bson_t stages = BSON_INITIALIZER, *match = BCON_NEW("$match", "{", "_id", BCON_UTF8(id), "}");
    bson_t *project = BCON_NEW("$project", "{", "extra", BCON_INT32(0), "}");
    BSON_APPEND_DOCUMENT(&stages, "0", match);
    BSON_APPEND_DOCUMENT(&stages, "1", project);
    convo__mg_lookup_pending(c, &stages, "2");
    mongoc_cursor_t *cur =
        mongoc_collection_aggregate(c->threads, MONGOC_QUERY_NONE, &stages, NULL, c->b->primary);
    const bson_t *doc;
    bson_t *copy = NULL;
    bson_error_t e;
    int rc = 0;
    memset(t, 0, sizeof *t);
    bson_init(&t->extra);
    *yes = false;
    if (mongoc_cursor_next(cur, &doc))
        copy = bson_copy(doc);
    else if (mongoc_cursor_error(cur, &e))
        rc = convo__mg_fail(c, &e, "reading a thread");
    mongoc_cursor_destroy(cur);
    if (copy) {
        t->found = true;
        rc = convo__mg_parse_thread(c, copy, t);
        if (rc == 0)
            rc = convo__mg_visible(c, t, convo__mg_now_ms(), yes);
        if (rc == 0 && *yes)
            rc = convo__mg_settle_found(c, &t->g, copy);
        bson_destroy(copy);
    }
    bson_destroy(&stages);
    bson_destroy(match);
    bson_destroy(project);
    return rc;
}

/* A thread callers can see (its checkpoints settled), else CONVO_ENOTFOUND. */
int convo__mg_read_visible(call *c, const char *id, thread_doc *t)
{
    bool yes = false;
    int rc = convo__mg_read_settled(c, id, t, &yes);
    if (rc == 0 && !yes)
        rc = convo__mg_not_found(c);
    return rc;
}

static int conflict(call *c, int64_t length, int64_t expected)
{
    return convo__error(c->err, CONVO_ECONFLICT, NULL, "thread has %lld messages, expected %lld",
                        (long long)length, (long long)expected);
}

/* One try at a put with messages; *again when a race was lost. As an append
 * with an expected length: read, check, then one insert at the end of the
 * chain, which the unique position decides; the checkpoint rides in it. */
static int put_log_attempt(call *c, const convo_checkpoint_in *cp, const bson_t *m, bool *again)
{
    const char *id = cp->thread_id;
    thread_doc t;
    batch_head top;
    convo_append_result unused;
    bool replayed = false, created = false, dup = false;
    int64_t now = convo__mg_now_ms(), order = 0;
    int rc = convo__mg_read_for_append(c, id, NULL, &t, &top, &replayed, &unused);
    if (rc == 0 && !t.found && cp->expected_length != 0) { /* no thread: nothing to create */
        rc = conflict(c, 0, cp->expected_length);
        goto out;
    }
    if (rc == 0 && !t.found && /* generation 0: no placeholder for a conflict */
        (rc = convo__mg_generation_conflict(c, 0, 0, cp->expected_generation)) != 0)
        goto out;
    if (rc == 0)
        rc = convo__mg_clear_way(c, id, true, &t, &created, again);
    if (rc || *again)
        goto out;
    if (top.found && top.fence) { /* a delete is under way: finish it, then start over */
        rc = convo__mg_finish_delete(c, id, &t.g, false);
        *again = true;
        goto out;
    }
    batch_pos pos;
    convo__mg_next_pos(&top, &pos);
    int64_t length = pos.start;
    if (length != cp->expected_length) {
        rc = conflict(c, length, cp->expected_length);
        goto out;
    }
    if ((rc = convo__mg_generation_conflict(c, length, pos.r, cp->expected_generation)) != 0)
        goto out;
    if ((rc = convo__mg_extend_expiry(c, id, &t, now, again)) != 0 || *again)
        goto out;
    if ((rc = convo__mg_next_order(c, &order)) != 0)
        goto out;
    bson_t doc;
    bson_oid_t bid; /* settle finds the batch by it */
    int64_t at = convo__now_micros();
    bson_oid_init(&bid, NULL);
    convo__mg_build_batch(c->b, &t.g, &pos, cp->nmessages, NULL, at, now, m, &doc);
    BSON_APPEND_OID(&doc, "_id", &bid);
    add_pending(cp, order, at, &doc);
    rc = convo__mg_insert_batch(c, &doc, &dup, "storing a checkpoint with messages");
    if (rc == 0 && !dup) { /* committed: the rest only saves readers the work */
        quietly(c, settle, &t.g, &doc, false);
        quietly(c, convo__mg_index_after_batch, id, &t.g, pos.slot,
                length + (int64_t)cp->nmessages, at);
    }
    bson_destroy(&doc);
    *again = rc == 0 && dup;
out:
    convo__mg_thread_free(&t);
    return rc;
}

typedef struct put_log_args {
    const convo_checkpoint_in *cp;
    const bson_t *m;
} put_log_args;

static int put_log_try(call *c, const void *arg, bool *again)
{
    const put_log_args *a = arg;
    return put_log_attempt(c, a->cp, a->m, again);
}

int convo__mg_checkpoint_put_log(convo_backend *b, const convo_checkpoint_in *cp,
                                    const convo_message_in *msgs, convo_error *err)
{
    call c;
    bson_t m, probe;
    bson_oid_t zero;
    const batch_pos far = {INT64_MAX, 0, INT64_MAX, INT64_MAX}; /* the largest s, e, r, pb */
    convo__mg_call_begin(&c, b, err);
    int rc = convo__mg_build_messages(&c, msgs, cp->nmessages, &m);
    bson_oid_init_from_string(&zero, "000000000000000000000000");
    if (rc == 0) { /* the same size whatever g, number and times it gets */
        bool fits = convo__mg_build_batch(b, &zero, &far, cp->nmessages, NULL, 0, 0, &m, &probe) &&
                    BSON_APPEND_OID(&probe, "_id", &zero) && add_pending(cp, 0, 0, &probe);
        bson_destroy(&probe);
        if (!fits)
            rc = convo__error(err, CONVO_ETOOLARGE, NULL,
                              "messages and checkpoint are larger than a MongoDB document "
                              "(16 MiB); put fewer messages with it");
    }
    if (rc == 0) {
        put_log_args a = {cp, &m};
        rc = convo__mg_retry(&c, put_log_try, &a);
    }
    bson_destroy(&m);
    convo__mg_call_end(&c);
    return rc;
}

/* Pending writes: idx >= 0 stored once per (task, idx), a negative idx replaces. */
static int put_writes(call *c, const bson_oid_t *g, const char *ns, const char *cpid,
                      const char *task, const char *path, const convo_write_in *w, size_t n)
{
    mongoc_bulk_operation_t *bulk = NULL;
    int64_t now = convo__mg_now_ms();
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        bson_t *selector = convo__mg_ns_filter(g, ns), *update = bson_new(), set;
        BCON_APPEND(selector, "cp", BCON_UTF8(cpid), "task", BCON_UTF8(task), "idx",
                    BCON_INT64(w[i].idx));
        BSON_APPEND_DOCUMENT_BEGIN(update, w[i].idx >= 0 ? "$setOnInsert" : "$set", &set);
        BSON_APPEND_UTF8(&set, "path", path);
        BSON_APPEND_UTF8(&set, "c", w[i].channel);
        BSON_APPEND_UTF8(&set, "ty", w[i].value.type);
        BSON_APPEND_BINARY(&set, "b", BSON_SUBTYPE_BINARY,
                           w[i].value.bytes ? w[i].value.bytes : (const void *)"",
                           (uint32_t)w[i].value.len);
        append_exp(c->b, &set, now);
        bson_append_document_end(update, &set);
        rc = queue_upsert(c, convo__mg_kind(c, WRITES), &bulk, selector, update,
                          "storing pending writes");
    }
    if (rc != 0) {
        mongoc_bulk_operation_destroy(bulk);
        return rc;
    }
    return run_bulk(c, bulk, "storing pending writes");
}

static int checkpoint_exists(call *c, const char *id, const bson_oid_t *g, const char *ns,
                             const char *cpid)
{
    bson_t *filter = convo__mg_ns_filter(g, ns), doc;
    bson_t *opts = BCON_NEW("limit", BCON_INT64(1), "projection", "{", "_id", BCON_INT32(1), "}");
    bool found;
    BSON_APPEND_UTF8(filter, "id", cpid);
    int rc = convo__mg_find_one(c, convo__mg_kind(c, CHECKPOINTS), filter, opts, &doc, &found,
                                "reading a checkpoint");
    bson_destroy(&doc);
    bson_destroy(filter);
    bson_destroy(opts);
    if (rc == 0 && !found)
        rc = convo__error(c->err, CONVO_ENOTFOUND, NULL, "checkpoint not found");
    return rc;
}

int convo__mg_checkpoint_put_writes(convo_backend *b, const char *id, const char *ns,
                                       const char *cpid, const char *task, const char *path,
                                       const convo_write_in *writes, size_t n, convo_error *err)
{
    call c;
    thread_doc t;
    bool again = false;
    convo__mg_call_begin(&c, b, err);
    memset(&t, 0, sizeof t);
    bson_init(&t.extra);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        if (writes[i].value.len > DOC_LIMIT - 4096)
            rc = too_large(&c, "a pending write");
    if (rc == 0)
        rc = convo__mg_read_visible(&c, id, &t);
    if (rc == 0)
        rc = checkpoint_exists(&c, id, &t.g, ns, cpid);
    if (rc == 0)
        rc = convo__mg_extend_expiry(&c, id, &t, convo__mg_now_ms(), &again);
    if (rc == 0 && again)
        rc = convo__error(err, CONVO_ENOTFOUND, NULL, "checkpoint not found");
    if (rc == 0)
        rc = put_writes(&c, &t.g, ns, cpid, task, path, writes, n);
    convo__mg_thread_free(&t);
    convo__mg_call_end(&c);
    return rc;
}
