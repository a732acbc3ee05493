/* copy.c — the MongoDB driver: a fork with checkpoints (convo_fork_opts
 * with_checkpoints). The source's checkpoints, their writes and values are
 * copied into the new generation while the destination is still the fork's
 * invisible placeholder, so the commit of the fork shows them with the
 * messages, in one step; a cancelled or crashed fork leaves only documents
 * of a generation no thread names. */
#include "mongo_int.h"
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* doc for generation gd: g replaced, the source's _id left out (a new one is
 * made), exp renewed; with order >= 0 also o and w (its number) and at. */
static bson_t *retag(call *c, const bson_t *doc, const bson_oid_t *gd, int64_t order,
                     int64_t now_ms)
{
    bson_t *out = bson_new();
    bson_iter_t it;
    if (!bson_iter_init(&it, doc))
        return out;
    while (bson_iter_next(&it)) {
        const char *k = bson_iter_key(&it);
        if (!strcmp(k, "_id") || !strcmp(k, "g") || !strcmp(k, "exp") ||
            (order >= 0 && (!strcmp(k, "o") || !strcmp(k, "w") || !strcmp(k, "at"))))
            continue;
        bson_append_iter(out, k, -1, &it);
    }
    BSON_APPEND_OID(out, "g", gd);
    if (order >= 0) {
        BSON_APPEND_INT64(out, "o", order);
        BSON_APPEND_INT64(out, "w", order);
        BSON_APPEND_INT64(out, "at", convo__now_micros());
    }
    if (c->b->ttl_ms)
        BSON_APPEND_DATE_TIME(out, "exp", now_ms + 3 * c->b->ttl_ms + TTL_MARGIN_MS);
    return out;
}

static char *key_of(json_t *a)
{
    char *key = a ? json_dumps(a, JSON_COMPACT) : NULL;
    json_decref(a);
    return key;
}

static int remember(call *c, json_t *set, char *key)
{
    int rc = key && json_object_set_new(set, key, json_true()) == 0 ? 0 : convo__mg_no_memory(c);
    free(key);
    return rc;
}

static int has(json_t *set, char *key)
{
    int yes = key && json_object_get(set, key) != NULL;
    free(key);
    return yes;
}

/* Notes the (ns, channel, version) pairs checkpoint doc lists into refs. */
static int note_channels(call *c, const bson_t *doc, const char *ns, json_t *refs)
{
    bson_iter_t it, ch;
    if (!bson_iter_init_find(&it, doc, "ch") || !bson_iter_recurse(&it, &ch))
        return 0;
    int rc = 0;
    while (rc == 0 && bson_iter_next(&ch)) {
        bson_t item;
        uint32_t len;
        const uint8_t *data;
        if (!BSON_ITER_HOLDS_DOCUMENT(&ch))
            continue;
        bson_iter_document(&ch, &len, &data);
        if (!bson_init_static(&item, data, len))
            continue;
        const char *name = convo__mg_get_utf8(&item, "c"), *version = convo__mg_get_utf8(&item, "v");
        if (name && version)
            rc = remember(c, refs, key_of(json_pack("[sss]", ns, name, version)));
    }
    return rc;
}

typedef struct copy_state {
    const bson_oid_t *gs, *gd;
    int64_t length;
    int64_t now_ms;
    json_t *copied; /* [ns, id] of the checkpoints copied */
    json_t *refs;   /* [ns, channel, version] they list */
} copy_state;

/* The documents of kind k of the source's generation that keep() takes, in
 * the order of opts' sort (NULL: any), as copies. */
static int collect(call *c, copy_state *st, int k, const bson_t *opts,
                   int (*keep)(call *, copy_state *, const bson_t *), bson_t ***docs,
                   size_t *n)
{
    bson_t *filter = BCON_NEW("g", BCON_OID(st->gs));
    mongoc_cursor_t *cur =
        mongoc_collection_find_with_opts(convo__mg_kind(c, k), filter, opts, c->b->primary);
    const bson_t *doc;
    size_t cap = 0;
    int rc = 0;
    while (rc == 0 && mongoc_cursor_next(cur, &doc)) {
        int take = keep(c, st, doc);
        if (take <= 0) {
            rc = take;
            continue;
        }
        if (*n == cap) {
            bson_t **grown = realloc(*docs, (cap = cap ? 2 * cap : 64) * sizeof *grown);
            if (!grown) {
                rc = convo__mg_no_memory(c);
                break;
            }
            *docs = grown;
        }
        (*docs)[(*n)++] = bson_copy(doc);
    }
    bson_error_t e;
    if (rc == 0 && mongoc_cursor_error(cur, &e))
        rc = convo__mg_fail(c, &e, "reading checkpoints to copy");
    mongoc_cursor_destroy(cur);
    bson_destroy(filter);
    return rc;
}

/* Copies of docs for generation gd in one ordered bulk insert; checkpoints
 * (first >= 0) numbered first, first + 1, ... in their order. */
static int insert_copies(call *c, copy_state *st, int k, bson_t **docs, size_t n, int64_t first)
{
    bson_t *bulk_opts = BCON_NEW("ordered", BCON_BOOL(true));
    mongoc_bulk_operation_t *bulk =
        mongoc_collection_create_bulk_operation_with_opts(convo__mg_kind(c, k), bulk_opts);
    bson_error_t e;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        bson_t *copy = retag(c, docs[i], st->gd, first >= 0 ? first + (int64_t)i : -1, st->now_ms);
        if (!mongoc_bulk_operation_insert_with_opts(bulk, copy, NULL, &e))
            rc = convo__mg_fail(c, &e, "copying checkpoints");
        bson_destroy(copy);
    }
    bson_t reply;
    bool executed = rc == 0;
    if (executed && !mongoc_bulk_operation_execute(bulk, &reply, &e))
        rc = convo__mg_is_duplicate(&e)
                 ? convo__error(c->err, CONVO_ECONFLICT, NULL,
                                "destination thread was written to while being forked")
                 : convo__mg_fail(c, &e, "copying checkpoints");
    if (executed)
        bson_destroy(&reply);
    mongoc_bulk_operation_destroy(bulk);
    bson_destroy(bulk_opts);
    return rc;
}

/* The documents of kind k that keep() takes, copied to generation gd. */
static int copy_kind(call *c, copy_state *st, int k, const bson_t *opts,
                     int (*keep)(call *, copy_state *, const bson_t *))
{
    bson_t **docs = NULL;
    size_t n = 0;
    int64_t last = 0;
    int rc = collect(c, st, k, opts, keep, &docs, &n);
    if (rc == 0 && n > 0 && k == CHECKPOINTS)
        rc = convo__mg_take_orders(c, (int64_t)n, &last);
    if (rc == 0 && n > 0)
        rc = insert_copies(c, st, k, docs, n, k == CHECKPOINTS ? last - (int64_t)n + 1 : -1);
    for (size_t i = 0; i < n; i++)
        bson_destroy(docs[i]);
    free(docs);
    return rc;
}

/* A checkpoint within the copied messages (numbered anew, in the source's order). */
static int keep_checkpoint(call *c, copy_state *st, const bson_t *doc)
{
    const char *ns = convo__mg_get_utf8(doc, "ns"), *id = convo__mg_get_utf8(doc, "id");
    if (!ns || !id || convo__mg_get_int(doc, "ll", 0) > st->length)
        return 0;
    int rc = remember(c, st->copied, key_of(json_pack("[ss]", ns, id)));
    if (rc == 0)
        rc = note_channels(c, doc, ns, st->refs);
    return rc ? rc : 1;
}

static int keep_write(call *c, copy_state *st, const bson_t *doc)
{
    (void)c;
    const char *ns = convo__mg_get_utf8(doc, "ns"), *cp = convo__mg_get_utf8(doc, "cp");
    return ns && cp && has(st->copied, key_of(json_pack("[ss]", ns, cp)));
}

static int keep_value(call *c, copy_state *st, const bson_t *doc)
{
    (void)c;
    const char *ns = convo__mg_get_utf8(doc, "ns"), *ch = convo__mg_get_utf8(doc, "c"),
               *v = convo__mg_get_utf8(doc, "v");
    return ns && ch && v && has(st->refs, key_of(json_pack("[sss]", ns, ch, v)));
}

int convo__mg_copy_checkpoints(call *c, const char *src, const bson_oid_t *gs,
                               const bson_oid_t *gd, int64_t length)
{
    /* checkpoints still riding in the source's batches are stored first */
    thread_doc t;
    bool visible = false;
    int rc = convo__mg_read_settled(c, src, &t, &visible);
    convo__mg_thread_free(&t);
    copy_state st = {gs, gd, length, convo__mg_now_ms(), json_object(), json_object()};
    if (rc == 0 && (!st.copied || !st.refs))
        rc = convo__mg_no_memory(c);
    bson_t *by_order = BCON_NEW("sort", "{", "o", BCON_INT32(1), "}");
    if (rc == 0)
        rc = copy_kind(c, &st, CHECKPOINTS, by_order, keep_checkpoint);
    if (rc == 0 && json_object_size(st.copied))
        rc = copy_kind(c, &st, WRITES, NULL, keep_write);
    if (rc == 0 && json_object_size(st.refs))
        rc = copy_kind(c, &st, VALUES, NULL, keep_value);
    bson_destroy(by_order);
    json_decref(st.copied);
    json_decref(st.refs);
    return rc;
}
