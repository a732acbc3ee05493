/* index.c — the MongoDB driver: the thread index (layout 6). A listable thread
 * doc carries ua / ca (updated_at, created_at, micros), ln (its length) and sl
 * (the slot of the batch ln was read from); indexes on them serve
 * convo_thread_list_ex, and the declared extra keys get indexes of their own.
 * docs/mongo.md, "Thread index", says which index serves which query. */
#include "mongo_int.h"

#define STAGING_PREFIX ".convo-import-" /* lib/import.c's staged copies: never listed */
#define INDEX_DOC "index"                /* <prefix>_meta {_id: "index", keys: [...]} */

/* ---- keeping the times ---- */

bool convo__mg_listable(const char *id)
{
    return strncmp(id, STAGING_PREFIX, strlen(STAGING_PREFIX)) != 0;
}

/* The update after batch (slot, ending at length, created at) landed: the
 * thread is live, updated then, created then unless earlier, and has length
 * messages — unless a batch above it was recorded already (sl), whose times
 * are later. */
static void after_batch_update(const char *id, const bson_oid_t *g, int64_t slot, int64_t length,
                               int64_t at, bson_t **filter, bson_t **update)
{
    *filter = BCON_NEW("_id", BCON_UTF8(id), "g", BCON_OID(g));
    if (convo__mg_listable(id)) {
        BCON_APPEND(*filter, "$or", "[", "{", "sl", "{", "$lt", BCON_INT64(slot), "}", "}", "{",
                    "sl", "{", "$exists", BCON_BOOL(false), "}", "}", "]");
        *update = BCON_NEW("$set", "{", "live", BCON_BOOL(true), "ln", BCON_INT64(length), "sl",
                           BCON_INT64(slot), "}", "$max", "{", "ua", BCON_INT64(at), "}", "$min",
                           "{", "ca", BCON_INT64(at), "}");
    } else {
        *update = BCON_NEW("$set", "{", "live", BCON_BOOL(true), "}");
    }
}

int convo__mg_index_after_batch(call *c, const char *id, const bson_oid_t *g, int64_t slot,
                                int64_t length, int64_t at)
{
    bson_t *filter, *update;
    after_batch_update(id, g, slot, length, at, &filter, &update);
    int rc = convo__mg_update_one(c, c->threads, filter, update, NULL, "updating the index");
    bson_destroy(filter);
    bson_destroy(update);
    return rc;
}

/* The same after an append or a rewrite, sent unacknowledged (no round trip
 * of its own): when it is lost, the next write, load or listing of the thread
 * repairs the index from the batches, as after a crash between the two
 * (docs/mongo.md). */
int convo__mg_index_after_write(call *c, const char *id, const bson_oid_t *g, int64_t slot,
                                 int64_t length, int64_t at)
{
    bson_t *filter, *update;
    after_batch_update(id, g, slot, length, at, &filter, &update);
    int rc = convo__mg_update_one_unacked(c, c->threads, filter, update, "updating the index");
    bson_destroy(filter);
    bson_destroy(update);
    return rc;
}

/* The $max / $min fields of a write that changes no batch (save_extra). */
void convo__mg_index_times(const char *id, bson_t *max, bson_t *min, int64_t now_us)
{
    if (!convo__mg_listable(id))
        return;
    BSON_APPEND_INT64(max, "ua", now_us);
    BSON_APPEND_INT64(min, "ca", now_us);
}

/* A checkpoint put: the thread is live and updated now; *matched 0 when a
 * delete took the thread doc meanwhile. */
int convo__mg_index_touch(call *c, const char *id, const bson_oid_t *g, int64_t *matched)
{
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(id), "g", BCON_OID(g));
    bson_t update = BSON_INITIALIZER, max = BSON_INITIALIZER, min = BSON_INITIALIZER;
    BCON_APPEND(&update, "$set", "{", "live", BCON_BOOL(true), "}");
    convo__mg_index_times(id, &max, &min, convo__now_micros());
    if (!bson_empty(&max))
        BSON_APPEND_DOCUMENT(&update, "$max", &max);
    if (!bson_empty(&min))
        BSON_APPEND_DOCUMENT(&update, "$min", &min);
    int rc = convo__mg_update_one(c, c->threads, filter, &update, matched, "updating a thread");
    bson_destroy(filter);
    bson_destroy(&update);
    bson_destroy(&max);
    bson_destroy(&min);
    return rc;
}

/* Does thread doc t say less than its batches, top the highest? Its index
 * fields are missing, or were read from a lower slot (a writer died between
 * its batch and the index update, or that update was lost): ln alone would
 * miss a rewrite that kept the length. */
bool convo__mg_index_behind(const thread_doc *t, const batch_head *top)
{
    return !t->indexed || (top->found && !top->fence && (t->sl < top->s || t->ln != top->e));
}

/* Repair on read: thread doc t, read with its generation's top batch (not
 * found: none), is behind it: record the top batch as its writer would have. */
int convo__mg_index_repair(call *c, const char *id, const thread_doc *t, const batch_head *top)
{
    if (!convo__mg_listable(id) || t->forking || !convo__mg_index_behind(t, top))
        return 0;
    if (top->found && !top->fence)
        return convo__mg_index_after_batch(c, id, &t->g, top->s, top->e, top->at);
    if (!top->found && t->live)
        return convo__mg_index_touch(c, id, &t->g, NULL);
    return 0;
}

/* ---- the declared keys, recorded in <prefix>_meta ---- */

void convo__mg_index_keys_free(convo_backend *b)
{
    for (char **k = b->index_keys; k && *k; k++)
        free(*k);
    free(b->index_keys);
    b->index_keys = NULL;
}

/* The keys array of the meta doc into b->index_keys. */
static int parse_keys(call *c, const bson_t *doc)
{
    bson_iter_t it, arr;
    size_t n = 0;
    if (!bson_iter_init_find(&it, doc, "keys") || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &arr))
        return convo__mg_corrupt(c, "index keys record without keys");
    while (bson_iter_next(&arr))
        n++;
    convo__mg_index_keys_free(c->b);
    if (!(c->b->index_keys = calloc(n + 1, sizeof *c->b->index_keys)))
        return convo__mg_no_memory(c);
    bson_iter_recurse(&it, &arr);
    for (size_t i = 0; bson_iter_next(&arr); i++) {
        if (!BSON_ITER_HOLDS_UTF8(&arr))
            return convo__mg_corrupt(c, "index key is not a string");
        if (!(c->b->index_keys[i] = strdup(bson_iter_utf8(&arr, NULL))))
            return convo__mg_no_memory(c);
    }
    return 0;
}

static bool same_keys(char *const *a, char *const *b)
{
    for (; *a && *b; a++, b++)
        if (strcmp(*a, *b) != 0)
            return false;
    return !*a && !*b;
}

/* The opener's keys, now recorded, into b->index_keys. */
static int keep_declared(call *c, char *const *declared)
{
    size_t n = 0;
    while (declared[n])
        n++;
    convo__mg_index_keys_free(c->b);
    if (!(c->b->index_keys = calloc(n + 1, sizeof *c->b->index_keys)))
        return convo__mg_no_memory(c);
    for (size_t i = 0; i < n; i++)
        if (!(c->b->index_keys[i] = strdup(declared[i])))
            return convo__mg_no_memory(c);
    return 0;
}

/* Reads the recorded keys; records the opener's when none are; refuses others. */
static int record_keys(call *c)
{
    char *const *declared = c->b->limits.indexed_keys;
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(INDEX_DOC)), doc;
    int rc = 0;
    for (int attempt = 0; rc == 0 && attempt < 2; attempt++) {
        bool found = false, dup = false;
        rc = convo__mg_find_one(c, convo__mg_meta_collection(c), filter, NULL, &doc, &found,
                                "reading the index keys");
        if (rc == 0 && found)
            rc = parse_keys(c, &doc);
        bson_destroy(&doc);
        if (rc != 0 || found || !declared)
            break;
        bson_t rec = BSON_INITIALIZER, arr;
        BSON_APPEND_UTF8(&rec, "_id", INDEX_DOC);
        BSON_APPEND_ARRAY_BEGIN(&rec, "keys", &arr);
        for (uint32_t i = 0; declared[i]; i++) {
            char buf[16];
            const char *pos;
            bson_uint32_to_string(i, &pos, buf, sizeof buf);
            BSON_APPEND_UTF8(&arr, pos, declared[i]);
        }
        bson_append_array_end(&rec, &arr);
        rc = convo__mg_insert_doc(c, convo__mg_meta_collection(c), &rec, &dup,
                                  "recording the index keys");
        bson_destroy(&rec);
        if (rc == 0 && !dup) { /* ours are the store's now; else read the winner's */
            rc = keep_declared(c, declared);
            break;
        }
    }
    bson_destroy(filter);
    if (rc == 0 && declared && c->b->index_keys && !same_keys(declared, c->b->index_keys))
        rc = convo__error(c->err, CONVO_EINVAL, NULL,
                          "this store indexes other extra keys than the ones declared (they "
                          "are recorded at the first open that declares them)");
    return rc;
}

/* The name of index `what` of escaped key ek: convo_x_<ek>_<what>. */
static char *key_index_name(const char *ek, const char *what)
{
    size_t n = strlen(ek) + strlen(what) + 16;
    char *name = malloc(n);
    if (name)
        snprintf(name, n, "convo_x_%s_%s", ek, what);
    return name;
}

/* {extra.<ek>: 1, <time>: -1, _id: -1} (time NULL: {extra.<ek>: 1, _id: 1}). */
static bool key_index_spec(bson_t *list, const char *pos, const char *ek, const char *time,
                           const char *what)
{
    bson_t spec, key;
    char *path = convo__mg_join("extra.", ek), *name = key_index_name(ek, what);
    bool ok = path && name;
    if (ok) {
        BSON_APPEND_DOCUMENT_BEGIN(list, pos, &spec);
        BSON_APPEND_DOCUMENT_BEGIN(&spec, "key", &key);
        BSON_APPEND_INT32(&key, path, 1);
        if (time)
            BSON_APPEND_INT32(&key, time, -1);
        BSON_APPEND_INT32(&key, "_id", time ? -1 : 1);
        bson_append_document_end(&spec, &key);
        BSON_APPEND_UTF8(&spec, "name", name);
        bson_append_document_end(list, &spec);
    }
    free(path);
    free(name);
    return ok;
}

/* Records the declared keys and creates their three indexes each. */
int convo__mg_index_keys(call *c)
{
    int rc = record_keys(c);
    for (char **k = c->b->index_keys; rc == 0 && k && *k; k++) {
        bson_t list = BSON_INITIALIZER;
        char *ek = convo__mg_key_escape(*k);
        if (!ek || !key_index_spec(&list, "0", ek, "ua", "recent") ||
            !key_index_spec(&list, "1", ek, "ca", "created") ||
            !key_index_spec(&list, "2", ek, NULL, "id"))
            rc = convo__mg_no_memory(c);
        if (rc == 0)
            rc = convo__mg_create_indexes(c, c->threads, &list);
        free(ek);
        bson_destroy(&list);
    }
    return rc;
}

/* ---- layout 5 -> 6 ---- */

/* The batch of generation g with the lowest (dir 1) or highest (-1) slot. */
static int end_batch(call *c, const bson_oid_t *g, int dir, batch_head *h)
{
    bson_t *filter = convo__mg_generation_filter(g), doc;
    bson_t *opts = BCON_NEW("sort", "{", "s", BCON_INT32(dir), "}", "limit", BCON_INT64(1),
                            "projection", "{", "m", BCON_INT32(0), "cp", BCON_INT32(0), "dc",
                            BCON_INT32(0), "}");
    bool found;
    memset(h, 0, sizeof *h);
    int rc = convo__mg_find_one(c, c->batches, filter, opts, &doc, &found, "moving to layout 6");
    if (rc == 0 && found)
        convo__mg_parse_head(&doc, h);
    bson_destroy(&doc);
    bson_destroy(filter);
    bson_destroy(opts);
    return rc;
}

/* One thread doc without the index fields: created_at from its first batch,
 * updated_at and length from its last (a thread with extra only: now). */
static int backfill_thread(call *c, const bson_t *doc, int64_t now_us)
{
    bson_iter_t it;
    thread_doc t;
    batch_head first, top;
    memset(&t, 0, sizeof t);
    bson_init(&t.extra);
    if (!bson_iter_init_find(&it, doc, "_id") || !BSON_ITER_HOLDS_UTF8(&it))
        return 0;
    const char *id = bson_iter_utf8(&it, NULL);
    int rc = convo__mg_parse_thread(c, doc, &t);
    if (rc == 0 && (!convo__mg_listable(id) || t.forking))
        goto out;
    if (rc == 0)
        rc = end_batch(c, &t.g, -1, &top);
    if (rc == 0 && top.found)
        rc = end_batch(c, &t.g, 1, &first);
    if (rc != 0 || (top.found && top.fence) || (!top.found && !t.live))
        goto out; /* being deleted, or an append placeholder: not a thread */
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(id), "g", BCON_OID(&t.g), "ua", "{", "$exists",
                              BCON_BOOL(false), "}");
    bson_t *update =
        top.found ? BCON_NEW("$set", "{", "live", BCON_BOOL(true), "ua", BCON_INT64(top.at), "ca",
                             BCON_INT64(first.at), "ln", BCON_INT64(top.e), "sl",
                             BCON_INT64(top.s), "}")
                  : BCON_NEW("$set", "{", "ua", BCON_INT64(now_us), "ca", BCON_INT64(now_us),
                             "ln", BCON_INT64(0), "}");
    rc = convo__mg_update_one(c, c->threads, filter, update, NULL, "moving to layout 6");
    bson_destroy(filter);
    bson_destroy(update);
out:
    convo__mg_thread_free(&t);
    return rc;
}

int convo__mg_index_backfill(call *c)
{
    bson_t *filter = BCON_NEW("ua", "{", "$exists", BCON_BOOL(false), "}");
    bson_t *opts = BCON_NEW("projection", "{", "extra", BCON_INT32(0), "}");
    mongoc_cursor_t *cur =
        mongoc_collection_find_with_opts(c->threads, filter, opts, c->b->primary);
    const bson_t *doc;
    bson_error_t e;
    int64_t now_us = convo__now_micros();
    int rc = 0;
    while (rc == 0 && mongoc_cursor_next(cur, &doc))
        rc = backfill_thread(c, doc, now_us);
    if (rc == 0 && mongoc_cursor_error(cur, &e))
        rc = convo__mg_fail(c, &e, "moving to layout 6");
    mongoc_cursor_destroy(cur);
    bson_destroy(filter);
    bson_destroy(opts);
    return rc;
}
