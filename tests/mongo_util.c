/* mongo_util.c — helpers of the MongoDB driver's own checks (mongo_util.h). */
#include "mongo_util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *base_url;
char database[40];
char prefix[40];
mongoc_client_t *raw;
convo_error err;

/* ---- helpers ---- */

int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The test server's URL with params appended (base_url may lack "/" and "?"). */
char *url_with(const char *params)
{
    size_t n = strlen(base_url) + strlen(params) + 4;
    char *out = malloc(n);
    ck_assert_ptr_nonnull(out);
    snprintf(out, n, "%s%s%s", base_url, strchr(base_url, '?') ? "&" : "?", params);
    return out;
}

convo_store *open_store(const char *params)
{
    char p[512];
    snprintf(p, sizeof p, "database=%s&prefix=%s%s%s", database, prefix, params ? "&" : "",
             params ? params : "");
    char *u = url_with(p);
    convo_store *s = NULL;
    int rc = convo_open(&s, u, &err);
    ck_assert_msg(rc == 0, "convo_open(%s): %d %s", u, rc, err.message);
    free(u);
    return s;
}

int open_rc(const char *params)
{
    char *u = url_with(params);
    convo_store *s = NULL;
    int rc = convo_open(&s, u, &err);
    convo_close(s);
    free(u);
    return rc;
}

mongoc_collection_t *coll(const char *suffix)
{
    char name[80];
    snprintf(name, sizeof name, "%s_%s", prefix, suffix);
    return mongoc_client_get_collection(raw, database, name);
}

/* One raw document (caller destroys), or NULL. */
bson_t *raw_find(const char *suffix, bson_t *filter)
{
    mongoc_collection_t *c = coll(suffix);
    mongoc_cursor_t *cur = mongoc_collection_find_with_opts(c, filter, NULL, NULL);
    const bson_t *doc;
    bson_t *out = mongoc_cursor_next(cur, &doc) ? bson_copy(doc) : NULL;
    bson_error_t e;
    ck_assert_msg(!mongoc_cursor_error(cur, &e), "find: %s", e.message);
    mongoc_cursor_destroy(cur);
    mongoc_collection_destroy(c);
    bson_destroy(filter);
    return out;
}

/* The server's profiler on the run's database: 2 records every command, 0 none. */
void profile_level(int level)
{
    bson_t *cmd = BCON_NEW("profile", BCON_INT32(level)), reply;
    bson_error_t e;
    ck_assert_msg(mongoc_client_command_simple(raw, database, cmd, NULL, &reply, &e), "profile: %s",
                  e.message);
    bson_destroy(&reply);
    bson_destroy(cmd);
}

int64_t raw_count(const char *suffix, bson_t *filter)
{
    mongoc_collection_t *c = coll(suffix);
    bson_error_t e;
    int64_t n = mongoc_collection_count_documents(c, filter, NULL, NULL, NULL, &e);
    ck_assert_msg(n >= 0, "count: %s", e.message);
    mongoc_collection_destroy(c);
    bson_destroy(filter);
    return n;
}

void raw_insert(const char *suffix, bson_t *doc)
{
    mongoc_collection_t *c = coll(suffix);
    bson_error_t e;
    ck_assert_msg(mongoc_collection_insert_one(c, doc, NULL, NULL, &e), "insert: %s", e.message);
    mongoc_collection_destroy(c);
    bson_destroy(doc);
}

void raw_update(const char *suffix, bson_t *filter, bson_t *update)
{
    mongoc_collection_t *c = coll(suffix);
    bson_error_t e;
    ck_assert_msg(mongoc_collection_update_one(c, filter, update, NULL, NULL, &e), "update: %s",
                  e.message);
    mongoc_collection_destroy(c);
    bson_destroy(filter);
    bson_destroy(update);
}

void raw_delete(const char *suffix, bson_t *filter)
{
    mongoc_collection_t *c = coll(suffix);
    bson_error_t e;
    ck_assert_msg(mongoc_collection_delete_many(c, filter, NULL, NULL, &e), "delete: %s",
                  e.message);
    mongoc_collection_destroy(c);
    bson_destroy(filter);
}

/* A generation as the driver makes one for id: the id's FNV-1a hash, then
 * bytes unique to this generation. */
void new_generation(const char *id, bson_oid_t *g)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)id; *p; p++)
        h = (h ^ *p) * 16777619u;
    bson_oid_init(g, NULL);
    for (int i = 0; i < 4; i++)
        g->bytes[i] = (uint8_t)(h >> (24 - 8 * i));
}

/* {g: {$gte, $lte}}: the documents of every generation of thread id. */
bson_t *of_thread(const char *id)
{
    bson_oid_t low, high;
    new_generation(id, &low);
    high = low;
    memset(low.bytes + 4, 0x00, 8);
    memset(high.bytes + 4, 0xff, 8);
    return BCON_NEW("g", "{", "$gte", BCON_OID(&low), "$lte", BCON_OID(&high), "}");
}

/* The generation named by a thread doc. */
void thread_generation(const char *id, bson_oid_t *g)
{
    bson_t *doc = raw_find("threads", BCON_NEW("_id", BCON_UTF8(id)));
    bson_iter_t it;
    ck_assert_ptr_nonnull(doc);
    ck_assert(bson_iter_init_find(&it, doc, "g") && BSON_ITER_HOLDS_OID(&it));
    bson_oid_copy(bson_iter_oid(&it), g);
    bson_destroy(doc);
}

/* Appends n test messages {"role":"user","w":w,"b":b,"i":i,"n":n}; returns first seq. */
int64_t append_batch(convo_store *s, const char *id, int w, int b, int n)
{
    char *msgs[16];
    ck_assert_int_le(n, 16);
    for (int i = 0; i < n; i++) {
        msgs[i] = malloc(96);
        snprintf(msgs[i], 96, "{\"role\":\"user\",\"w\":%d,\"b\":%d,\"i\":%d,\"n\":%d}", w, b,
                 i, n);
    }
    convo_append_result r;
    int rc = convo_append(s, id, (const char *const *)msgs, NULL, (size_t)n, NULL, &r, &err);
    for (int i = 0; i < n; i++)
        free(msgs[i]);
    ck_assert_msg(rc == 0, "append to %s: %d %s", id, rc, err.message);
    return r.first_seq;
}

/* The thread's length, or -1 when it does not exist. */
int64_t length_of(convo_store *s, const char *id)
{
    convo_history *h;
    int rc = convo_load(s, id, NULL, &h, &err);
    if (rc == CONVO_ENOTFOUND)
        return -1;
    ck_assert_msg(rc == 0, "load %s: %d %s", id, rc, err.message);
    int64_t n = convo_history_length(h);
    convo_history_free(h);
    return n;
}

int listed(convo_store *s, const char *id)
{
    convo_thread_page *p;
    const char *after = NULL;
    char *next = NULL;
    int found = 0;
    do {
        ck_assert_int_eq(convo_thread_list(s, after, 50, &p, &err), 0);
        for (size_t i = 0; i < convo_thread_page_count(p); i++)
            found |= strcmp(convo_thread_page_id(p, i), id) == 0;
        free(next);
        next = convo_thread_page_next(p) ? strdup(convo_thread_page_next(p)) : NULL;
        after = next;
        convo_thread_page_free(p);
    } while (next);
    return found;
}

json_t *extra_of(convo_store *s, const char *id)
{
    convo_history *h;
    ck_assert_int_eq(convo_load(s, id, NULL, &h, &err), 0);
    json_t *e = json_loads(convo_history_extra(h), 0, NULL);
    convo_history_free(h);
    ck_assert_ptr_nonnull(e);
    return e;
}

/* Seq dense from 0, every batch whole and in order, no batch twice; returns the
 * length, or -1 for a missing thread. Messages must come from append_batch. */
int64_t verify_thread(convo_store *s, const char *id)
{
    convo_history *h;
    int rc = convo_load(s, id, NULL, &h, &err);
    if (rc == CONVO_ENOTFOUND)
        return -1;
    ck_assert_msg(rc == 0, "load %s: %d %s", id, rc, err.message);
    size_t n = convo_history_count(h);
    ck_assert_int_eq(convo_history_length(h), (int64_t)n);
    json_t *seen = json_object();
    for (size_t i = 0; i < n;) {
        json_t *m = json_loads(convo_history_message(h, i, NULL), 0, NULL);
        int w = (int)json_integer_value(json_object_get(m, "w"));
        int b = (int)json_integer_value(json_object_get(m, "b"));
        int cnt = (int)json_integer_value(json_object_get(m, "n"));
        ck_assert_msg(json_integer_value(json_object_get(m, "i")) == 0,
                      "%s: seq %zu starts inside a batch", id, i);
        json_decref(m);
        char key[48];
        snprintf(key, sizeof key, "%d:%d", w, b);
        ck_assert_msg(!json_object_get(seen, key), "%s: batch %s stored twice", id, key);
        json_object_set_new(seen, key, json_true());
        for (int j = 0; j < cnt; j++, i++) {
            ck_assert_msg(i < n, "%s: batch %s cut short", id, key);
            ck_assert_int_eq(convo_history_seq(h, i), (int64_t)i);
            m = json_loads(convo_history_message(h, i, NULL), 0, NULL);
            ck_assert_msg(json_integer_value(json_object_get(m, "w")) == w &&
                              json_integer_value(json_object_get(m, "b")) == b &&
                              json_integer_value(json_object_get(m, "i")) == j,
                          "%s: seq %zu breaks batch %s", id, i, key);
            json_decref(m);
        }
    }
    json_decref(seen);
    convo_history_free(h);
    return (int64_t)n;
}

/* Every thread doc's batches form one chain from 0 with at most a fence on top:
 * walked down by slot as the driver reads them, a batch whose messages start at
 * or above where those of the batches above it start was replaced by a
 * rewrite; every other one reaches that point. */
void verify_raw_chains(void)
{
    mongoc_collection_t *threads = coll("threads"), *batches = coll("batches");
    bson_t empty = BSON_INITIALIZER;
    mongoc_cursor_t *cur = mongoc_collection_find_with_opts(threads, &empty, NULL, NULL);
    const bson_t *t;
    while (mongoc_cursor_next(cur, &t)) {
        bson_iter_t it;
        if (bson_iter_init_find(&it, t, "forking"))
            continue;
        ck_assert(bson_iter_init_find(&it, t, "g"));
        bson_t *f = BCON_NEW("g", BCON_OID(bson_iter_oid(&it)));
        bson_t *o = BCON_NEW("sort", "{", "s", BCON_INT32(-1), "}", "projection", "{", "m",
                             BCON_INT32(0), "}");
        mongoc_cursor_t *bc = mongoc_collection_find_with_opts(batches, f, o, NULL);
        const bson_t *b;
        int64_t lim = INT64_MAX, slot = INT64_MAX, want = INT64_MIN; /* INT64_MIN: no pb */
        bool top = true;
        while (mongoc_cursor_next(bc, &b)) {
            bson_iter_t s, e, n, fence, pb;
            ck_assert(bson_iter_init_find(&s, b, "s") && bson_iter_init_find(&e, b, "e") &&
                      bson_iter_init_find(&n, b, "n"));
            int64_t end = bson_iter_as_int64(&e), start = end - bson_iter_as_int64(&n);
            int64_t below = bson_iter_init_find(&pb, b, "pb") ? bson_iter_as_int64(&pb) : INT64_MIN;
            bool fenced = bson_iter_init_find(&fence, b, "f");
            ck_assert_msg(!fenced || top, "a batch above a fence");
            ck_assert_int_le(start, bson_iter_as_int64(&s)); /* a slot is never below its seq */
            ck_assert_int_lt(bson_iter_as_int64(&s), slot);
            slot = bson_iter_as_int64(&s);
            if (top) {
                lim = end;
                if (start >= lim) /* an empty top names the batch below it */
                    want = below;
            }
            top = false;
            if (start >= lim && !(fenced && start == lim))
                continue; /* replaced */
            ck_assert_msg(end >= lim, "a gap below seq %lld", (long long)lim);
            /* pb names the batch holding the message below (a load checks it) */
            ck_assert_msg(want == INT64_MIN || want == slot, "pb names slot %lld, the batch "
                          "below is at %lld", (long long)want, (long long)slot);
            lim = start;
            want = below;
        }
        ck_assert_msg(lim == 0 || lim == INT64_MAX, "the chain stops at seq %lld", (long long)lim);
        mongoc_cursor_destroy(bc);
        bson_destroy(f);
        bson_destroy(o);
    }
    mongoc_cursor_destroy(cur);
    mongoc_collection_destroy(threads);
    mongoc_collection_destroy(batches);
}

/* Every listed checkpoint of a thread comes whole: its channel's value is there. */
void verify_checkpoints(convo_store *s, const char *id)
{
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    convo_checkpoint_set *set = NULL;
    o.thread_id = id;
    ck_assert_msg(convo_checkpoint_list(s, &o, &set, &err) == 0, "list: %s", err.message);
    for (size_t i = 0; i < convo_checkpoint_set_count(set); i++) {
        const convo_checkpoint *cp = convo_checkpoint_set_get(set, i);
        const char *version;
        convo_blob v;
        ck_assert_int_eq(convo_checkpoint_channel_count(cp), 1);
        convo_checkpoint_channel(cp, 0, &version, &v);
        ck_assert_msg(v.type && v.len == strlen(version) + 2 &&
                          memcmp((const char *)v.bytes + 1, version, v.len - 2) == 0,
                      "%s: checkpoint %s lost its value", id, convo_checkpoint_id(cp));
    }
    convo_checkpoint_set_free(set);
}

void setup(void)
{
    static unsigned counter;
    snprintf(prefix, sizeof prefix, "p%d_%u", (int)getpid(), counter++);
    char *u = strdup(base_url);
    char *q = strchr(u, '?');
    if (q)
        *q = '\0'; /* convo's parameters are not libmongoc's */
    raw = mongoc_client_new(u);
    ck_assert_ptr_nonnull(raw);
    free(u);
}

void teardown(void)
{
    mongoc_client_destroy(raw);
    raw = NULL;
}
void assert_field(const bson_t *doc, const char *path, bson_type_t type)
{
    bson_iter_t it, found;
    ck_assert(bson_iter_init(&it, doc));
    ck_assert_msg(bson_iter_find_descendant(&it, path, &found), "no field %s", path);
    ck_assert_msg(bson_iter_type(&found) == type, "%s has type %d, want %d", path,
                  (int)bson_iter_type(&found), (int)type);
}

/* The index named name of collection suffix, or NULL. */
bson_t *index_named(const char *suffix, const char *name)
{
    mongoc_collection_t *c = coll(suffix);
    mongoc_cursor_t *cur = mongoc_collection_find_indexes_with_opts(c, NULL);
    const bson_t *doc;
    bson_t *out = NULL;
    while (!out && mongoc_cursor_next(cur, &doc)) {
        bson_iter_t it;
        if (bson_iter_init_find(&it, doc, "name") && strcmp(bson_iter_utf8(&it, NULL), name) == 0)
            out = bson_copy(doc);
    }
    mongoc_cursor_destroy(cur);
    mongoc_collection_destroy(c);
    return out;
}

char *big_message(size_t size)
{
    char *m = malloc(size + 1);
    ck_assert_ptr_nonnull(m);
    memset(m, 'a', size);
    memcpy(m, "{\"role\":\"user\",\"p\":\"", 20);
    memcpy(m + size - 2, "\"}", 2);
    m[size] = '\0';
    return m;
}

/* Whether the server is the wire-protocol stand-in (tests/mongo-server). */
bool standin(void)
{
    bson_t *cmd = BCON_NEW("buildInfo", BCON_INT32(1)), reply;
    bson_iter_t it;
    bool yes = mongoc_client_command_simple(raw, "admin", cmd, NULL, &reply, NULL) &&
               bson_iter_init_find(&it, &reply, "version") && BSON_ITER_HOLDS_UTF8(&it) &&
               strstr(bson_iter_utf8(&it, NULL), "convo-standin");
    bson_destroy(&reply);
    bson_destroy(cmd);
    return yes;
}

void put_checkpoint(convo_store *s, const char *thread, const char *id, const char *value)
{
    convo_blob v = {"json", value, strlen(value)};
    convo_channel_in ch[] = {{"a", value, &v}};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = thread;
    cp.checkpoint_id = id;
    cp.metadata_json = "{\"step\":1}";
    cp.body = (convo_blob){"json", "{}", 2};
    cp.channels = ch;
    cp.nchannels = 1;
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put: %s", err.message);
}

int64_t thread_docs(const char *suffix, const char *id)
{
    return raw_count(suffix, of_thread(id));
}

void forge_thread(const char *id, const bson_oid_t *g, bool live, bool forking,
                         int64_t created)
{
    bson_t *doc = BCON_NEW("_id", BCON_UTF8(id), "g", BCON_OID(g), "live", BCON_BOOL(live), "v",
                           BCON_INT64(0), "extra", "{", "}");
    if (forking)
        BCON_APPEND(doc, "forking", BCON_BOOL(true), "c", BCON_INT64(created));
    raw_insert("threads", doc);
}

void forge_batch(const bson_oid_t *g, int64_t s, int n, int w)
{
    bson_t *doc = BCON_NEW("g", BCON_OID(g), "s", BCON_INT64(s), "e",
                           BCON_INT64(s + n), "n", BCON_INT64(n), "k", BCON_INT64(s), "at",
                           BCON_INT64(now_ms() * 1000));
    bson_t arr, item;
    BSON_APPEND_ARRAY_BEGIN(doc, "m", &arr);
    for (int i = 0; i < n; i++) {
        char key[16], text[96];
        snprintf(key, sizeof key, "%d", i);
        snprintf(text, sizeof text, "{\"role\":\"user\",\"w\":%d,\"b\":%lld,\"i\":%d,\"n\":%d}", w,
                 (long long)s, i, n);
        BSON_APPEND_DOCUMENT_BEGIN(&arr, key, &item);
        BSON_APPEND_UTF8(&item, "r", "user");
        BSON_APPEND_BINARY(&item, "b", BSON_SUBTYPE_BINARY, (const uint8_t *)text,
                           (uint32_t)strlen(text));
        bson_append_document_end(&arr, &item);
    }
    bson_append_array_end(doc, &arr);
    raw_insert("batches", doc);
}

void forge_fence(const bson_oid_t *g, int64_t at)
{
    raw_insert("batches", BCON_NEW("g", BCON_OID(g), "s", BCON_INT64(at), "e", BCON_INT64(at), "n",
                                   BCON_INT64(0), "k", BCON_INT64(at), "f", BCON_BOOL(true)));
}

int64_t generation_batches(const bson_oid_t *g)
{
    return raw_count("batches", BCON_NEW("g", BCON_OID(g)));
}


/* A put with n messages {"role":"user","w":w,"b":b,"i":i,"n":n} (as append_batch
 * makes them) at expected, and checkpoint id with channel "a" at version id
 * holding "\"id\"" (as verify_checkpoints expects), log_length expected + n. */
int put_log(convo_store *s, const char *thread, const char *id, int w, int b, int n,
                   int64_t expected, const char *meta, convo_error *e)
{
    char *msgs[16], value[600];
    ck_assert_int_le(n, 16);
    for (int i = 0; i < n; i++) {
        msgs[i] = malloc(96);
        snprintf(msgs[i], 96, "{\"role\":\"user\",\"w\":%d,\"b\":%d,\"i\":%d,\"n\":%d}", w, b,
                 i, n);
    }
    snprintf(value, sizeof value, "\"%s\"", id);
    convo_blob v = {"json", value, strlen(value)};
    convo_channel_in ch[] = {{"a", id, &v}};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = thread;
    cp.checkpoint_id = id;
    cp.metadata_json = meta;
    cp.body = (convo_blob){"json", "{}", 2};
    cp.channels = ch;
    cp.nchannels = 1;
    cp.messages = (const char *const *)msgs;
    cp.nmessages = (size_t)n;
    cp.expected_length = expected;
    cp.log_length = expected + n;
    int rc = convo_checkpoint_put(s, &cp, e);
    for (int i = 0; i < n; i++)
        free(msgs[i]);
    return rc;
}

/* Batches of the thread's generation still carrying a checkpoint (0 without a
 * thread doc). */
int64_t unsettled(const char *thread)
{
    bson_t *doc = raw_find("threads", BCON_NEW("_id", BCON_UTF8(thread)));
    bson_iter_t it;
    if (!doc)
        return 0;
    ck_assert(bson_iter_init_find(&it, doc, "g") && BSON_ITER_HOLDS_OID(&it));
    /* carrying cp or marked u: settling removes both */
    int64_t n = raw_count("batches", BCON_NEW("g", BCON_OID(bson_iter_oid(&it)), "$or", "[", "{",
                                              "cp", "{", "$exists", BCON_BOOL(true), "}", "}", "{",
                                              "u", "{", "$exists", BCON_BOOL(true), "}", "}",
                                              "]"));
    bson_destroy(doc);
    return n;
}

/* Every checkpoint of a thread whose log_length is not 0 (a put with messages by
 * put_log) ends at the last message of its own batch: its id is "w<w>-b<b>".
 * Returns how many there are. */
int verify_log_lengths(convo_store *s, const char *id)
{
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    convo_checkpoint_set *set = NULL;
    convo_history *h;
    o.thread_id = id;
    ck_assert_msg(convo_checkpoint_list(s, &o, &set, &err) == 0, "list: %s", err.message);
    int rc = convo_load(s, id, NULL, &h, &err), checked = 0;
    ck_assert(rc == 0 || (rc == CONVO_ENOTFOUND && convo_checkpoint_set_count(set) == 0));
    for (size_t i = 0; rc == 0 && i < convo_checkpoint_set_count(set); i++) {
        const convo_checkpoint *cp = convo_checkpoint_set_get(set, i);
        int64_t ll = convo_checkpoint_log_length(cp);
        int w, b;
        if (ll == 0)
            continue;
        checked++;
        ck_assert_msg(ll <= convo_history_length(h), "%s: checkpoint %s beyond the log", id,
                      convo_checkpoint_id(cp));
        json_t *m = json_loads(convo_history_message(h, (size_t)ll - 1, NULL), 0, NULL);
        ck_assert_int_eq(sscanf(convo_checkpoint_id(cp), "w%d-b%d", &w, &b), 2);
        ck_assert_msg(json_integer_value(json_object_get(m, "w")) == w &&
                          json_integer_value(json_object_get(m, "b")) == b &&
                          json_integer_value(json_object_get(m, "i")) ==
                              json_integer_value(json_object_get(m, "n")) - 1,
                      "%s: checkpoint %s without its messages", id, convo_checkpoint_id(cp));
        json_decref(m);
    }
    if (rc == 0)
        convo_history_free(h);
    convo_checkpoint_set_free(set);
    return checked;
}
