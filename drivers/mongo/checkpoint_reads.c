/* checkpoint_reads.c — the MongoDB driver: checkpoint get, list and prune. */
#include "mongo_int.h"

/* The {c, v} items of a checkpoint doc's channel list, as a query's $or. */
static int channel_refs(const bson_t *doc, bson_t *or)
{
    bson_iter_t it, ch;
    int n = 0;
    if (bson_iter_init_find(&it, doc, "ch") && bson_iter_recurse(&it, &ch))
        while (bson_iter_next(&ch))
            if (BSON_ITER_HOLDS_DOCUMENT(&ch) && bson_append_iter(or, NULL, 0, &ch))
                n++;
    return n;
}

/* The stored values the checkpoint doc refers to, into w. */
static int read_values(call *c, const bson_oid_t *g, const char *ns, const bson_t *doc, walk *w)
{
    bson_t *filter = convo__mg_ns_filter(g, ns), or;
    BSON_APPEND_ARRAY_BEGIN(filter, "$or", &or);
    int n = channel_refs(doc, &or), rc = 0;
    bson_append_array_end(filter, &or);
    if (n > 0) {
        mongoc_cursor_t *cur = mongoc_collection_find_with_opts(convo__mg_kind(c, VALUES), filter,
                                                                NULL, c->b->primary);
        const bson_t *v;
        bson_error_t e;
        while (rc == 0 && mongoc_cursor_next(cur, &v))
            if (convo__mg_walk_keep(w, v) != 0)
                rc = convo__mg_no_memory(c);
        if (rc == 0 && mongoc_cursor_error(cur, &e))
            rc = convo__mg_fail(c, &e, "reading channel values");
        mongoc_cursor_destroy(cur);
    }
    bson_destroy(filter);
    return rc;
}

static const bson_t *find_value(const walk *w, const char *name, const char *version)
{
    for (size_t i = 0; i < w->count; i++) {
        const char *c = convo__mg_get_utf8(w->docs[i], "c"),
                   *v = convo__mg_get_utf8(w->docs[i], "v");
        if (c && v && strcmp(c, name) == 0 && strcmp(v, version) == 0)
            return w->docs[i];
    }
    return NULL;
}

/* Adds every channel of the checkpoint doc with the value stored for its
 * version (type NULL when there is none). */
static int add_channels(call *c, convo_checkpoint *cp, const bson_oid_t *g,
                        const char *ns, const bson_t *doc)
{
    bson_iter_t it, ch;
    walk values = {NULL, NULL, 0, 0};
    int rc = read_values(c, g, ns, doc, &values);
    if (rc == 0 && bson_iter_init_find(&it, doc, "ch") && bson_iter_recurse(&it, &ch)) {
        while (rc == 0 && bson_iter_next(&ch)) {
            bson_t item;
            uint32_t len = 0;
            const uint8_t *data;
            if (!BSON_ITER_HOLDS_DOCUMENT(&ch))
                continue;
            bson_iter_document(&ch, &len, &data);
            bson_init_static(&item, data, len);
            const char *name = convo__mg_get_utf8(&item, "c"),
                       *version = convo__mg_get_utf8(&item, "v");
            const bson_t *value = name && version ? find_value(&values, name, version) : NULL;
            const uint8_t *bytes = value ? convo__mg_get_binary(value, "b", &len) : NULL;
            if (!name || !version)
                rc = convo__mg_corrupt(c, "checkpoint channel without a name or version");
            else if (convo__checkpoint_add_channel(cp, name, version,
                                                   value ? convo__mg_get_utf8(value, "ty") : NULL,
                                                   bytes, value ? len : 0) != 0)
                rc = convo__mg_no_memory(c);
        }
    }
    convo__mg_walk_free(&values);
    return rc;
}

static int add_writes(call *c, convo_checkpoint *cp, const bson_oid_t *g, const char *ns,
                      const char *cpid)
{
    bson_t *filter = convo__mg_ns_filter(g, ns);
    BSON_APPEND_UTF8(filter, "cp", cpid);
    mongoc_cursor_t *cur =
        mongoc_collection_find_with_opts(convo__mg_kind(c, WRITES), filter, NULL, c->b->primary);
    const bson_t *w;
    bson_error_t e;
    int rc = 0;
    while (rc == 0 && mongoc_cursor_next(cur, &w)) {
        uint32_t len;
        const uint8_t *bytes = convo__mg_get_binary(w, "b", &len);
        const char *task = convo__mg_get_utf8(w, "task"), *path = convo__mg_get_utf8(w, "path"),
                   *channel = convo__mg_get_utf8(w, "c"), *type = convo__mg_get_utf8(w, "ty");
        if (!task || !path || !channel || !type)
            rc = convo__mg_corrupt(c, "pending write without its fields");
        else if (convo__checkpoint_add_write(cp, task, path, convo__mg_get_int(w, "idx", 0),
                                             channel, type, bytes, len) != 0)
            rc = convo__mg_no_memory(c);
    }
    if (rc == 0 && mongoc_cursor_error(cur, &e))
        rc = convo__mg_fail(c, &e, "reading pending writes");
    mongoc_cursor_destroy(cur);
    bson_destroy(filter);
    return rc;
}

/* The checkpoint a stored document describes, with its values and writes. */
static int export_checkpoint(call *c, const char *id, const bson_oid_t *g, const bson_t *doc,
                             convo_checkpoint **out)
{
    const char *ns = convo__mg_get_utf8(doc, "ns"), *cpid = convo__mg_get_utf8(doc, "id");
    const char *meta = convo__mg_get_utf8(doc, "meta"), *body_type = convo__mg_get_utf8(doc, "bt");
    uint32_t body_len;
    const uint8_t *body = convo__mg_get_binary(doc, "bb", &body_len);
    *out = NULL;
    if (!ns || !cpid)
        return convo__mg_corrupt(c, "checkpoint without a namespace or id");
    convo_checkpoint *cp = convo__checkpoint_new(
        id, ns, cpid, convo__mg_get_utf8(doc, "p"), meta ? meta : "{}", body_type, body, body_len,
        convo__mg_get_int(doc, "ll", 0), convo__mg_get_int(doc, "at", 0));
    if (!cp)
        return convo__mg_no_memory(c);
    int rc = add_channels(c, cp, g, ns, doc);
    if (rc == 0)
        rc = add_writes(c, cp, g, ns, cpid);
    if (rc != 0) {
        convo_checkpoint_free(cp);
        return rc;
    }
    convo__checkpoint_finish(cp);
    *out = cp;
    return 0;
}

int convo__mg_checkpoint_get(convo_backend *b, const char *id, const char *ns,
                                const char *cpid, convo_checkpoint **out, convo_error *err)
{
    call c;
    thread_doc t;
    bson_t doc;
    bool found = false;
    convo__mg_call_begin(&c, b, err);
    int rc = convo__mg_read_visible(&c, id, &t);
    if (rc == 0) {
        bson_t *filter = convo__mg_ns_filter(&t.g, ns);
        bson_t *opts = BCON_NEW("sort", "{", "o", BCON_INT32(-1), "}", "limit", BCON_INT64(1));
        if (cpid)
            BSON_APPEND_UTF8(filter, "id", cpid);
        rc = convo__mg_find_one(&c, convo__mg_kind(&c, CHECKPOINTS), filter, opts, &doc, &found,
                      "reading a checkpoint");
        if (rc == 0 && !found)
            rc = convo__error(err, CONVO_ENOTFOUND, NULL, "checkpoint not found");
        if (rc == 0)
            rc = export_checkpoint(&c, id, &t.g, &doc, out);
        bson_destroy(&doc);
        bson_destroy(filter);
        bson_destroy(opts);
    }
    convo__mg_thread_free(&t);
    convo__mg_call_end(&c);
    return rc;
}

/* Adds the thread's matching checkpoints, newest first, until the set holds
 * limit; below (when not NULL): only those numbered lower, i.e. put before. */
static int list_thread_checkpoints(call *c, const char *id, const bson_oid_t *g,
                                   const convo_checkpoint_list_opts *o, const int64_t *below,
                                   void *filter, convo_checkpoint_set *set)
{
    bson_t *query = convo__mg_generation_filter(g);
    bson_t *opts = BCON_NEW("sort", "{", "o", BCON_INT32(-1), "}");
    int rc = 0;
    if (o->checkpoint_ns)
        BSON_APPEND_UTF8(query, "ns", o->checkpoint_ns);
    if (below)
        BCON_APPEND(query, "o", "{", "$lt", BCON_INT64(*below), "}");
    mongoc_cursor_t *cur = mongoc_collection_find_with_opts(convo__mg_kind(c, CHECKPOINTS), query,
                                                            opts, c->b->primary);
    const bson_t *d;
    while (rc == 0 && (!o->limit || convo_checkpoint_set_count(set) < o->limit) &&
           mongoc_cursor_next(cur, &d)) {
        const char *meta = convo__mg_get_utf8(d, "meta");
        convo_checkpoint *cp;
        if (filter && !(meta && convo__json_contains(meta, strlen(meta), filter)))
            continue;
        rc = export_checkpoint(c, id, g, d, &cp);
        if (rc == 0 && convo__checkpoint_set_add(set, cp) != 0)
            rc = convo__mg_no_memory(c);
    }
    bson_error_t e;
    if (rc == 0 && mongoc_cursor_error(cur, &e))
        rc = convo__mg_fail(c, &e, "listing checkpoints");
    mongoc_cursor_destroy(cur);
    bson_destroy(query);
    bson_destroy(opts);
    return rc;
}

/* Every visible thread in id order, each newest first (as the memory driver);
 * the checkpoints a thread's batches still carry are settled first. */
static int list_all_checkpoints(call *c, const convo_checkpoint_list_opts *o, const int64_t *below,
                                void *filter, convo_checkpoint_set *set)
{
    bson_t stages = BSON_INITIALIZER;
    bson_t *sort = BCON_NEW("$sort", "{", "_id", BCON_INT32(1), "}");
    bson_t *project = BCON_NEW("$project", "{", "extra", BCON_INT32(0), "}");
    BSON_APPEND_DOCUMENT(&stages, "0", sort);
    BSON_APPEND_DOCUMENT(&stages, "1", project);
    convo__mg_lookup_pending(c, &stages, "2");
    mongoc_cursor_t *cur =
        mongoc_collection_aggregate(c->threads, MONGOC_QUERY_NONE, &stages, NULL, c->b->primary);
    const bson_t *doc;
    int64_t now = convo__mg_now_ms();
    int rc = 0;
    while (rc == 0 && (!o->limit || convo_checkpoint_set_count(set) < o->limit) &&
           mongoc_cursor_next(cur, &doc)) {
        thread_doc t;
        bool yes = false;
        const char *id = convo__mg_get_utf8(doc, "_id");
        memset(&t, 0, sizeof t);
        bson_init(&t.extra);
        if (id && (rc = convo__mg_parse_thread(c, doc, &t)) == 0 &&
            (rc = convo__mg_visible(c, &t, now, &yes)) == 0 && yes &&
            (rc = convo__mg_settle_found(c, &t.g, doc)) == 0)
            rc = list_thread_checkpoints(c, id, &t.g, o, below, filter, set);
        convo__mg_thread_free(&t);
    }
    bson_error_t e;
    if (rc == 0 && mongoc_cursor_error(cur, &e))
        rc = convo__mg_fail(c, &e, "listing checkpoints");
    mongoc_cursor_destroy(cur);
    bson_destroy(&stages);
    bson_destroy(sort);
    bson_destroy(project);
    return rc;
}

/* The number of the checkpoint `before` names, (before_thread_id or thread_id,
 * before_ns or checkpoint_ns or "", before): puts across the whole store are
 * numbered in order, so "put before it" is "numbered lower". CONVO_ENOTFOUND
 * when it does not exist. */
static int before_number(call *c, const convo_checkpoint_list_opts *o, int64_t *number)
{
    const char *tid = o->before_thread_id ? o->before_thread_id : o->thread_id;
    const char *ns = o->before_ns ? o->before_ns : o->checkpoint_ns ? o->checkpoint_ns : "";
    thread_doc t;
    if (!tid)
        return convo__error(c->err, CONVO_EINVAL, NULL, "before needs a thread id");
    int rc = convo__mg_read_visible(c, tid, &t);
    if (rc == 0) {
        bson_t *filter = convo__mg_ns_filter(&t.g, ns), doc;
        bson_t *opts =
            BCON_NEW("limit", BCON_INT64(1), "projection", "{", "o", BCON_INT32(1), "}");
        bool found;
        BSON_APPEND_UTF8(filter, "id", o->before);
        rc = convo__mg_find_one(c, convo__mg_kind(c, CHECKPOINTS), filter, opts, &doc, &found,
                                "reading a checkpoint");
        if (rc == 0 && !found)
            rc = convo__error(c->err, CONVO_ENOTFOUND, NULL, "checkpoint '%s' not found",
                              o->before);
        *number = convo__mg_get_int(&doc, "o", 0);
        bson_destroy(&doc);
        bson_destroy(filter);
        bson_destroy(opts);
    } else if (rc == CONVO_ENOTFOUND) {
        convo__error_clear(c->err);
        rc = convo__error(c->err, CONVO_ENOTFOUND, NULL, "checkpoint '%s' not found", o->before);
    }
    convo__mg_thread_free(&t);
    return rc;
}

int convo__mg_checkpoint_list(convo_backend *b, const convo_checkpoint_list_opts *o,
                                 void *filter, convo_checkpoint_set **out, convo_error *err)
{
    convo_checkpoint_set *set = convo__checkpoint_set_new();
    if (!set)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    call c;
    int64_t number = 0;
    convo__mg_call_begin(&c, b, err);
    int rc = o->before ? before_number(&c, o, &number) : 0;
    const int64_t *below = o->before ? &number : NULL;
    if (rc == 0 && o->thread_id) {
        thread_doc t;
        bool yes = false;
        rc = convo__mg_read_settled(&c, o->thread_id, &t, &yes);
        if (rc == 0 && yes)
            rc = list_thread_checkpoints(&c, o->thread_id, &t.g, o, below, filter, set);
        convo__mg_thread_free(&t);
    } else if (rc == 0) {
        rc = list_all_checkpoints(&c, o, below, filter, set);
    }
    convo__mg_call_end(&c);
    if (rc != 0) {
        convo_checkpoint_set_free(set);
        return rc;
    }
    *out = set;
    return 0;
}

/* "[ns, channel, version]" as one string, a key of a jansson object. */
static char *value_key(const char *ns, const char *channel, const char *version)
{
    json_t *a = json_pack("[sss]", ns, channel, version);
    char *key = a ? json_dumps(a, JSON_COMPACT) : NULL;
    json_decref(a);
    return key;
}

/* Notes the (ns, channel, version) references of a checkpoint doc into refs. */
static int note_refs(call *c, const bson_t *doc, const char *ns, json_t *refs)
{
    bson_iter_t it, ch;
    if (!bson_iter_init_find(&it, doc, "ch") || !bson_iter_recurse(&it, &ch))
        return 0;
    while (bson_iter_next(&ch)) {
        bson_t item;
        uint32_t len;
        const uint8_t *data;
        if (!BSON_ITER_HOLDS_DOCUMENT(&ch))
            continue;
        bson_iter_document(&ch, &len, &data);
        bson_init_static(&item, data, len);
        const char *name = convo__mg_get_utf8(&item, "c"),
                   *version = convo__mg_get_utf8(&item, "v");
        char *key = name && version ? value_key(ns, name, version) : NULL;
        if (key && json_object_set_new(refs, key, json_true()) != 0) {
            free(key);
            return convo__mg_no_memory(c);
        }
        free(key);
    }
    return 0;
}

/* Deletes the documents of kind k whose field (id or cp) is one of ids, in ns. */
static int delete_ids(call *c, int k, const bson_oid_t *g, const char *ns, const char *field,
                      json_t *ids)
{
    bson_t *filter = convo__mg_ns_filter(g, ns), in, arr;
    size_t i;
    json_t *v;
    BSON_APPEND_DOCUMENT_BEGIN(filter, field, &in);
    BSON_APPEND_ARRAY_BEGIN(&in, "$in", &arr);
    json_array_foreach(ids, i, v) {
        char buf[16];
        const char *key;
        bson_uint32_to_string((uint32_t)i, &key, buf, sizeof buf);
        BSON_APPEND_UTF8(&arr, key, json_string_value(v));
    }
    bson_append_array_end(&in, &arr);
    bson_append_document_end(filter, &in);
    int rc =
        convo__mg_delete_docs(c, convo__mg_kind(c, k), filter, true, NULL, "pruning checkpoints");
    bson_destroy(filter);
    return rc;
}

/* Deletes values referenced only by pruned checkpoints: not every value a kept
 * one does not name, so a value a put is writing right now is never taken. */
static int delete_values(call *c, const bson_oid_t *g, json_t *dropped, json_t *kept)
{
    const char *key;
    json_t *v;
    int rc = 0;
    json_object_foreach(dropped, key, v) {
        if (json_object_get(kept, key))
            continue;
        json_t *a = json_loads(key, 0, NULL);
        bson_t *filter = convo__mg_ns_filter(g, json_string_value(json_array_get(a, 0)));
        BSON_APPEND_UTF8(filter, "c", json_string_value(json_array_get(a, 1)));
        BSON_APPEND_UTF8(filter, "v", json_string_value(json_array_get(a, 2)));
        rc = convo__mg_delete_docs(c, convo__mg_kind(c, VALUES), filter, false, NULL,
                                   "pruning values");
        bson_destroy(filter);
        json_decref(a);
        if (rc != 0)
            break;
    }
    return rc;
}

/* Which checkpoints go: prune's (past the keep_last newest of their
 * namespace, counted in counts) or delete's (named in chosen, by cp_key). */
typedef struct choice {
    size_t keep_last;
    json_t *counts;
    json_t *chosen;
} choice;

static char *cp_key(const char *ns, const char *id)
{
    json_t *a = json_pack("[ss]", ns, id);
    char *key = a ? json_dumps(a, JSON_COMPACT) : NULL;
    json_decref(a);
    return key;
}

/* 1: drop checkpoint (ns, id), met newest first; 0: keep it; -1: no memory. */
static int choose(choice *ch, const char *ns, const char *id)
{
    if (ch->chosen) {
        char *key = cp_key(ns, id);
        int drop = key ? json_object_get(ch->chosen, key) != NULL : -1;
        free(key);
        return drop;
    }
    size_t seen = (size_t)json_integer_value(json_object_get(ch->counts, ns));
    if (json_object_set_new(ch->counts, ns, json_integer((json_int_t)seen + 1)) != 0)
        return -1;
    return seen >= ch->keep_last;
}

/* Sorts each checkpoint of the thread, newest first, into kept or dropped (as
 * ch chooses), with the values each side refers to. */
static int sort_for_prune(call *c, const bson_oid_t *g, choice *choice, json_t *drop_ids,
                          json_t *kept, json_t *dropped)
{
    bson_t *query = convo__mg_generation_filter(g);
    bson_t *opts = BCON_NEW("sort", "{", "o", BCON_INT32(-1), "}", "projection", "{", "ns",
                            BCON_INT32(1), "id", BCON_INT32(1), "ch", BCON_INT32(1), "}");
    mongoc_cursor_t *cur = mongoc_collection_find_with_opts(convo__mg_kind(c, CHECKPOINTS), query,
                                                            opts, c->b->primary);
    const bson_t *doc;
    bson_error_t e;
    int rc = 0;
    while (rc == 0 && mongoc_cursor_next(cur, &doc)) {
        const char *ns = convo__mg_get_utf8(doc, "ns"), *cpid = convo__mg_get_utf8(doc, "id");
        if (!ns || !cpid)
            continue;
        int drop = choose(choice, ns, cpid);
        if (drop < 0) {
            rc = convo__mg_no_memory(c);
            break;
        }
        if (!drop) {
            rc = note_refs(c, doc, ns, kept);
            continue;
        }
        json_t *ids = json_object_get(drop_ids, ns);
        if (!ids)
            json_object_set_new(drop_ids, ns, ids = json_array());
        if (!ids || json_array_append_new(ids, json_string(cpid)) != 0)
            rc = convo__mg_no_memory(c);
        else
            rc = note_refs(c, doc, ns, dropped);
    }
    if (rc == 0 && mongoc_cursor_error(cur, &e))
        rc = convo__mg_fail(c, &e, "reading checkpoints");
    mongoc_cursor_destroy(cur);
    bson_destroy(query);
    bson_destroy(opts);
    return rc;
}

/* Removes the checkpoints ch chooses, then their writes, then the values
 * only they named; *removed = how many checkpoints. */
static int prune_thread(call *c, const bson_oid_t *g, choice *ch, uint64_t *removed)
{
    json_t *drop_ids = json_object(), *kept = json_object(), *dropped = json_object();
    int rc = drop_ids && kept && dropped ? sort_for_prune(c, g, ch, drop_ids, kept, dropped)
                                         : convo__mg_no_memory(c);
    const char *ns;
    json_t *ids;
    *removed = 0;
    json_object_foreach(drop_ids, ns, ids) {
        *removed += json_array_size(ids);
        if (rc == 0) /* the checkpoints first: a value goes only once nothing names it */
            rc = delete_ids(c, CHECKPOINTS, g, ns, "id", ids);
        if (rc == 0)
            rc = delete_ids(c, WRITES, g, ns, "cp", ids);
    }
    if (rc == 0)
        rc = delete_values(c, g, dropped, kept);
    json_decref(drop_ids);
    json_decref(kept);
    json_decref(dropped);
    return rc;
}

int convo__mg_checkpoint_prune(convo_backend *b, const char *id, size_t keep_last,
                                  convo_error *err)
{
    call c;
    thread_doc t;
    convo__mg_call_begin(&c, b, err);
    choice ch = {keep_last, json_object(), NULL};
    uint64_t removed;
    int rc = ch.counts ? convo__mg_read_visible(&c, id, &t) : convo__mg_no_memory(&c);
    if (rc == 0)
        rc = prune_thread(&c, &t.g, &ch, &removed);
    if (ch.counts)
        convo__mg_thread_free(&t); /* read_visible filled it */
    json_decref(ch.counts);
    convo__mg_call_end(&c);
    return rc;
}

int convo__mg_checkpoint_delete(convo_backend *b, const char *id, const char *const *ns,
                                const char *const *ids, size_t n, uint64_t *removed,
                                convo_error *err)
{
    call c;
    thread_doc t;
    memset(&t, 0, sizeof t);
    bson_init(&t.extra); /* freed whether or not the thread is read */
    convo__mg_call_begin(&c, b, err);
    choice ch = {0, NULL, json_object()};
    int rc = ch.chosen ? 0 : convo__mg_no_memory(&c);
    for (size_t i = 0; i < n && rc == 0; i++) {
        char *key = cp_key(ns[i], ids[i]);
        if (!key || json_object_set_new(ch.chosen, key, json_true()) != 0)
            rc = convo__mg_no_memory(&c);
        free(key);
    }
    *removed = 0;
    bool visible = false;
    if (rc == 0)
        rc = convo__mg_read_settled(&c, id, &t, &visible);
    if (rc == 0 && visible) /* a thread nobody can see has nothing to remove */
        rc = prune_thread(&c, &t.g, &ch, removed);
    convo__mg_thread_free(&t);
    json_decref(ch.chosen);
    convo__mg_call_end(&c);
    return rc;
}
