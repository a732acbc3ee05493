/* list.c — the MongoDB driver: convo_thread_list_ex, one aggregate per page on
 * the thread docs, walked in index order (see "Thread index" in docs/mongo.md):
 * the filter on a declared key and the position after the cursor are index
 * bounds, the top batch of each row comes from one $lookup. */
#include "mongo_int.h"

typedef struct list_run {
    call *c;
    const convo_thread_list_opts *o;
    json_t *where;
    const char *time; /* "ua", "ca", or NULL in id order */
    int dir;          /* 1 ascending (time, _id), -1 descending */
    char *hint;       /* the index the page walks */
    bool at_pos;      /* continue after (pos_time, pos_id) */
    int64_t pos_time;
    char *pos_id;
    convo_thread_page *p;
    size_t rows;
} list_run;

/* The value a query can look up for a where value: a scalar, or an array's
 * first scalar (containment of an array is containment of each element). */
static json_t *lookup_value(json_t *v)
{
    if (json_is_array(v))
        v = json_array_size(v) ? json_array_get(v, 0) : NULL;
    return v && (json_is_string(v) || json_is_number(v) || json_is_boolean(v)) ? v : NULL;
}

static bool declared(const convo_backend *b, const char *key)
{
    for (char **k = b->index_keys; k && *k; k++)
        if (strcmp(*k, key) == 0)
            return true;
    return false;
}

/* The index of the order: a declared key's own when where names one with a
 * value an index can look up, else the store-wide one. */
static int choose_index(list_run *r)
{
    static const char *const whats[] = {"recent", "created", "id"};
    static const char *const plain[] = {"convo_recent_v6", "convo_created_v6", "_id_"};
    int which = r->o->order == CONVO_ORDER_RECENT ? 0 : r->o->order == CONVO_ORDER_CREATED ? 1 : 2;
    const char *k;
    json_t *v;
    if (r->where) {
        json_object_foreach(r->where, k, v) {
            if (!declared(r->c->b, k) || !lookup_value(v))
                continue;
            char *ek = convo__mg_key_escape(k);
            size_t n = ek ? strlen(ek) + 32 : 0;
            if (ek && (r->hint = malloc(n)))
                snprintf(r->hint, n, "convo_x_%s_%s", ek, whats[which]);
            free(ek);
            return r->hint ? 0 : convo__mg_no_memory(r->c);
        }
    }
    r->hint = strdup(plain[which]);
    return r->hint ? 0 : convo__mg_no_memory(r->c);
}

/* extra.<escaped key>: value for each key of where an index or a query can
 * compare: a superset of the containment, which each row is checked against. */
static int where_conditions(list_run *r, bson_t *filter)
{
    const char *k;
    json_t *v;
    int rc = 0;
    if (!r->where)
        return 0;
    json_object_foreach(r->where, k, v) {
        json_t *look = lookup_value(v);
        if (!look)
            continue;
        char *ek = convo__mg_key_escape(k);
        char *path = ek ? convo__mg_join("extra.", ek) : NULL;
        rc = path ? convo__mg_put_json(r->c, filter, path, look, 1) : convo__mg_no_memory(r->c);
        free(ek);
        free(path);
        if (rc != 0)
            break;
    }
    return rc;
}

/* The position bound: after (pos_time, pos_id) in the walk's direction; the
 * first page of a time order starts at the first thread doc that has the time
 * (placeholders have none, so the index bounds leave them out). */
static void position_conditions(const list_run *r, bson_t *filter)
{
    const char *strict = r->dir < 0 ? "$lt" : "$gt", *loose = r->dir < 0 ? "$lte" : "$gte";
    if (!r->time) {
        if (r->at_pos)
            BCON_APPEND(filter, "_id", "{", strict, BCON_UTF8(r->pos_id), "}");
        BCON_APPEND(filter, "ca", "{", "$exists", BCON_BOOL(true), "}");
        return;
    }
    if (!r->at_pos) {
        BCON_APPEND(filter, r->time, "{", "$gte", BCON_INT64(0), "}");
        return;
    }
    BCON_APPEND(filter, r->time, "{", loose, BCON_INT64(r->pos_time), "}");
    BCON_APPEND(filter, "$or", "[", "{", r->time, "{", strict, BCON_INT64(r->pos_time), "}", "}",
                "{", "_id", "{", strict, BCON_UTF8(r->pos_id), "}", "}", "]");
}

/* [{$match}, {$sort}, {$limit: need}, {$project}?, {$lookup: the top batch}]. */
static int build_pipeline(list_run *r, int64_t need, bson_t *pipeline)
{
    bson_t stages = BSON_INITIALIZER, match = BSON_INITIALIZER, stage, sort;
    int rc = where_conditions(r, &match);
    position_conditions(r, &match);
    BSON_APPEND_DOCUMENT_BEGIN(&stages, "0", &stage);
    BSON_APPEND_DOCUMENT(&stage, "$match", &match);
    bson_append_document_end(&stages, &stage);
    BSON_APPEND_DOCUMENT_BEGIN(&stages, "1", &stage);
    BSON_APPEND_DOCUMENT_BEGIN(&stage, "$sort", &sort);
    if (r->time)
        BSON_APPEND_INT32(&sort, r->time, r->dir);
    BSON_APPEND_INT32(&sort, "_id", r->dir);
    bson_append_document_end(&stage, &sort);
    bson_append_document_end(&stages, &stage);
    BCON_APPEND(&stages, "2", "{", "$limit", BCON_INT64(need), "}");
    const char *next = "3";
    if (!r->o->with_extra && !r->where) {
        BCON_APPEND(&stages, "3", "{", "$project", "{", "extra", BCON_INT32(0), "}", "}");
        next = "4";
    }
    bson_t *top = BCON_NEW("0", "{", "$sort", "{", "s", BCON_INT32(-1), "}", "}", "1", "{",
                           "$limit", BCON_INT32(1), "}");
    if (r->o->with_last_message)
        BCON_APPEND(top, "2", "{", "$project", "{", "cp", BCON_INT32(0), "dc", BCON_INT32(0), "}",
                    "}");
    else
        BCON_APPEND(top, "2", "{", "$project", "{", "m", BCON_INT32(0), "cp", BCON_INT32(0), "dc",
                    BCON_INT32(0), "}", "}");
    convo__mg_lookup_batches(r->c, &stages, next, NULL, top, "top");
    bson_destroy(top);
    bson_init(pipeline);
    BSON_APPEND_ARRAY(pipeline, "pipeline", &stages);
    bson_destroy(&stages);
    bson_destroy(&match);
    return rc;
}

/* The bytes of the last message of a batch document's m. */
static const uint8_t *last_of_batch(const bson_t *batch, uint32_t *len)
{
    bson_iter_t it, arr, item;
    const uint8_t *bytes = NULL;
    if (!bson_iter_init_find(&it, batch, "m") || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &arr))
        return NULL;
    while (bson_iter_next(&arr)) {
        bson_subtype_t sub;
        bytes = NULL;
        if (BSON_ITER_HOLDS_DOCUMENT(&arr) && bson_iter_recurse(&arr, &item) &&
            bson_iter_find(&item, "b") && BSON_ITER_HOLDS_BINARY(&item))
            bson_iter_binary(&item, &sub, len, &bytes);
    }
    return bytes;
}

/* One row; the last message read from the top batch, or by a load when that
 * batch holds none (a rewrite that only removed). */
static int add_row(list_run *r, const char *id, const thread_doc *t, const bson_t *top_doc,
                   const batch_head *top, const char *extra)
{
    int64_t length = top->found ? top->e : 0;
    const char *last = NULL;
    uint32_t last_len = 0;
    convo_history *h = NULL;
    int rc = 0;
    if (r->o->with_last_message && length > 0 && top->n > 0) {
        last = (const char *)last_of_batch(top_doc, &last_len);
    } else if (r->o->with_last_message && length > 0) {
        convo_load_opts lo = CONVO_LOAD_OPTS_INIT;
        lo.tail = 1;
        lo.with_extra = 0;
        rc = convo__mg_load(r->c->b, id, &lo, &h, r->c->err);
        size_t n = 0;
        if (rc == 0 && convo_history_count(h) == 1) {
            last = convo_history_message(h, 0, &n);
            last_len = (uint32_t)n;
        }
        if (rc == CONVO_ENOTFOUND) { /* deleted since: not listed */
            convo__error_clear(r->c->err);
            return 0;
        }
    }
    if (rc == 0 && convo__thread_page_add_row(r->p, id, strlen(id), t->ca, t->ua, length, extra,
                                              extra ? strlen(extra) : 0, last, last_len) != 0)
        rc = convo__mg_no_memory(r->c);
    if (rc == 0)
        r->rows++;
    convo_history_free(h);
    return rc;
}

/* A thread doc of the walk: moves the position past it, and adds it when it is
 * a thread (not a fork placeholder, expired, deleted, an append placeholder)
 * whose extra contains where. */
static int take_doc(list_run *r, const bson_t *doc, int64_t now)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, "_id") || !BSON_ITER_HOLDS_UTF8(&it))
        return 0;
    const char *id = bson_iter_utf8(&it, NULL);
    thread_doc t;
    batch_head top = {false, false, 0, 0, 0, 0, NO_BELOW, 0};
    bson_t top_doc = BSON_INITIALIZER;
    char *extra = NULL;
    memset(&t, 0, sizeof t);
    bson_init(&t.extra);
    int rc = convo__mg_parse_thread(r->c, doc, &t);
    free(r->pos_id);
    r->pos_id = strdup(id);
    r->pos_time = r->time ? (strcmp(r->time, "ua") == 0 ? t.ua : t.ca) : 0;
    r->at_pos = true;
    if (rc == 0 && !r->pos_id)
        rc = convo__mg_no_memory(r->c);
    if (convo__mg_first_of(doc, "top", &top_doc))
        convo__mg_parse_head(&top_doc, &top);
    bool visible = !t.forking && !convo__mg_expired(&t, now) && !(top.found && top.fence) &&
                   (top.found || t.live);
    if (rc == 0 && visible && (r->where || r->o->with_extra))
        rc = convo__mg_extra_to_json(r->c, &t.extra, &extra);
    if (rc == 0 && visible && r->where)
        visible = convo__json_contains(extra, strlen(extra), r->where);
    if (rc == 0 && visible && r->rows <= r->o->limit) {
        rc = add_row(r, id, &t, &top_doc, &top, r->o->with_extra ? extra : NULL);
        if (rc == 0 && top.found && convo__mg_index_behind(&t, &top))
            quietly(r->c, convo__mg_index_after_batch, id, &t.g, top.s, top.e, top.at);
    }
    free(extra);
    convo__mg_thread_free(&t);
    return rc;
}

/* One aggregate of up to need thread docs from the position; *more when it
 * returned that many (the rows may still be short of the page). */
static int walk_once(list_run *r, int64_t need, bool *more)
{
    bson_t pipeline;
    int rc = build_pipeline(r, need, &pipeline);
    bson_t *opts = BCON_NEW("hint", BCON_UTF8(r->hint));
    mongoc_cursor_t *cur = mongoc_collection_aggregate(r->c->threads, MONGOC_QUERY_NONE,
                                                       &pipeline, opts, r->c->b->primary);
    const bson_t *doc;
    int64_t seen = 0, now = convo__mg_now_ms();
    bson_error_t e;
    while (rc == 0 && mongoc_cursor_next(cur, &doc)) {
        seen++;
        rc = take_doc(r, doc, now);
    }
    if (rc == 0 && mongoc_cursor_error(cur, &e))
        rc = convo__mg_fail(r->c, &e, "listing threads");
    *more = seen == need;
    mongoc_cursor_destroy(cur);
    bson_destroy(opts);
    bson_destroy(&pipeline);
    return rc;
}

static int list_pages(list_run *r, const convo_thread_cursor *after)
{
    int rc = choose_index(r);
    if (rc == 0 && after) {
        r->at_pos = true;
        r->pos_time = after->time;
        if (!(r->pos_id = strdup(after->id)))
            rc = convo__mg_no_memory(r->c);
    }
    bool more = true;
    while (rc == 0 && more && r->rows <= r->o->limit)
        rc = walk_once(r, (int64_t)(r->o->limit + 1 - r->rows), &more);
    return rc;
}

int convo__mg_thread_list_ex(convo_backend *b, const convo_thread_list_opts *opts, void *where,
                             const convo_thread_cursor *after, convo_thread_page **out,
                             convo_error *err)
{
    call c;
    list_run r;
    memset(&r, 0, sizeof r);
    r.c = &c;
    r.o = opts;
    r.where = where;
    r.time = opts->order == CONVO_ORDER_RECENT ? "ua" : opts->order == CONVO_ORDER_CREATED ? "ca"
                                                                                        : NULL;
    r.dir = (opts->order == CONVO_ORDER_ID) != (opts->reverse != 0) ? 1 : -1;
    if (!(r.p = convo__thread_page_new()))
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    convo__mg_call_begin(&c, b, err);
    int rc = list_pages(&r, after);
    convo__mg_call_end(&c);
    free(r.hint);
    free(r.pos_id);
    if (rc != 0) {
        convo_thread_page_free(r.p);
        return rc;
    }
    *out = r.p;
    return 0;
}
