/* maint.c — the MongoDB driver: the layout (indexes, schema version, migrations)
 * and measuring. */
#include "mongo_int.h"

int convo__mg_create_indexes(call *c, mongoc_collection_t *coll, const bson_t *indexes)
{
    bson_t cmd = BSON_INITIALIZER;
    BSON_APPEND_UTF8(&cmd, "createIndexes", mongoc_collection_get_name(coll));
    BSON_APPEND_ARRAY(&cmd, "indexes", indexes);
    bson_error_t e;
    bool ok = mongoc_collection_write_command_with_opts(coll, &cmd, NULL, NULL, &e);
    bson_destroy(&cmd);
    return ok ? 0 : convo__mg_fail(c, &e, "creating indexes");
}

static int check_version(call *c, mongoc_collection_t *meta, const bson_t *filter,
                         int64_t *version)
{
    bson_t doc;
    bool found;
    int rc = convo__mg_find_one(c, meta, filter, NULL, &doc, &found,
                                "connecting (reading the schema version)");
    *version = convo__mg_get_int(&doc, "version", 0);
    bson_destroy(&doc);
    if (rc == 0 && *version > SCHEMA_VERSION)
        rc = convo__error(c->err, CONVO_ENOTSUP, NULL,
                          "MongoDB: prefix was written by a newer convo (schema %lld > %d)",
                          (long long)*version, SCHEMA_VERSION);
    return rc;
}

/* {key: {g: 1, <fields>: 1}, name, unique?} for createIndexes. No index is
 * partial: servers that speak MongoDB's protocol without partial indexes ignore
 * or refuse partialFilterExpression (see Servers in docs/mongo.md). */
static void index_spec(bson_t *list, const char *pos, const char *name, bool unique,
                       const char *const *fields)
{
    bson_t spec, key;
    BSON_APPEND_DOCUMENT_BEGIN(list, pos, &spec);
    BSON_APPEND_DOCUMENT_BEGIN(&spec, "key", &key);
    BSON_APPEND_INT32(&key, "g", 1);
    for (; *fields; fields++)
        BSON_APPEND_INT32(&key, *fields, 1);
    bson_append_document_end(&spec, &key);
    BSON_APPEND_UTF8(&spec, "name", name);
    if (unique)
        BSON_APPEND_BOOL(&spec, "unique", true);
    bson_append_document_end(list, &spec);
}

/* The indexes of one collection (k == KINDS: the threads), plus the expiry index
 * with ttl. */
static int create_kind_indexes(call *c, mongoc_collection_t *coll, int k)
{
    static const char *const none[] = {NULL}, *const chain[] = {"s", NULL},
                             *const idem[] = {"k", NULL}, *const key[] = {"ns", "id", NULL},
                             *const order[] = {"o", NULL}, *const log[] = {"ll", NULL},
                             *const value[] = {"ns", "c", "v", NULL},
                             *const write[] = {"ns", "cp", "task", "idx", NULL};
    bson_t list = BSON_INITIALIZER;
    const char *next = "1";
    switch (k) {
    case BATCHES:
        index_spec(&list, "0", "convo_chain_v2", true, chain);
        index_spec(&list, "1", "convo_idempotency_v4", true, idem);
        /* the batches marked u (carrying a checkpoint): sparse only saves room, a
         * server that ignores sparse indexes every batch under null */
        BCON_APPEND(&list, "2", "{", "key", "{", "u", BCON_INT32(1), "}", "name",
                    BCON_UTF8("convo_pending_v4"), "sparse", BCON_BOOL(true), "}");
        next = "3";
        break;
    case CHECKPOINTS:
        index_spec(&list, "0", "convo_checkpoint_v2", true, key);
        index_spec(&list, "1", "convo_checkpoint_order_v2", false, order);
        /* a rewrite finds the checkpoints past its keep without reading the others */
        index_spec(&list, "2", "convo_checkpoint_log_v5", false, log);
        next = "3";
        break;
    case VALUES:
        index_spec(&list, "0", "convo_value_v2", true, value);
        break;
    case WRITES:
        index_spec(&list, "0", "convo_write_v2", true, write);
        break;
    default: /* the threads: which thread doc names a generation (leftovers); the
              * thread index's orders by activity and by creation (layout 6) */
        index_spec(&list, "0", "convo_generation", false, none);
        BCON_APPEND(&list, "1", "{", "key", "{", "ua", BCON_INT32(-1), "_id", BCON_INT32(-1), "}",
                    "name", BCON_UTF8("convo_recent_v6"), "}");
        BCON_APPEND(&list, "2", "{", "key", "{", "ca", BCON_INT32(-1), "_id", BCON_INT32(-1), "}",
                    "name", BCON_UTF8("convo_created_v6"), "}");
        next = "3";
        break;
    }
    if (c->b->ttl_ms)
        BCON_APPEND(&list, next, "{", "key", "{", "exp", BCON_INT32(1), "}", "name",
                    BCON_UTF8("convo_expiry"), "expireAfterSeconds", BCON_INT32(0), "}");
    int rc = convo__mg_create_indexes(c, coll, &list);
    bson_destroy(&list);
    return rc;
}

static int create_all_indexes(call *c)
{
    int rc = create_kind_indexes(c, c->threads, KINDS);
    for (int k = 0; k < KINDS && rc == 0; k++)
        rc = create_kind_indexes(c, convo__mg_kind(c, k), k);
    return rc;
}

/* ---- layout 1 -> 2 ----
 * Layout 1 put the thread id (t) in every document of a generation and led every
 * index with it; layout 2 keeps only g, whose first bytes hash the id. Moving up
 * removes the dead generations of layout 1 (their leftovers could not be found
 * by hash), then t, then the old indexes. Each step can run again: a store killed
 * midway moves up at its next open. */

/* Deletes the generations of layout 1 in collection k that no thread doc names. */
static int drop_dead_v1_generations(call *c, int k)
{
    bson_t *pipeline = BCON_NEW("pipeline", "[", "{", "$match", "{", "t", "{", "$exists",
                                BCON_BOOL(true), "}", "}", "}", "{", "$group", "{", "_id",
                                BCON_UTF8("$g"), "}", "}", "]");
    bson_t *opts = BCON_NEW("allowDiskUse", BCON_BOOL(true)); /* a store of many threads */
    mongoc_cursor_t *cur = mongoc_collection_aggregate(convo__mg_kind(c, k), MONGOC_QUERY_NONE,
                                                       pipeline, opts, c->b->primary);
    const bson_t *doc;
    bson_iter_t it;
    bson_error_t e;
    int rc = 0;
    while (rc == 0 && mongoc_cursor_next(cur, &doc)) {
        bool named = false;
        bson_oid_t g;
        if (!bson_iter_init_find(&it, doc, "_id") || !BSON_ITER_HOLDS_OID(&it))
            continue;
        bson_oid_copy(bson_iter_oid(&it), &g);
        rc = convo__mg_generation_named(c, &g, &named);
        if (rc == 0 && !named)
            rc = convo__mg_delete_generation(c, &g, "moving to layout 2");
    }
    if (rc == 0 && mongoc_cursor_error(cur, &e))
        rc = convo__mg_fail(c, &e, "moving to layout 2");
    mongoc_cursor_destroy(cur);
    bson_destroy(pipeline);
    bson_destroy(opts);
    return rc;
}

static int drop_index(call *c, mongoc_collection_t *coll, const char *name, const char *what)
{
    bson_error_t e;
    if (mongoc_collection_drop_index_with_opts(coll, name, NULL, &e) ||
        e.code == 26 || e.code == 27) /* NamespaceNotFound, IndexNotFound: gone already */
        return 0;
    return convo__mg_fail(c, &e, what);
}

static int upgrade_from_v1(call *c)
{
    static const char *const old[KINDS][3] = {{"convo_chain", "convo_idempotency", NULL},
                                              {"convo_checkpoint", "convo_checkpoint_order", NULL},
                                              {"convo_value", NULL, NULL},
                                              {"convo_write", NULL, NULL}};
    bson_t *with_t = BCON_NEW("t", "{", "$exists", BCON_BOOL(true), "}");
    bson_t *unset = BCON_NEW("$unset", "{", "t", BCON_UTF8(""), "}");
    int rc = 0;
    for (int k = 0; k < KINDS && rc == 0; k++)
        rc = drop_dead_v1_generations(c, k);
    for (int k = 0; k < KINDS && rc == 0; k++)
        rc = convo__mg_update_many(c, convo__mg_kind(c, k), with_t, unset, "moving to layout 2");
    for (int k = 0; k < KINDS; k++)
        for (int i = 0; rc == 0 && old[k][i]; i++)
            rc = drop_index(c, convo__mg_kind(c, k), old[k][i], "moving to layout 2");
    bson_destroy(with_t);
    bson_destroy(unset);
    return rc;
}

/* ---- layout 2 -> 3 ----
 * Layout 2 numbered checkpoints per thread (the thread doc's counter co);
 * layout 3 numbers them store-wide, from the counter {_id: "order", n} in
 * <prefix>_meta. Moving up only starts that counter above every number
 * already given out, so each thread's checkpoints keep their order and every
 * later put comes after all of them. Nothing is rewritten: $max makes it safe
 * to run again, and from two stores at once. */

mongoc_collection_t *convo__mg_meta_collection(call *c)
{
    if (!c->meta)
        c->meta = mongoc_client_get_collection(c->client, c->b->database, c->b->meta_name);
    return c->meta;
}

static int upgrade_from_v2(call *c)
{
    bson_t *all = bson_new(), doc;
    bson_t *opts = BCON_NEW("sort", "{", "o", BCON_INT32(-1), "}", "limit", BCON_INT64(1),
                            "projection", "{", "o", BCON_INT32(1), "}");
    bool found;
    int rc = convo__mg_find_one(c, convo__mg_kind(c, CHECKPOINTS), all, opts, &doc, &found,
                                "moving to layout 3");
    int64_t highest = found ? convo__mg_get_int(&doc, "o", 0) : 0;
    bson_destroy(&doc);
    bson_destroy(all);
    bson_destroy(opts);
    bson_t *filter = BCON_NEW("_id", BCON_UTF8("order"));
    bson_t *update = BCON_NEW("$max", "{", "n", BCON_INT64(highest), "}");
    bson_t *upsert = BCON_NEW("upsert", BCON_BOOL(true));
    bson_error_t e;
    for (int attempt = 0; rc == 0 && attempt < 2; attempt++) {
        if (mongoc_collection_update_one(convo__mg_meta_collection(c), filter, update, upsert, NULL,
                                         &e))
            break;
        if (!convo__mg_is_duplicate(&e) || attempt == 1) /* a dup: another store made it first */
            rc = convo__mg_fail(c, &e, "moving to layout 3");
    }
    bson_destroy(filter);
    bson_destroy(update);
    bson_destroy(upsert);
    return rc;
}

/* ---- layout 3 -> 4 ----
 * Layout 3 kept the idempotency key k only on batches that had one, unique
 * through a partial index, and found batches carrying a checkpoint through a
 * partial index on cp. Layout 4 has no partial index: every batch has k (its
 * position s when it has no key: unique by construction, since the chain index
 * makes s unique in a generation), and a batch carrying a checkpoint is marked
 * u: true. Moving up gives every batch its k, marks what carries cp, then (in
 * ensure_schema) creates the layout 4 indexes and drops the partial ones. Each
 * step can run again. */

#define BACKFILL_BULK 1000 /* updates per round trip */

/* $set k: s on every batch without k, by _id, in unordered bulks. */
static int backfill_keys(call *c)
{
    bson_t *filter = BCON_NEW("k", "{", "$exists", BCON_BOOL(false), "}");
    bson_t *opts = BCON_NEW("projection", "{", "s", BCON_INT32(1), "}");
    bson_t *bulk_opts = BCON_NEW("ordered", BCON_BOOL(false));
    mongoc_cursor_t *cur =
        mongoc_collection_find_with_opts(c->batches, filter, opts, c->b->primary);
    mongoc_bulk_operation_t *bulk = NULL;
    const bson_t *doc;
    bson_error_t e;
    size_t queued = 0;
    int rc = 0;
    while (rc == 0 && mongoc_cursor_next(cur, &doc)) {
        bson_iter_t it;
        if (!bson_iter_init_find(&it, doc, "_id"))
            continue;
        bson_t *sel = bson_new();
        bson_append_iter(sel, "_id", 3, &it);
        BCON_APPEND(sel, "k", "{", "$exists", BCON_BOOL(false), "}");
        bson_t *set = BCON_NEW("$set", "{", "k", BCON_INT64(convo__mg_get_int(doc, "s", 0)), "}");
        if (!bulk)
            bulk = mongoc_collection_create_bulk_operation_with_opts(c->batches, bulk_opts);
        if (!mongoc_bulk_operation_update_one_with_opts(bulk, sel, set, NULL, &e))
            rc = convo__mg_fail(c, &e, "moving to layout 4");
        bson_destroy(sel);
        bson_destroy(set);
        if (rc == 0 && ++queued == BACKFILL_BULK) {
            if (!mongoc_bulk_operation_execute(bulk, NULL, &e))
                rc = convo__mg_fail(c, &e, "moving to layout 4");
            mongoc_bulk_operation_destroy(bulk);
            bulk = NULL;
            queued = 0;
        }
    }
    if (rc == 0 && mongoc_cursor_error(cur, &e))
        rc = convo__mg_fail(c, &e, "moving to layout 4");
    if (rc == 0 && bulk && !mongoc_bulk_operation_execute(bulk, NULL, &e))
        rc = convo__mg_fail(c, &e, "moving to layout 4");
    mongoc_bulk_operation_destroy(bulk);
    mongoc_cursor_destroy(cur);
    bson_destroy(filter);
    bson_destroy(opts);
    bson_destroy(bulk_opts);
    return rc;
}

static int upgrade_to_v4(call *c)
{
    bson_t *carrying = BCON_NEW("cp", "{", "$exists", BCON_BOOL(true), "}", "u", "{", "$exists",
                                BCON_BOOL(false), "}");
    bson_t *mark = BCON_NEW("$set", "{", "u", BCON_BOOL(true), "}");
    int rc = backfill_keys(c);
    if (rc == 0)
        rc = convo__mg_update_many(c, c->batches, carrying, mark, "moving to layout 4");
    bson_destroy(carrying);
    bson_destroy(mark);
    return rc;
}

/* ---- layout 4 -> 5 ----
 * Layout 5 has the tail rewrite: a batch's slot s may lie above the seq of its
 * first message (e - n), and r is the thread's generation from that batch on.
 * Every layout 4 batch reads the same in layout 5 (s == e - n, no r: generation
 * 0), so moving up only records the version, which keeps a layout 4 process
 * (that would take s for the seq of the first message) from opening the store. */

/* ---- layout 5 -> 6 ----
 * Layout 6 keeps the thread index on the thread doc (ua, ca, ln, sl): moving
 * up fills them in from each thread's first and last batch (index.c,
 * convo__mg_index_backfill). */

/* Checks the stored schema version, creates the indexes (a no-op when they
 * exist), records the declared index keys, moves a layout 1 to 5 store up, and
 * records the version. */
int convo__mg_ensure_schema(call *c)
{
    mongoc_collection_t *meta =
        mongoc_client_get_collection(c->client, c->b->database, c->b->meta_name);
    bson_t *filter = BCON_NEW("_id", BCON_UTF8("schema"));
    bson_t *update = BCON_NEW("$max", "{", "version", BCON_INT32(SCHEMA_VERSION), "}");
    bson_t *opts = BCON_NEW("upsert", BCON_BOOL(true));
    bson_error_t e;
    int64_t version = 0;
    int rc = check_version(c, meta, filter, &version);
    if (rc == 0 && version >= 1 && version < 4) /* before the unique index on k */
        rc = upgrade_to_v4(c);
    if (rc == 0)
        rc = create_all_indexes(c);
    if (rc == 0)
        rc = convo__mg_index_keys(c);
    if (rc == 0 && version >= 1 && version < 6) /* times and length for the thread index */
        rc = convo__mg_index_backfill(c);
    if (rc == 0 && version == 1)
        rc = upgrade_from_v1(c);
    if (rc == 0 && version >= 1 && version < 3)
        rc = upgrade_from_v2(c);
    if (rc == 0 && version >= 1 && version < 4)
        rc = drop_index(c, c->batches, "convo_idempotency_v2", "moving to layout 4");
    if (rc == 0 && version >= 1 && version < 4)
        rc = drop_index(c, c->batches, "convo_pending_v3", "moving to layout 4");
    /* two stores opening at once may race on the upsert: the loser's dup key is fine */
    if (rc == 0 && !mongoc_collection_update_one(meta, filter, update, opts, NULL, &e) &&
        !convo__mg_is_duplicate(&e))
        rc = convo__mg_fail(c, &e, "recording the schema version");
    bson_destroy(update);
    bson_destroy(opts);
    bson_destroy(filter);
    mongoc_collection_destroy(meta);
    return rc;
}

/* ---- measuring (convo bench) ---- */

/* A number under storageStats of a $collStats reply; false when it is not there. */
static bool storage_stat(const bson_t *doc, const char *field, int64_t *out)
{
    char path[64];
    bson_iter_t it;
    snprintf(path, sizeof path, "storageStats.%s", field);
    if (!bson_iter_init(&it, doc) || !bson_iter_find_descendant(&it, path, &it) ||
        !BSON_ITER_HOLDS_NUMBER(&it))
        return false;
    *out = bson_iter_as_int64(&it);
    return true;
}

/* Adds storageSize + totalIndexSize of one collection, as the server reports them
 * ($collStats); a collection not created yet adds 0; *reported false when the
 * server does not give both. */
static int collection_bytes(call *c, const char *name, int64_t *bytes, bool *reported)
{
    mongoc_collection_t *coll = mongoc_client_get_collection(c->client, c->b->database, name);
    bson_t *pipeline = BCON_NEW("pipeline", "[", "{", "$collStats", "{", "storageStats", "{", "}",
                                "}", "}", "]");
    mongoc_cursor_t *cur =
        mongoc_collection_aggregate(coll, MONGOC_QUERY_NONE, pipeline, NULL, c->b->primary);
    const bson_t *doc;
    bson_error_t e;
    int64_t data = 0, indexes = 0;
    int rc = 0;
    if (mongoc_cursor_next(cur, &doc)) {
        if (storage_stat(doc, "storageSize", &data) &&
            storage_stat(doc, "totalIndexSize", &indexes))
            *bytes += data + indexes;
        else
            *reported = false;
    } else if (mongoc_cursor_error(cur, &e)) {
        if (e.code != 26) /* NamespaceNotFound: nothing stored yet */
            rc = convo__mg_fail(c, &e, "reading collection sizes");
    } else {
        *reported = false;
    }
    mongoc_cursor_destroy(cur);
    bson_destroy(pipeline);
    mongoc_collection_destroy(coll);
    return rc;
}

/* Bytes this store's collections (database D, prefix P) take on the server: the
 * sum of storageSize + totalIndexSize over P_threads, P_meta and the four
 * per-generation collections. */
int convo__mg_stored_bytes(convo_backend *b, int64_t *bytes, convo_error *err)
{
    call c;
    bool reported = true;
    convo__mg_call_begin(&c, b, err);
    *bytes = 0;
    int rc = collection_bytes(&c, b->threads_name, bytes, &reported);
    if (rc == 0)
        rc = collection_bytes(&c, b->meta_name, bytes, &reported);
    for (int k = 0; k < KINDS && rc == 0; k++)
        rc = collection_bytes(&c, b->kinds_name[k], bytes, &reported);
    convo__mg_call_end(&c);
    if (rc == 0 && !reported)
        rc = convo__error(err, CONVO_ENOTSUP, NULL, "MongoDB: the server does not report sizes");
    return rc;
}

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* n single-document inserts into a scratch collection, which is dropped after. */
int convo__mg_bench_raw(convo_backend *b, const char *payload, size_t payload_len, size_t n,
                           double *seconds, convo_error *err)
{
    call c;
    char name[96];
    bson_error_t e;
    int rc = 0;
    convo__mg_call_begin(&c, b, err);
    snprintf(name, sizeof name, "%s_bench_%ld_%lld", b->meta_name, (long)getpid(),
             (long long)convo__now_micros());
    mongoc_collection_t *coll = mongoc_client_get_collection(c.client, b->database, name);
    double start = seconds_now();
    for (size_t i = 0; i < n && rc == 0; i++) {
        bson_t *doc = BCON_NEW("i", BCON_INT64((int64_t)i));
        BSON_APPEND_BINARY(doc, "p", BSON_SUBTYPE_BINARY, (const uint8_t *)payload,
                           (uint32_t)payload_len);
        if (!mongoc_collection_insert_one(coll, doc, NULL, NULL, &e))
            rc = convo__mg_fail(&c, &e, "inserting");
        bson_destroy(doc);
    }
    *seconds = seconds_now() - start;
    mongoc_collection_drop(coll, NULL);
    mongoc_collection_destroy(coll);
    convo__mg_call_end(&c);
    return rc;
}
