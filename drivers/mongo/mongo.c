/* mongo.c — the MongoDB driver (mongo-c-driver). A thread is one document in
 * <prefix>_threads; its messages live in <prefix>_batches, one document per
 * append. Unique indexes, not transactions, make every call atomic: docs/mongo.md
 * walks through the layout and through every point where a process may die. */
#include "config.h"
#include <convo/driver.h>
#include <ctype.h>
#include <jansson.h>
#include <mongoc/mongoc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define DOC_LIMIT ((size_t)16 * 1024 * 1024) /* MongoDB's maxBsonObjectSize */
#define SCHEMA_VERSION 3
#define ATTEMPTS 1000                         /* tries after losing a race to another writer */
#define LOAD_ATTEMPTS 8                       /* tries when a delete cut a load short */
#define TTL_MARGIN_MS ((int64_t)60000)        /* batches outlive their thread doc by this */
#define FORK_STALE_MS ((int64_t)600000)       /* a fork placeholder this old was abandoned */
#define MAX_DEPTH 95                          /* MongoDB nests documents at most 100 deep */
#define COPY_FLUSH_BYTES ((size_t)8 * 1024 * 1024)
#define GC_ROUNDS 16

/* Collections whose documents belong to one generation of a thread ({t, g, ...}). */
enum { BATCHES, CHECKPOINTS, VALUES, WRITES, KINDS };
static const char *const kind_suffix[KINDS] = {"_batches", "_checkpoints", "_values", "_writes"};
#define PIECE_LIMIT (DOC_LIMIT - 4096) /* room for a batch document's other fields */

struct convo_backend {
    mongoc_client_pool_t *pool;
    mongoc_uri_t *uri;
    mongoc_read_prefs_t *primary;
    char *database;
    char *threads_name, *batches_name, *meta_name;
    char *kinds_name[KINDS]; /* the collections holding per-generation documents */
    int64_t ttl_ms; /* 0: threads never expire */
    convo_limits limits;
};

/* One driver call: a pooled client and the two collections. */
typedef struct call {
    convo_backend *b;
    mongoc_client_t *client;
    mongoc_collection_t *threads, *batches;
    mongoc_collection_t *kinds[KINDS]; /* made on first use; [BATCHES] is batches */
    mongoc_collection_t *meta;         /* made on first use */
    convo_error *err;
} call;

/* The fields of a <prefix>_threads document. */
typedef struct thread_doc {
    bool found, live, dying, forking;
    bson_oid_t g;      /* generation: every batch of this incarnation carries it */
    int64_t v;         /* bumped by every extra write and by a delete */
    int64_t created_ms; /* when a fork placeholder was made */
    int64_t exp_ms, bexp_ms; /* expiry, and a lower bound of the batches' expiry */
    bson_t extra;      /* as stored (escaped keys); empty when not read */
} thread_doc;

/* The head of a <prefix>_batches document: messages [s, e); a fence has s == e. */
typedef struct batch_head {
    bool found, fence;
    int64_t s, e;
} batch_head;

static pthread_once_t init_once = PTHREAD_ONCE_INIT;

/* libmongoc prints its own diagnostics (DEBUG lines about refused connections,
 * failed handshakes) on stderr; convo reports errors through convo_error, so only
 * critical ones get through. */
static void quiet_log(mongoc_log_level_t level, const char *domain, const char *message,
                      void *ctx)
{
    if (level == MONGOC_LOG_LEVEL_CRITICAL)
        mongoc_log_default_handler(level, domain, message, ctx);
}

/* libmongoc keeps its performance counters in /dev/shm/mongoc-PID, which it
 * removes only at a clean exit: every killed process that linked libconvo (a
 * SQLite-only one too: Debian's libmongoc initialises itself when it is
 * loaded) left one behind. The name goes as soon as it exists; the mapping,
 * which is all the counters use, stays. (Only mongoc-stat reads the file.) */
static void forget_counters_file(void)
{
    char name[32];
    snprintf(name, sizeof name, "/mongoc-%u", (unsigned)getpid());
    shm_unlink(name);
}

/* The loader runs libmongoc's own constructor (it is a dependency) first. */
__attribute__((constructor)) static void forget_counters_file_at_load(void)
{
    forget_counters_file();
}

static void init_mongoc(void)
{
    mongoc_init(); /* a no-op when libmongoc initialised itself at load */
    forget_counters_file();
    mongoc_log_set_handler(quiet_log, NULL);
}

static int64_t now_ms(void)
{
    return convo__now_micros() / 1000;
}

/* ---- errors ---- */

static int map_code(const bson_error_t *e)
{
    switch (e->domain) {
    case MONGOC_ERROR_SERVER_SELECTION:
        return strstr(e->message, "timeout calling") ? CONVO_ETIMEOUT : CONVO_EIO;
    case MONGOC_ERROR_CLIENT:
        return e->code == MONGOC_ERROR_CLIENT_TOO_BIG ? CONVO_ETOOLARGE : CONVO_EIO;
    case MONGOC_ERROR_BSON:
        return CONVO_ERROR;
    case MONGOC_ERROR_SERVER:
    case MONGOC_ERROR_WRITE_CONCERN:
    case MONGOC_ERROR_COMMAND:
    case MONGOC_ERROR_QUERY:
    case MONGOC_ERROR_COLLECTION:
        switch (e->code) {
        case 50:  /* MaxTimeMSExpired */
        case 64:  /* WriteConcernFailed: wtimeout */
        case 262: /* ExceededTimeLimit */
            return CONVO_ETIMEOUT;
        case 10334: /* BSONObjectTooLarge */
        case 17419: /* document too large after an update */
            return CONVO_ETOOLARGE;
        default:
            return CONVO_EIO;
        }
    default:
        return CONVO_EIO;
    }
}

static int fail(call *c, const bson_error_t *e, const char *what)
{
    char code[16];
    snprintf(code, sizeof code, "%u", e->code); /* the core masks passwords in the message */
    return convo__error(c->err, map_code(e), code, "MongoDB: %s failed: %s", what, e->message);
}

static int corrupt(call *c, const char *what)
{
    return convo__error(c->err, CONVO_ECORRUPT, NULL, "MongoDB: %s", what);
}

static int no_memory(call *c)
{
    return convo__error(c->err, CONVO_ENOMEM, NULL, "out of memory");
}

static int contention(call *c)
{
    return convo__error(c->err, CONVO_EIO, NULL,
                        "MongoDB: gave up after %d attempts: too many concurrent writers",
                        ATTEMPTS);
}

static bool is_duplicate(const bson_error_t *e)
{
    return (e->domain == MONGOC_ERROR_SERVER || e->domain == MONGOC_ERROR_COLLECTION ||
            e->domain == MONGOC_ERROR_COMMAND) &&
           (e->code == 11000 || e->code == 11001);
}

/* A short pause after a few lost races, so contending writers spread out. */
static void backoff(int attempt)
{
    if (attempt < 3)
        return;
    long us = 50L * (attempt < 40 ? attempt : 40) + convo__now_micros() % 500;
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

/* ---- calls and small queries ---- */

static void call_begin(call *c, convo_backend *b, convo_error *err)
{
    c->b = b;
    c->err = err;
    c->client = mongoc_client_pool_pop(b->pool);
    c->threads = mongoc_client_get_collection(c->client, b->database, b->threads_name);
    c->batches = mongoc_client_get_collection(c->client, b->database, b->batches_name);
    memset(c->kinds, 0, sizeof c->kinds);
    c->kinds[BATCHES] = c->batches;
    c->meta = NULL;
}

/* The collection of one kind of per-generation document. */
static mongoc_collection_t *kind(call *c, int k)
{
    if (!c->kinds[k])
        c->kinds[k] = mongoc_client_get_collection(c->client, c->b->database, c->b->kinds_name[k]);
    return c->kinds[k];
}

static void call_end(call *c)
{
    mongoc_collection_destroy(c->threads);
    for (int k = 0; k < KINDS; k++)
        mongoc_collection_destroy(c->kinds[k]);
    mongoc_collection_destroy(c->meta);
    mongoc_client_pool_push(c->b->pool, c->client);
}

/* The first document matching filter into *out (always initialized; destroy it). */
static int find_one(call *c, mongoc_collection_t *coll, const bson_t *filter, const bson_t *opts,
                    bson_t *out, bool *found, const char *what)
{
    mongoc_cursor_t *cur = mongoc_collection_find_with_opts(coll, filter, opts, c->b->primary);
    const bson_t *doc;
    *found = mongoc_cursor_next(cur, &doc);
    if (*found)
        bson_copy_to(doc, out);
    else
        bson_init(out);
    bson_error_t e;
    int rc = 0;
    if (mongoc_cursor_error(cur, &e))
        rc = fail(c, &e, what);
    mongoc_cursor_destroy(cur);
    return rc;
}

static int insert_doc(call *c, mongoc_collection_t *coll, const bson_t *doc, bool *dup,
                      const char *what)
{
    bson_error_t e;
    *dup = false;
    if (mongoc_collection_insert_one(coll, doc, NULL, NULL, &e))
        return 0;
    if (is_duplicate(&e)) {
        *dup = true;
        return 0;
    }
    return fail(c, &e, what);
}

static int64_t reply_count(const bson_t *reply, const char *field)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, reply, field) && BSON_ITER_HOLDS_NUMBER(&it))
        return bson_iter_as_int64(&it);
    return 0;
}

/* Updates one document; *matched (may be NULL) gets how many matched. */
static int update_one(call *c, mongoc_collection_t *coll, const bson_t *filter,
                      const bson_t *update, int64_t *matched, const char *what)
{
    bson_t reply;
    bson_error_t e;
    bool ok = mongoc_collection_update_one(coll, filter, update, NULL, &reply, &e);
    if (ok && matched)
        *matched = reply_count(&reply, "matchedCount");
    bson_destroy(&reply);
    return ok ? 0 : fail(c, &e, what);
}

static int update_many(call *c, mongoc_collection_t *coll, const bson_t *filter,
                       const bson_t *update, const char *what)
{
    bson_error_t e;
    bool ok = mongoc_collection_update_many(coll, filter, update, NULL, NULL, &e);
    return ok ? 0 : fail(c, &e, what);
}

static int delete_docs(call *c, mongoc_collection_t *coll, const bson_t *filter, bool many,
                       int64_t *deleted, const char *what)
{
    bson_t reply;
    bson_error_t e;
    bool ok = many ? mongoc_collection_delete_many(coll, filter, NULL, &reply, &e)
                   : mongoc_collection_delete_one(coll, filter, NULL, &reply, &e);
    if (ok && deleted)
        *deleted = reply_count(&reply, "deletedCount");
    bson_destroy(&reply);
    return ok ? 0 : fail(c, &e, what);
}

static int64_t get_int(const bson_t *doc, const char *key, int64_t def)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_NUMBER(&it))
        return bson_iter_as_int64(&it);
    return def;
}

static bool get_bool(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_BOOL(&it) && bson_iter_bool(&it);
}

static int64_t get_date(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_DATE_TIME(&it))
        return bson_iter_date_time(&it);
    return 0;
}

/* {g: g}: every document of one generation of a thread. */
static bson_t *generation_filter(const bson_oid_t *g)
{
    return BCON_NEW("g", BCON_OID(g));
}

/* Writes the FNV-1a hash of thread id into the first four bytes of g. */
static void put_id_hash(const char *id, bson_oid_t *g)
{
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)id; *p; p++)
        h = (h ^ *p) * 16777619u;
    for (int i = 0; i < 4; i++)
        g->bytes[i] = (uint8_t)(h >> (24 - 8 * i));
}

/* A new generation of thread id: its id's hash, then 8 random bytes. The prefix
 * lets a delete find the leftovers of the id's dead generations by a range on g
 * (documents carry g, not the id); the random part makes g unique. */
static void new_generation(const char *id, bson_oid_t *g)
{
    uint8_t random[8];
    bson_oid_init(g, NULL); /* its process-unique bytes, should getentropy fail */
    if (getentropy(random, sizeof random) == 0)
        memcpy(g->bytes + 4, random, sizeof random);
    put_id_hash(id, g);
}

/* The range of g every generation of thread id falls in. */
static void generation_range(const char *id, bson_oid_t *low, bson_oid_t *high)
{
    memset(low->bytes, 0x00, sizeof low->bytes);
    memset(high->bytes, 0xff, sizeof high->bytes);
    put_id_hash(id, low);
    put_id_hash(id, high);
}

/* ---- extra: JSON <-> BSON with reversible key escaping ---- */

/* '%', '.' and '$' become %25, %2E, %24; the empty key becomes a lone "%". */
static char *key_escape(const char *k)
{
    size_t n = strlen(k);
    if (n == 0)
        return strdup("%");
    char *out = malloc(3 * n + 1), *o = out;
    if (!out)
        return NULL;
    for (; *k; k++) {
        unsigned char ch = (unsigned char)*k;
        if (ch == '%' || ch == '.' || ch == '$')
            o += sprintf(o, "%%%02X", ch);
        else
            *o++ = (char)ch;
    }
    *o = '\0';
    return out;
}

static int hex_digit(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'A' && ch <= 'F')
        return ch - 'A' + 10;
    return -1;
}

/* The inverse of key_escape; NULL for a key key_escape cannot have made. */
static char *key_unescape(const char *k)
{
    if (strcmp(k, "%") == 0)
        return strdup("");
    char *out = malloc(strlen(k) + 1), *o = out;
    if (!out)
        return NULL;
    for (; *k; k++) {
        if (*k != '%') {
            *o++ = *k;
            continue;
        }
        int hi = hex_digit((unsigned char)k[1]), lo = hi < 0 ? -1 : hex_digit((unsigned char)k[2]);
        if (lo < 0 || (hi == 0 && lo == 0)) {
            free(out);
            return NULL;
        }
        *o++ = (char)(hi * 16 + lo);
        k += 2;
    }
    *o = '\0';
    return out;
}

static int put_json(call *c, bson_t *doc, const char *key, json_t *v, int depth);

static int put_container(call *c, bson_t *doc, const char *key, json_t *v, int depth)
{
    bson_t child;
    bool array = json_is_array(v);
    if (!(array ? bson_append_array_begin(doc, key, -1, &child)
                : bson_append_document_begin(doc, key, -1, &child)))
        return convo__error(c->err, CONVO_ETOOLARGE, NULL, "extra is too large for MongoDB");
    int rc = 0;
    if (array) {
        for (size_t i = 0; i < json_array_size(v) && rc == 0; i++) {
            char buf[16];
            const char *k;
            bson_uint32_to_string((uint32_t)i, &k, buf, sizeof buf);
            rc = put_json(c, &child, k, json_array_get(v, i), depth + 1);
        }
    } else {
        const char *k;
        json_t *val;
        json_object_foreach(v, k, val) {
            char *ek = key_escape(k);
            rc = ek ? put_json(c, &child, ek, val, depth + 1) : no_memory(c);
            free(ek);
            if (rc != 0)
                break;
        }
    }
    bool ok = array ? bson_append_array_end(doc, &child) : bson_append_document_end(doc, &child);
    if (rc == 0 && !ok)
        rc = convo__error(c->err, CONVO_ETOOLARGE, NULL, "extra is too large for MongoDB");
    return rc;
}

/* Appends JSON value v under key (already escaped): integers stay int64, reals
 * double, null stays null; object keys at every depth are escaped. */
static int put_json(call *c, bson_t *doc, const char *key, json_t *v, int depth)
{
    if (depth > MAX_DEPTH)
        return convo__error(c->err, CONVO_EINVAL, NULL,
                            "extra nests deeper than MongoDB allows (%d levels)", MAX_DEPTH);
    bool ok;
    switch (json_typeof(v)) {
    case JSON_OBJECT:
    case JSON_ARRAY:
        return put_container(c, doc, key, v, depth);
    case JSON_STRING:
        ok = bson_append_utf8(doc, key, -1, json_string_value(v), (int)json_string_length(v));
        break;
    case JSON_INTEGER:
        ok = bson_append_int64(doc, key, -1, json_integer_value(v));
        break;
    case JSON_REAL:
        ok = bson_append_double(doc, key, -1, json_real_value(v));
        break;
    case JSON_TRUE:
    case JSON_FALSE:
        ok = bson_append_bool(doc, key, -1, json_is_true(v));
        break;
    default:
        ok = bson_append_null(doc, key, -1);
        break;
    }
    return ok ? 0 : convo__error(c->err, CONVO_ETOOLARGE, NULL, "extra is too large for MongoDB");
}

static json_t *value_to_json(const bson_iter_t *it, int depth);

static json_t *container_to_json(bson_iter_t *child, bool array, int depth)
{
    json_t *out = array ? json_array() : json_object();
    while (out && bson_iter_next(child)) {
        json_t *v = value_to_json(child, depth + 1);
        int bad = !v;
        if (!bad && array) {
            bad = json_array_append_new(out, v);
        } else if (!bad) {
            char *k = key_unescape(bson_iter_key(child));
            bad = !k || json_object_set_new(out, k, v);
            v = NULL; /* json_object_set_new took it, even on failure */
            free(k);
        }
        if (bad) {
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

static json_t *value_to_json(const bson_iter_t *it, int depth)
{
    uint32_t len;
    bson_iter_t child;
    if (depth > 2 * MAX_DEPTH)
        return NULL;
    switch (bson_iter_type(it)) {
    case BSON_TYPE_UTF8: {
        const char *s = bson_iter_utf8(it, &len);
        return json_stringn(s, len);
    }
    case BSON_TYPE_INT32:
        return json_integer(bson_iter_int32(it));
    case BSON_TYPE_INT64:
        return json_integer(bson_iter_int64(it));
    case BSON_TYPE_DOUBLE:
        return json_real(bson_iter_double(it));
    case BSON_TYPE_BOOL:
        return json_boolean(bson_iter_bool(it));
    case BSON_TYPE_NULL:
        return json_null();
    case BSON_TYPE_DOCUMENT:
    case BSON_TYPE_ARRAY:
        if (!bson_iter_recurse(it, &child))
            return NULL;
        return container_to_json(&child, bson_iter_type(it) == BSON_TYPE_ARRAY, depth);
    default:
        return NULL;
    }
}

/* The stored extra document as compact JSON text (caller frees). */
static int extra_to_json(call *c, const bson_t *extra, char **out)
{
    bson_iter_t it;
    json_t *obj = bson_iter_init(&it, extra) ? container_to_json(&it, false, 0) : NULL;
    if (!obj)
        return corrupt(c, "stored extra could not be decoded");
    *out = json_dumps(obj, JSON_COMPACT);
    json_decref(obj);
    return *out ? 0 : no_memory(c);
}

/* ---- thread documents ---- */

static int parse_thread(call *c, const bson_t *doc, thread_doc *t)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, "g") || !BSON_ITER_HOLDS_OID(&it))
        return corrupt(c, "thread document without a generation");
    bson_oid_copy(bson_iter_oid(&it), &t->g);
    t->live = get_bool(doc, "live");
    t->dying = get_bool(doc, "dying");
    t->forking = get_bool(doc, "forking");
    t->v = get_int(doc, "v", 0);
    t->created_ms = get_int(doc, "c", 0);
    t->exp_ms = get_date(doc, "exp");
    t->bexp_ms = get_date(doc, "bexp");
    if (bson_iter_init_find(&it, doc, "extra") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        uint32_t len;
        const uint8_t *data;
        bson_t view;
        bson_iter_document(&it, &len, &data);
        if (!bson_init_static(&view, data, len))
            return corrupt(c, "stored extra is not a document");
        bson_destroy(&t->extra);
        bson_copy_to(&view, &t->extra);
    }
    return 0;
}

static int read_thread(call *c, const char *id, bool with_extra, thread_doc *t)
{
    memset(t, 0, sizeof *t);
    bson_init(&t->extra);
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(id));
    bson_t *opts = with_extra ? BCON_NEW("limit", BCON_INT64(1))
                              : BCON_NEW("limit", BCON_INT64(1), "projection", "{", "extra",
                                         BCON_INT32(0), "}");
    bson_t doc;
    int rc = find_one(c, c->threads, filter, opts, &doc, &t->found, "reading a thread");
    if (rc == 0 && t->found)
        rc = parse_thread(c, &doc, t);
    bson_destroy(&doc);
    bson_destroy(filter);
    bson_destroy(opts);
    return rc;
}

static void thread_free(thread_doc *t)
{
    bson_destroy(&t->extra);
}

static bool expired(const thread_doc *t, int64_t now)
{
    return t->exp_ms != 0 && t->exp_ms <= now;
}

/* A new thread document; false when extra makes it too large. */
static bool build_thread(const convo_backend *b, const char *id, const bson_oid_t *g, bool live,
                         bool forking, int64_t v, const bson_t *extra, int64_t now, bson_t *doc)
{
    bson_t empty = BSON_INITIALIZER;
    bson_init(doc);
    BSON_APPEND_UTF8(doc, "_id", id);
    BSON_APPEND_OID(doc, "g", g);
    BSON_APPEND_BOOL(doc, "live", live);
    if (forking) {
        BSON_APPEND_BOOL(doc, "forking", true);
        BSON_APPEND_INT64(doc, "c", now);
    }
    BSON_APPEND_INT64(doc, "v", v);
    if (b->ttl_ms) {
        BSON_APPEND_DATE_TIME(doc, "exp", now + b->ttl_ms);
        BSON_APPEND_DATE_TIME(doc, "bexp", now + 2 * b->ttl_ms + TTL_MARGIN_MS);
    }
    return BSON_APPEND_DOCUMENT(doc, "extra", extra ? extra : &empty) && doc->len <= DOC_LIMIT;
}

/* ---- batches ---- */

static void parse_head(const bson_t *doc, batch_head *h)
{
    h->found = true;
    h->s = get_int(doc, "s", 0);
    h->e = get_int(doc, "e", h->s);
    h->fence = get_bool(doc, "f");
}

/* The batch with the highest s of generation g: its end is the thread's length. */
static int top_batch(call *c, const bson_oid_t *g, batch_head *h)
{
    bson_t *filter = generation_filter(g);
    bson_t *opts = BCON_NEW("sort", "{", "s", BCON_INT32(-1), "}", "limit", BCON_INT64(1),
                            "projection", "{", "m", BCON_INT32(0), "cp", BCON_INT32(0), "}");
    bson_t doc;
    memset(h, 0, sizeof *h);
    bool found;
    int rc = find_one(c, c->batches, filter, opts, &doc, &found, "reading a thread's length");
    if (rc == 0 && found)
        parse_head(&doc, h);
    bson_destroy(&doc);
    bson_destroy(filter);
    bson_destroy(opts);
    return rc;
}

/* A fence ends generation g at length: no batch can be inserted there any more. */
static int insert_fence(call *c, const bson_oid_t *g, int64_t length, bool *dup)
{
    bson_t *doc = BCON_NEW("g", BCON_OID(g), "s", BCON_INT64(length), "e",
                           BCON_INT64(length), "n", BCON_INT64(0), "f", BCON_BOOL(true));
    if (c->b->ttl_ms)
        BSON_APPEND_DATE_TIME(doc, "exp", now_ms() + 3 * c->b->ttl_ms + TTL_MARGIN_MS);
    int rc = insert_doc(c, c->batches, doc, dup, "fencing a thread");
    bson_destroy(doc);
    return rc;
}

/* Removes fenced generation g: the thread doc first (readers then see no thread),
 * then its messages and checkpoints, then the fence. */
static int retire(call *c, const char *id, const bson_oid_t *g)
{
    bson_t *thread = BCON_NEW("_id", BCON_UTF8(id), "g", BCON_OID(g));
    bson_t *messages = BCON_NEW("g", BCON_OID(g), "f", "{", "$exists", BCON_BOOL(false), "}");
    bson_t *all = generation_filter(g);
    int rc = delete_docs(c, c->threads, thread, false, NULL, "deleting a thread");
    if (rc == 0)
        rc = delete_docs(c, c->batches, messages, true, NULL, "deleting messages");
    for (int k = CHECKPOINTS; k < KINDS && rc == 0; k++)
        rc = delete_docs(c, kind(c, k), all, true, NULL, "deleting checkpoints");
    if (rc == 0)
        rc = delete_docs(c, c->batches, all, true, NULL, "deleting messages");
    bson_destroy(thread);
    bson_destroy(messages);
    bson_destroy(all);
    return rc;
}

/* Deletes every document of generation g (fork placeholders, dead generations). */
static int delete_generation(call *c, const bson_oid_t *g, const char *what)
{
    bson_t *all = generation_filter(g);
    int rc = 0;
    for (int k = 0; k < KINDS && rc == 0; k++)
        rc = delete_docs(c, kind(c, k), all, true, NULL, what);
    bson_destroy(all);
    return rc;
}

/* Sets the dying mark: extra writes in flight miss their filter on v, and list
 * no longer trusts live without a look at the top batch. */
static int mark_dying(call *c, const char *id, const bson_oid_t *g, bool only_first,
                      int64_t *matched)
{
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(id), "g", BCON_OID(g));
    if (only_first)
        BCON_APPEND(filter, "dying", "{", "$ne", BCON_BOOL(true), "}");
    bson_t *update = BCON_NEW("$set", "{", "dying", BCON_BOOL(true), "}", "$inc", "{", "v",
                              BCON_INT64(1), "}");
    int rc = update_one(c, c->threads, filter, update, matched, "deleting a thread");
    bson_destroy(filter);
    bson_destroy(update);
    return rc;
}

/* Completes the delete of generation g: marks it dying (unless the caller did),
 * fences it at its end, then retires it. */
static int finish_delete(call *c, const char *id, const bson_oid_t *g, bool marked)
{
    int rc = marked ? 0 : mark_dying(c, id, g, false, NULL);
    for (int attempt = 0; rc == 0 && attempt < ATTEMPTS; attempt++) {
        batch_head top;
        bool dup = false;
        rc = top_batch(c, g, &top);
        if (rc == 0 && !(top.found && top.fence))
            rc = insert_fence(c, g, top.found ? top.e : 0, &dup);
        if (rc == 0 && !dup)
            return retire(c, id, g);
    }
    return rc ? rc : contention(c);
}

/* Cancels a fork still copying into id: whoever deletes its placeholder wins, and
 * the fork's commit then matches nothing. */
static int abort_fork(call *c, const char *id, const bson_oid_t *g)
{
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(id), "g", BCON_OID(g), "forking", BCON_BOOL(true));
    int64_t deleted = 0;
    int rc = delete_docs(c, c->threads, filter, false, &deleted, "cancelling a fork");
    bson_destroy(filter);
    if (rc == 0 && deleted == 1) {
        bson_t *batches = generation_filter(g);
        rc = delete_docs(c, c->batches, batches, true, NULL, "cancelling a fork");
        bson_destroy(batches);
    }
    return rc;
}

/* Runs cleanup with its errors kept out of the caller's convo_error: the call
 * already did what it was asked to. */
#define quietly(c, fn, ...)                                                                  \
    do {                                                                                     \
        convo_error *saved_ = (c)->err, scratch_;                                            \
        convo__error_clear(&scratch_);                                                       \
        (c)->err = &scratch_;                                                                \
        (void)fn((c), __VA_ARGS__);                                                          \
        (c)->err = saved_;                                                                   \
    } while (0)

/* Whether a thread doc names generation g (any thread's: ids may share a hash). */
static int generation_named(call *c, const bson_oid_t *g, bool *named)
{
    bson_t *filter = BCON_NEW("g", BCON_OID(g)), doc;
    bson_t *opts = BCON_NEW("limit", BCON_INT64(1), "projection", "{", "_id", BCON_INT32(1), "}");
    int rc = find_one(c, c->threads, filter, opts, &doc, named, "looking for leftovers");
    bson_destroy(&doc);
    bson_destroy(filter);
    bson_destroy(opts);
    return rc;
}

/* Deletes the documents of kind k of dead generations of id (left by a process
 * killed during a delete, or by a write racing one), found by the id's hash
 * prefix of g. A generation is dead once no thread doc names it: its doc was
 * written before any of its documents and a g is never named again, so reading
 * a document first and the thread docs second cannot mistake a newborn for the
 * dead. */
static int collect_garbage_in(call *c, const char *id, int k)
{
    bson_oid_t live[GC_ROUNDS], low, high;
    size_t nlive = 0;
    int rc = 0;
    generation_range(id, &low, &high);
    for (int round = 0; round < GC_ROUNDS && rc == 0; round++) {
        bson_t filter = BSON_INITIALIZER, g, nin, doc;
        BSON_APPEND_DOCUMENT_BEGIN(&filter, "g", &g);
        BSON_APPEND_OID(&g, "$gte", &low);
        BSON_APPEND_OID(&g, "$lte", &high);
        BSON_APPEND_ARRAY_BEGIN(&g, "$nin", &nin);
        for (size_t i = 0; i < nlive; i++) {
            char buf[16];
            const char *key;
            bson_uint32_to_string((uint32_t)i, &key, buf, sizeof buf);
            BSON_APPEND_OID(&nin, key, &live[i]);
        }
        bson_append_array_end(&g, &nin);
        bson_append_document_end(&filter, &g);
        bson_t *opts =
            BCON_NEW("limit", BCON_INT64(1), "projection", "{", "g", BCON_INT32(1), "}");
        bool found, named = false;
        bson_iter_t it;
        rc = find_one(c, kind(c, k), &filter, opts, &doc, &found, "looking for leftovers");
        bson_destroy(&filter);
        bson_destroy(opts);
        if (rc || !found || !bson_iter_init_find(&it, &doc, "g") || !BSON_ITER_HOLDS_OID(&it)) {
            bson_destroy(&doc);
            break;
        }
        bson_oid_t candidate;
        bson_oid_copy(bson_iter_oid(&it), &candidate);
        bson_destroy(&doc);
        rc = generation_named(c, &candidate, &named);
        if (rc == 0 && named)
            bson_oid_copy(&candidate, &live[nlive++]);
        else if (rc == 0)
            rc = delete_generation(c, &candidate, "deleting leftovers");
    }
    return rc;
}

static int collect_garbage(call *c, const char *id)
{
    int rc = 0;
    for (int k = 0; k < KINDS && rc == 0; k++)
        rc = collect_garbage_in(c, id, k);
    return rc;
}

/* With ttl: pushes the expiry of g's batches well past the thread doc's, before
 * the thread doc's own expiry moves, so messages never expire first. */
static int refresh_batches(call *c, const thread_doc *t, int64_t now, bool *refreshed)
{
    const convo_backend *b = c->b;
    *refreshed = false;
    if (!b->ttl_ms || t->bexp_ms >= now + b->ttl_ms + TTL_MARGIN_MS)
        return 0;
    bson_t *filter = BCON_NEW("g", BCON_OID(&t->g), "exp", "{", "$lt",
                              BCON_DATE_TIME(now + 2 * b->ttl_ms + TTL_MARGIN_MS), "}");
    bson_t *update = BCON_NEW("$set", "{", "exp",
                              BCON_DATE_TIME(now + 3 * b->ttl_ms + TTL_MARGIN_MS), "}");
    int rc = 0;
    for (int k = 0; k < KINDS && rc == 0; k++)
        rc = update_many(c, kind(c, k), filter, update, "extending expiry");
    bson_destroy(filter);
    bson_destroy(update);
    *refreshed = rc == 0;
    return rc;
}

/* Adds the $max of exp (and bexp after a refresh) to a thread update. */
static void append_expiry(const convo_backend *b, bson_t *update, int64_t now, bool refreshed)
{
    if (!b->ttl_ms)
        return;
    bson_t max;
    BSON_APPEND_DOCUMENT_BEGIN(update, "$max", &max);
    BSON_APPEND_DATE_TIME(&max, "exp", now + b->ttl_ms);
    if (refreshed)
        BSON_APPEND_DATE_TIME(&max, "bexp", now + 2 * b->ttl_ms + TTL_MARGIN_MS);
    bson_append_document_end(update, &max);
}

/* Clears what stands in the way of a write to thread doc t (as read): an expired
 * or half-deleted incarnation is finished off, a fork still copying is cancelled
 * (*again: start over). A missing doc is made as an invisible placeholder when
 * create is set (appends; *created), else left to the caller (t->found false). */
static int clear_way(call *c, const char *id, bool create, thread_doc *t, bool *created,
                     bool *again)
{
    int64_t now = now_ms();
    int rc = 0;
    *created = false;
    if (!t->found && create) {
        bson_t doc;
        bool dup = false;
        new_generation(id, &t->g);
        build_thread(c->b, id, &t->g, false, false, 0, NULL, now, &doc);
        rc = insert_doc(c, c->threads, &doc, &dup, "creating a thread");
        bson_destroy(&doc);
        t->found = *created = rc == 0 && !dup;
        t->bexp_ms = c->b->ttl_ms ? now + 2 * c->b->ttl_ms + TTL_MARGIN_MS : 0;
        *again = dup;
    } else if (t->found && (expired(t, now) || t->dying)) {
        rc = finish_delete(c, id, &t->g, false);
        *again = true;
    } else if (t->found && t->forking) {
        rc = abort_fork(c, id, &t->g);
        *again = true;
    }
    return rc;
}

/* Reads the thread doc for a write and clears what stands in the way (clear_way). */
static int writable_thread(call *c, const char *id, bool with_extra, bool create, thread_doc *t,
                           bool *again)
{
    bool created;
    int rc = read_thread(c, id, with_extra, t);
    return rc ? rc : clear_way(c, id, create, t, &created, again);
}

/* ---- open and close ---- */

static int check_database(const char *db, convo_error *err)
{
    size_t n = strlen(db);
    if (n == 0 || n > 63 || strpbrk(db, "/\\. \"$*<>:|?"))
        return convo__error(err, CONVO_EINVAL, NULL,
                            "bad database name: 1..63 bytes without / \\ . space \" $ * < > : | ?");
    return 0;
}

static int check_prefix(const char *p, convo_error *err)
{
    size_t n = strlen(p);
    bool ok = n >= 1 && n <= 64 && p[0] != '.' && p[n - 1] != '.' && !strstr(p, "..") &&
              strncmp(p, "system", 6) != 0;
    for (const char *q = p; ok && *q; q++)
        ok = isalnum((unsigned char)*q) || *q == '_' || *q == '-' || *q == '.';
    if (!ok)
        return convo__error(err, CONVO_EINVAL, NULL,
                            "bad prefix: 1..64 of A-Z a-z 0-9 _ - . (no leading, trailing or "
                            "double dot, not system...)");
    return 0;
}

static bool is_integer(const char *s)
{
    if (*s == '-')
        s++;
    if (!*s)
        return false;
    for (; *s; s++)
        if (!isdigit((unsigned char)*s))
            return false;
    return true;
}

/* key in lower case into buf; false when it is too long to be an option. */
static bool lower_copy(const char *key, char *buf, size_t size)
{
    size_t n = strlen(key);
    if (n >= size)
        return false;
    for (size_t i = 0; i <= n; i++)
        buf[i] = (char)tolower((unsigned char)key[i]);
    return true;
}

/* libmongoc only warns about unknown options and ignores them: reject them here,
 * with values of the wrong type and with unacknowledged writes. */
static int check_option(const char *key, const char *value, convo_error *err)
{
    static const char *const others[] = {"authmechanism", "authmechanismproperties",
                                         "authsource", "compressors", "gssapiservicename",
                                         "readconcernlevel", "readpreferencetags", "w", NULL};
    char lower[64] = "";
    bool known = lower_copy(key, lower, sizeof lower);
    bool integer =
        known && (mongoc_uri_option_is_int32(lower) || mongoc_uri_option_is_int64(lower));
    bool boolean = known && mongoc_uri_option_is_bool(lower);
    known = known && (integer || boolean || mongoc_uri_option_is_utf8(lower));
    for (const char *const *o = others; !known && *o; o++)
        known = strcmp(*o, lower) == 0;
    if (!known)
        return convo__error(err, CONVO_EINVAL, NULL,
                            "unknown URL parameter '%s' for mongodb: (convo takes database, "
                            "prefix and ttl; the others go to libmongoc)", key);
    if (integer && !is_integer(value))
        return convo__error(err, CONVO_EINVAL, NULL, "URL parameter '%s' must be an integer", key);
    if (boolean && strcmp(value, "true") != 0 && strcmp(value, "false") != 0)
        return convo__error(err, CONVO_EINVAL, NULL, "URL parameter '%s' must be true or false",
                            key);
    if ((strcmp(lower, "w") == 0 && (strcmp(value, "0") == 0 || strcmp(value, "-1") == 0)) ||
        (strcmp(lower, "safe") == 0 && strcmp(value, "false") == 0))
        return convo__error(err, CONVO_EINVAL, NULL,
                            "convo needs acknowledged writes: %s=%s is not allowed", key, value);
    return 0;
}

static char *join(const char *a, const char *b)
{
    size_t n = strlen(a) + strlen(b) + 1;
    char *out = malloc(n);
    if (out)
        snprintf(out, n, "%s%s", a, b);
    return out;
}

/* Takes database, prefix and ttl out of the URL. */
static int take_convo_params(convo_backend *b, convo_url *url, convo_error *err)
{
    char *prefix = convo__url_take(url, "prefix");
    int64_t ttl_s = 0;
    int ttl_rc = convo__url_take_ttl(url, &ttl_s, err);
    b->ttl_ms = ttl_s * 1000;
    b->database = convo__url_take(url, "database");
    if (!b->database)
        b->database = strdup("convo");
    int rc = ttl_rc ? ttl_rc : b->database ? check_database(b->database, err) : CONVO_ENOMEM;
    if (rc == 0 && prefix)
        rc = check_prefix(prefix, err);
    const char *p = prefix ? prefix : "convo";
    if (rc == 0 && (!(b->threads_name = join(p, "_threads")) || !(b->meta_name = join(p, "_meta"))))
        rc = CONVO_ENOMEM;
    for (int k = 0; k < KINDS && rc == 0; k++)
        if (!(b->kinds_name[k] = join(p, kind_suffix[k])))
            rc = CONVO_ENOMEM;
    b->batches_name = b->kinds_name[BATCHES];
    free(prefix);
    return rc == CONVO_ENOMEM ? convo__error(err, rc, NULL, "out of memory") : rc;
}

/* Checks the parameters left for libmongoc (the core keeps their secrets,
 * *password options included, out of messages). */
static int check_client_params(convo_backend *b, const convo_url *url, convo_error *err)
{
    (void)b;
    for (size_t i = 0; i < url->nparams; i++) {
        int rc = check_option(url->params[i].key, url->params[i].value, err);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int create_indexes(call *c, mongoc_collection_t *coll, const bson_t *indexes)
{
    bson_t cmd = BSON_INITIALIZER;
    BSON_APPEND_UTF8(&cmd, "createIndexes", mongoc_collection_get_name(coll));
    BSON_APPEND_ARRAY(&cmd, "indexes", indexes);
    bson_error_t e;
    bool ok = mongoc_collection_write_command_with_opts(coll, &cmd, NULL, NULL, &e);
    bson_destroy(&cmd);
    return ok ? 0 : fail(c, &e, "creating indexes");
}

static int check_version(call *c, mongoc_collection_t *meta, const bson_t *filter,
                         int64_t *version)
{
    bson_t doc;
    bool found;
    int rc =
        find_one(c, meta, filter, NULL, &doc, &found, "connecting (reading the schema version)");
    *version = get_int(&doc, "version", 0);
    bson_destroy(&doc);
    if (rc == 0 && *version > SCHEMA_VERSION)
        rc = convo__error(c->err, CONVO_ENOTSUP, NULL,
                          "MongoDB: prefix was written by a newer convo (schema %lld > %d)",
                          (long long)*version, SCHEMA_VERSION);
    return rc;
}

/* {key: {g: 1, <fields>: 1}, name, unique?} for createIndexes. */
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
    if (strcmp(name, "convo_idempotency_v2") == 0)
        BCON_APPEND(&spec, "partialFilterExpression", "{", "k", "{", "$type", BCON_UTF8("string"),
                    "}", "}");
    else if (strcmp(name, "convo_pending_v3") == 0) /* batches carrying a checkpoint */
        BCON_APPEND(&spec, "partialFilterExpression", "{", "cp", "{", "$exists", BCON_BOOL(true),
                    "}", "}");
    bson_append_document_end(list, &spec);
}

/* The indexes of one collection (k == KINDS: the threads), plus the expiry index
 * with ttl. */
static int create_kind_indexes(call *c, mongoc_collection_t *coll, int k)
{
    static const char *const none[] = {NULL}, *const chain[] = {"s", NULL},
                             *const idem[] = {"k", NULL}, *const key[] = {"ns", "id", NULL},
                             *const order[] = {"o", NULL},
                             *const value[] = {"ns", "c", "v", NULL},
                             *const write[] = {"ns", "cp", "task", "idx", NULL};
    bson_t list = BSON_INITIALIZER;
    const char *next = "1";
    switch (k) {
    case BATCHES:
        index_spec(&list, "0", "convo_chain_v2", true, chain);
        index_spec(&list, "1", "convo_idempotency_v2", true, idem);
        index_spec(&list, "2", "convo_pending_v3", false, none);
        next = "3";
        break;
    case CHECKPOINTS:
        index_spec(&list, "0", "convo_checkpoint_v2", true, key);
        index_spec(&list, "1", "convo_checkpoint_order_v2", false, order);
        next = "2";
        break;
    case VALUES:
        index_spec(&list, "0", "convo_value_v2", true, value);
        break;
    case WRITES:
        index_spec(&list, "0", "convo_write_v2", true, write);
        break;
    default: /* the threads: which thread doc names a generation (leftovers) */
        index_spec(&list, "0", "convo_generation", false, none);
        break;
    }
    if (c->b->ttl_ms)
        BCON_APPEND(&list, next, "{", "key", "{", "exp", BCON_INT32(1), "}", "name",
                    BCON_UTF8("convo_expiry"), "expireAfterSeconds", BCON_INT32(0), "}");
    int rc = create_indexes(c, coll, &list);
    bson_destroy(&list);
    return rc;
}

static int create_all_indexes(call *c)
{
    int rc = create_kind_indexes(c, c->threads, KINDS);
    for (int k = 0; k < KINDS && rc == 0; k++)
        rc = create_kind_indexes(c, kind(c, k), k);
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
    mongoc_cursor_t *cur =
        mongoc_collection_aggregate(kind(c, k), MONGOC_QUERY_NONE, pipeline, opts, c->b->primary);
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
        rc = generation_named(c, &g, &named);
        if (rc == 0 && !named)
            rc = delete_generation(c, &g, "moving to layout 2");
    }
    if (rc == 0 && mongoc_cursor_error(cur, &e))
        rc = fail(c, &e, "moving to layout 2");
    mongoc_cursor_destroy(cur);
    bson_destroy(pipeline);
    bson_destroy(opts);
    return rc;
}

static int drop_index(call *c, mongoc_collection_t *coll, const char *name)
{
    bson_error_t e;
    if (mongoc_collection_drop_index_with_opts(coll, name, NULL, &e) ||
        e.code == 26 || e.code == 27) /* NamespaceNotFound, IndexNotFound: gone already */
        return 0;
    return fail(c, &e, "moving to layout 2");
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
        rc = update_many(c, kind(c, k), with_t, unset, "moving to layout 2");
    for (int k = 0; k < KINDS; k++)
        for (int i = 0; rc == 0 && old[k][i]; i++)
            rc = drop_index(c, kind(c, k), old[k][i]);
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

static mongoc_collection_t *meta_collection(call *c)
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
    int rc = find_one(c, kind(c, CHECKPOINTS), all, opts, &doc, &found, "moving to layout 3");
    int64_t highest = found ? get_int(&doc, "o", 0) : 0;
    bson_destroy(&doc);
    bson_destroy(all);
    bson_destroy(opts);
    bson_t *filter = BCON_NEW("_id", BCON_UTF8("order"));
    bson_t *update = BCON_NEW("$max", "{", "n", BCON_INT64(highest), "}");
    bson_t *upsert = BCON_NEW("upsert", BCON_BOOL(true));
    bson_error_t e;
    for (int attempt = 0; rc == 0 && attempt < 2; attempt++) {
        if (mongoc_collection_update_one(meta_collection(c), filter, update, upsert, NULL, &e))
            break;
        if (!is_duplicate(&e) || attempt == 1) /* a dup: another store made it first */
            rc = fail(c, &e, "moving to layout 3");
    }
    bson_destroy(filter);
    bson_destroy(update);
    bson_destroy(upsert);
    return rc;
}

/* Checks the stored schema version, creates the indexes (a no-op when they
 * exist), moves a layout 1 or 2 store up, and records the version. */
static int ensure_schema(call *c)
{
    mongoc_collection_t *meta =
        mongoc_client_get_collection(c->client, c->b->database, c->b->meta_name);
    bson_t *filter = BCON_NEW("_id", BCON_UTF8("schema"));
    bson_t *update = BCON_NEW("$max", "{", "version", BCON_INT32(SCHEMA_VERSION), "}");
    bson_t *opts = BCON_NEW("upsert", BCON_BOOL(true));
    bson_error_t e;
    int64_t version = 0;
    int rc = check_version(c, meta, filter, &version);
    if (rc == 0)
        rc = create_all_indexes(c);
    if (rc == 0 && version == 1)
        rc = upgrade_from_v1(c);
    if (rc == 0 && version >= 1 && version < 3)
        rc = upgrade_from_v2(c);
    /* two stores opening at once may race on the upsert: the loser's dup key is fine */
    if (rc == 0 && !mongoc_collection_update_one(meta, filter, update, opts, NULL, &e) &&
        !is_duplicate(&e))
        rc = fail(c, &e, "recording the schema version");
    bson_destroy(update);
    bson_destroy(opts);
    bson_destroy(filter);
    mongoc_collection_destroy(meta);
    return rc;
}

static void mongo_close(convo_backend *b)
{
    if (!b)
        return;
    if (b->pool)
        mongoc_client_pool_destroy(b->pool);
    mongoc_uri_destroy(b->uri);
    mongoc_read_prefs_destroy(b->primary);
    free(b->database);
    free(b->threads_name);
    free(b->meta_name);
    for (int k = 0; k < KINDS; k++)
        free(b->kinds_name[k]);
    free(b);
}

/* Short timeouts unless the URL asks otherwise: libmongoc waits 30 s for a server. */
static void set_defaults(mongoc_uri_t *uri)
{
    const bson_t *opts = mongoc_uri_get_options(uri);
    if (!bson_has_field(opts, MONGOC_URI_SERVERSELECTIONTIMEOUTMS))
        mongoc_uri_set_option_as_int32(uri, MONGOC_URI_SERVERSELECTIONTIMEOUTMS, 5000);
    if (!bson_has_field(opts, MONGOC_URI_CONNECTTIMEOUTMS))
        mongoc_uri_set_option_as_int32(uri, MONGOC_URI_CONNECTTIMEOUTMS, 5000);
    if (!mongoc_uri_get_appname(uri))
        mongoc_uri_set_appname(uri, "convo");
}

/* libmongoc wants "host/?opts"; convo also takes "host?opts", like its other URLs. */
static char *rebuild_for_mongoc(const convo_url *url)
{
    char *text = convo__url_rebuild(url);
    char *q = text ? strchr(text, '?') : NULL;
    char *hosts = text ? strstr(text, "://") : NULL;
    if (!q || !hosts || memchr(hosts + 3, '/', (size_t)(q - hosts - 3)))
        return text;
    size_t n = strlen(text);
    char *out = malloc(n + 2);
    if (out) {
        memcpy(out, text, (size_t)(q - text));
        out[q - text] = '/';
        memcpy(out + (q - text) + 1, q, n - (size_t)(q - text) + 1);
    }
    memset(text, 0, n);
    free(text);
    return out;
}

static int make_pool(convo_backend *b, convo_url *url, convo_error *err)
{
    char *text = rebuild_for_mongoc(url);
    if (!text)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    bson_error_t e;
    b->uri = mongoc_uri_new_with_error(text, &e);
    memset(text, 0, strlen(text)); /* it holds the password */
    free(text);
    if (!b->uri) {
        return convo__error(err, CONVO_EINVAL, NULL, "bad MongoDB URL %s: %s", url->redacted,
                            e.message);
    }
    set_defaults(b->uri);
    b->pool = mongoc_client_pool_new(b->uri);
    b->primary = mongoc_read_prefs_new(MONGOC_READ_PRIMARY);
    if (!b->pool || !b->primary)
        return convo__error(err, CONVO_EINVAL, NULL,
                            "MongoDB: cannot use %s (TLS or SRV support missing?)", url->redacted);
    mongoc_client_pool_set_error_api(b->pool, MONGOC_ERROR_API_VERSION_2);
    return 0;
}

static int mongo_open(convo_backend **out, convo_url *url, const convo_limits *limits,
                      convo_error *err)
{
    pthread_once(&init_once, init_mongoc);
    convo_backend *b = calloc(1, sizeof *b);
    if (!b)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    b->limits = *limits;
    int rc = take_convo_params(b, url, err);
    if (rc == 0)
        rc = check_client_params(b, url, err);
    if (rc == 0)
        rc = make_pool(b, url, err);
    if (rc == 0) {
        call c;
        call_begin(&c, b, err);
        rc = ensure_schema(&c);
        call_end(&c);
    }
    if (rc != 0) {
        mongo_close(b);
        return rc;
    }
    *out = b;
    return 0;
}

/* ---- append ---- */

/* Appends message i as {r: role, b: bytes} (+ a: created_at when it differs from
 * the batch's at) to the messages array; false when it grows past limit. */
static bool add_message(bson_t *arr, uint32_t i, const convo_message_in *msg, bool own_at,
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
static int build_messages(call *c, const convo_message_in *msgs, size_t n, bson_t *arr)
{
    bson_init(arr);
    for (size_t i = 0; i < n; i++)
        if (!add_message(arr, (uint32_t)i, &msgs[i], false, 0, DOC_LIMIT))
            return convo__error(c->err, CONVO_ETOOLARGE, NULL,
                                "batch is larger than a MongoDB document (16 MiB); split it");
    return 0;
}

static bool build_batch(const convo_backend *b, const bson_oid_t *g, int64_t s,
                        size_t n, const char *key, int64_t at, int64_t now, const bson_t *m,
                        bson_t *doc)
{
    bson_init(doc);
    BSON_APPEND_OID(doc, "g", g);
    BSON_APPEND_INT64(doc, "s", s);
    BSON_APPEND_INT64(doc, "e", s + (int64_t)n);
    BSON_APPEND_INT64(doc, "n", (int64_t)n);
    BSON_APPEND_INT64(doc, "at", at);
    if (key)
        BSON_APPEND_UTF8(doc, "k", key);
    if (b->ttl_ms)
        BSON_APPEND_DATE_TIME(doc, "exp", now + 3 * b->ttl_ms + TTL_MARGIN_MS);
    return BSON_APPEND_ARRAY(doc, "m", m) && doc->len <= DOC_LIMIT;
}

/* A stage {$lookup: {from: batches, let: {g: "$g"}, pipeline, as}}: batches of
 * the thread doc's generation. The join is the pipeline's first $match, an $expr
 * equality that MongoDB 4.4 answers from an index (no localField with a pipeline:
 * that is MongoDB 5.0's form), with the conditions of match, if any, beside it. */
static void lookup_batches(call *c, bson_t *stages, const char *pos, const bson_t *match,
                           const bson_t *rest, const char *as)
{
    bson_t stage, lookup, let, pipeline, first, cond, expr, eq;
    BSON_APPEND_DOCUMENT_BEGIN(stages, pos, &stage);
    BSON_APPEND_DOCUMENT_BEGIN(&stage, "$lookup", &lookup);
    BSON_APPEND_UTF8(&lookup, "from", c->b->batches_name);
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

/* The first document of array field name of doc, if any. */
static bool first_of(const bson_t *doc, const char *name, bson_t *out)
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
static int read_for_append(call *c, const char *id, const char *key, thread_doc *t,
                           batch_head *top, bool *replayed, convo_append_result *res)
{
    bson_t stages = BSON_INITIALIZER, *match = BCON_NEW("$match", "{", "_id", BCON_UTF8(id), "}");
    bson_t *project = BCON_NEW("$project", "{", "extra", BCON_INT32(0), "}");
    bson_t *highest = BCON_NEW("0", "{", "$sort", "{", "s", BCON_INT32(-1), "}", "}", "1", "{",
                               "$limit", BCON_INT32(1), "}", "2", "{", "$project", "{", "m",
                               BCON_INT32(0), "cp", BCON_INT32(0), "}", "}");
    BSON_APPEND_DOCUMENT(&stages, "0", match);
    BSON_APPEND_DOCUMENT(&stages, "1", project);
    lookup_batches(c, &stages, "2", NULL, highest, "top");
    if (key) { /* $type makes the partial index convo_idempotency_v2 usable */
        bson_t *cond = BCON_NEW("k", "{", "$eq", BCON_UTF8(key), "$type", BCON_UTF8("string"), "}");
        bson_t *keyed = BCON_NEW("0", "{", "$limit", BCON_INT32(1), "}", "1", "{", "$project",
                                 "{", "s", BCON_INT32(1), "n", BCON_INT32(1), "}", "}");
        lookup_batches(c, &stages, "3", cond, keyed, "kb");
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
        rc = parse_thread(c, doc, t);
        if (first_of(doc, "top", &item))
            parse_head(&item, top);
        if (first_of(doc, "kb", &item)) {
            *replayed = true;
            res->first_seq = get_int(&item, "s", 0);
            res->count = (size_t)get_int(&item, "n", 0);
            res->replayed = 1;
        }
    } else if (mongoc_cursor_error(cur, &e)) {
        rc = fail(c, &e, "reading a thread");
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
    append_expiry(c->b, &update, now, refreshed);
    int rc = update_one(c, c->threads, filter, &update, matched, "updating a thread");
    bson_destroy(&update);
    bson_destroy(filter);
    return rc;
}

/* With ttl, the batches' expiry and then the thread doc's move before a batch
 * lands, so a stored batch never expires first; *again when the incarnation was
 * retired meanwhile. */
static int extend_expiry(call *c, const char *id, const thread_doc *t, int64_t now, bool *again)
{
    bool refreshed = false;
    int64_t matched = 1;
    if (!c->b->ttl_ms)
        return 0;
    int rc = refresh_batches(c, t, now, &refreshed);
    if (rc == 0)
        rc = touch_thread(c, id, &t->g, now, refreshed, &matched);
    *again = rc == 0 && matched == 0;
    return rc;
}

/* Marks a thread doc live; *matched (may be NULL) 0: a delete removed it meanwhile. */
static int mark_live(call *c, const char *id, const bson_oid_t *g, int64_t *matched)
{
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(id), "g", BCON_OID(g));
    bson_t *update = BCON_NEW("$set", "{", "live", BCON_BOOL(true), "}");
    int rc = update_one(c, c->threads, filter, update, matched, "updating a thread");
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
    int64_t now = now_ms();
    int rc = read_for_append(c, id, o->idempotency_key, &t, &top, &replayed, res);
    if (rc == 0) /* a new placeholder has no batch yet: length 0, no key to find */
        rc = clear_way(c, id, true, &t, &created, again);
    if (rc || *again || replayed)
        goto out;
    if (top.found && top.fence) { /* a delete is under way: finish it, then start over */
        rc = finish_delete(c, id, &t.g, false);
        *again = true;
        goto out;
    }
    int64_t length = top.found ? top.e : 0;
    if (o->expected_length >= 0 && o->expected_length != length) {
        rc = convo__error(c->err, CONVO_ECONFLICT, NULL, "thread has %lld messages, expected %lld",
                          (long long)length, (long long)o->expected_length);
        goto out;
    }
    if ((rc = extend_expiry(c, id, &t, now, again)) != 0 || *again)
        goto out;
    bson_t doc;
    build_batch(c->b, &t.g, length, n, o->idempotency_key, convo__now_micros(), now, m, &doc);
    rc = insert_doc(c, c->batches, &doc, &dup, "appending");
    bson_destroy(&doc);
    if (rc || (*again = dup))
        goto out;
    if (!t.live) /* the first batch made the thread visible; the flag only saves probes */
        quietly(c, mark_live, id, &t.g, NULL);
    res->first_seq = length;
    res->count = n;
    res->replayed = 0;
out:
    thread_free(&t);
    return rc;
}

static int mongo_append(convo_backend *b, const char *id, const convo_message_in *msgs, size_t n,
                        const convo_append_opts *opts, convo_append_result *res,
                        convo_error *err)
{
    call c;
    bson_t m, probe;
    bson_oid_t zero;
    call_begin(&c, b, err);
    int rc = build_messages(&c, msgs, n, &m);
    bson_oid_init_from_string(&zero, "000000000000000000000000");
    if (rc == 0) { /* the same size whatever s and times it gets */
        if (!build_batch(b, &zero, 0, n, opts->idempotency_key, 0, 0, &m, &probe))
            rc = convo__error(err, CONVO_ETOOLARGE, NULL,
                              "batch is larger than a MongoDB document (16 MiB); split it");
        bson_destroy(&probe);
    }
    for (int attempt = 0; rc == 0; attempt++) {
        bool again = false;
        if (attempt == ATTEMPTS) {
            rc = contention(&c);
            break;
        }
        backoff(attempt);
        rc = append_attempt(&c, id, &m, n, opts, res, &again);
        if (!again)
            break;
    }
    bson_destroy(&m);
    call_end(&c);
    return rc;
}

/* ---- load ---- */

/* Batch documents collected while walking down a thread, highest first. */
typedef struct walk {
    bson_t **docs;
    size_t count, cap;
} walk;

static void walk_free(walk *w)
{
    for (size_t i = 0; i < w->count; i++)
        bson_destroy(w->docs[i]);
    free(w->docs);
}

static int walk_keep(walk *w, const bson_t *doc)
{
    if (w->count == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 16;
        bson_t **grown = realloc(w->docs, cap * sizeof *grown);
        if (!grown)
            return CONVO_ENOMEM;
        w->docs = grown;
        w->cap = cap;
    }
    w->docs[w->count++] = bson_copy(doc);
    return 0;
}

/* Adds the messages of one batch document that fall in [from, to). */
static int add_messages(call *c, convo_history *h, const bson_t *doc, int64_t from, int64_t to)
{
    int64_t s = get_int(doc, "s", 0), n = get_int(doc, "n", -1), at = get_int(doc, "at", 0);
    bson_iter_t it, arr;
    if (!bson_iter_init_find(&it, doc, "m") || !BSON_ITER_HOLDS_ARRAY(&it) ||
        !bson_iter_recurse(&it, &arr))
        return corrupt(c, "batch without messages");
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
            return corrupt(c, "message without a role");
        const char *r = bson_iter_utf8(&role, &rlen);
        if (!bson_iter_recurse(&arr, &item) || !bson_iter_find_descendant(&item, "b", &bytes) ||
            !BSON_ITER_HOLDS_BINARY(&bytes))
            return corrupt(c, "message without bytes");
        bson_iter_binary(&bytes, &sub, &len, &data);
        int64_t when = bson_iter_recurse(&arr, &item) && bson_iter_find(&item, "a") &&
                               BSON_ITER_HOLDS_INT64(&item)
                           ? bson_iter_int64(&item)
                           : at;
        if (convo__history_add(h, (const char *)data, len, r, s + i, when) != 0)
            return no_memory(c);
    }
    return i == n ? 0 : corrupt(c, "batch holds a different number of messages than it says");
}

/* Walks generation g downwards from below `to` (INT64_MAX: from the top, which
 * also gives the length) and keeps the batches covering [from, to). Each batch
 * must end where the one above starts: a gap means a delete is removing the
 * thread (*again). A fence at the top means it was deleted. */
static int walk_down(call *c, const thread_doc *t, const convo_load_opts *o, int64_t *length,
                     int64_t *from, int64_t *to, walk *w, bool *again, bool *deleted)
{
    bool from_top = *length < 0;
    bson_t *filter = generation_filter(&t->g);
    if (!from_top)
        BCON_APPEND(filter, "s", "{", "$lt", BCON_INT64(*to), "}");
    int64_t most = from_top ? (o->tail > 0 ? o->tail + 1 : 0) : *to - *from;
    bson_t *opts = BCON_NEW("sort", "{", "s", BCON_INT32(-1), "}", "projection", "{", "cp",
                            BCON_INT32(0), "}"); /* a checkpoint being settled */
    if (most > 0)
        BCON_APPEND(opts, "limit", BCON_INT64(most));
    mongoc_cursor_t *cur =
        mongoc_collection_find_with_opts(c->batches, filter, opts, c->b->primary);
    const bson_t *doc;
    int64_t below = -1; /* where the last batch seen starts */
    bool covered = false;
    int rc = 0;
    while (rc == 0 && !covered && mongoc_cursor_next(cur, &doc)) {
        batch_head h;
        parse_head(doc, &h);
        if (below < 0 && from_top) {
            if ((*deleted = h.fence))
                break;
            *length = h.e;
            convo__load_range(o, *length, from, to);
        }
        bool fits = below < 0 ? (h.s < *to && h.e >= *to) : h.e == below;
        if (h.fence || !fits) {
            *again = true;
            break;
        }
        if (*from < *to && (rc = walk_keep(w, doc)) != 0)
            rc = no_memory(c);
        below = h.s;
        covered = h.s <= *from;
    }
    bson_error_t e;
    if (rc == 0 && mongoc_cursor_error(cur, &e))
        rc = fail(c, &e, "loading messages");
    if (rc == 0 && below < 0 && from_top && !*deleted) {
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
    int rc = read_thread(c, id, false, &now);
    if (rc == 0 && !(now.found && bson_oid_equal(&now.g, &t->g) && !now.forking))
        *again = true;
    thread_free(&now);
    return rc;
}

static int load_attempt(call *c, const char *id, const convo_load_opts *o, convo_history *h,
                        bool *again)
{
    thread_doc t;
    walk w = {NULL, 0, 0};
    bool deleted = false;
    int64_t length = -1, from = 0, to = 0;
    int rc = read_thread(c, id, o->with_extra, &t);
    if (rc == 0 && (!t.found || t.forking || expired(&t, now_ms())))
        rc = convo__error(c->err, CONVO_ENOTFOUND, NULL, "thread not found");
    if (rc == 0 && o->limit > 0) { /* the window depends on the length: read it first */
        batch_head top;
        rc = top_batch(c, &t.g, &top);
        deleted = top.found && top.fence;
        length = top.found ? top.e : 0;
        convo__load_range(o, length, &from, &to);
    }
    if (rc == 0 && !deleted && (length < 0 || from < to))
        rc = walk_down(c, &t, o, &length, &from, &to, &w, again, &deleted);
    if (rc == 0 && !*again && (deleted || (length == 0 && !t.live)))
        rc = convo__error(c->err, CONVO_ENOTFOUND, NULL, "thread not found");
    if (rc == 0 && !*again && length == 0)
        rc = still_there(c, id, &t, again);
    if (rc == 0 && !*again && convo__history_reserve(h, (size_t)(to - from)) != 0)
        rc = no_memory(c);
    for (size_t i = w.count; rc == 0 && !*again && i-- > 0;)
        rc = add_messages(c, h, w.docs[i], from, to);
    convo__history_set_length(h, length);
    char *extra = NULL;
    if (rc == 0 && !*again && o->with_extra && (rc = extra_to_json(c, &t.extra, &extra)) == 0 &&
        convo__history_set_extra(h, extra, strlen(extra)) != 0)
        rc = no_memory(c);
    free(extra);
    walk_free(&w);
    thread_free(&t);
    return rc;
}

static int mongo_load(convo_backend *b, const char *id, const convo_load_opts *opts,
                      convo_history **out, convo_error *err)
{
    call c;
    call_begin(&c, b, err);
    int rc = 0;
    convo_history *h = NULL;
    for (int attempt = 0; rc == 0; attempt++) {
        bool again = false;
        convo_history_free(h);
        if (attempt == LOAD_ATTEMPTS) {
            h = NULL;
            rc = convo__error(err, CONVO_EIO, NULL,
                              "MongoDB: the thread kept changing under the load");
            break;
        }
        if (!(h = convo__history_new())) {
            rc = no_memory(&c);
            break;
        }
        rc = load_attempt(&c, id, opts, h, &again);
        if (!again)
            break;
    }
    call_end(&c);
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
        char *ek = key_escape(k);
        rc = ek ? put_json(c, out, ek, v, 0) : no_memory(c);
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
    new_generation(id, &g);
    if (rc == 0) {
        if (!build_thread(c->b, id, &g, true, false, 1, &extra, now_ms(), &doc))
            rc = convo__error(c->err, CONVO_ETOOLARGE, NULL, "extra is too large for MongoDB");
        else
            rc = insert_doc(c, c->threads, &doc, again, "saving extra");
        bson_destroy(&doc);
    }
    bson_destroy(&extra);
    return rc;
}

/* {$set: {live: true, "extra.<escaped key>": value, ...}, $inc: {v: 1}}. */
static int build_extra_update(call *c, json_t *patch, int64_t now, bool refreshed,
                              bson_t *update)
{
    bson_t set;
    const char *k;
    json_t *v;
    int rc = 0;
    bson_init(update);
    BSON_APPEND_DOCUMENT_BEGIN(update, "$set", &set);
    BSON_APPEND_BOOL(&set, "live", true);
    json_object_foreach(patch, k, v) {
        char *ek = key_escape(k);
        char *path = ek ? join("extra.", ek) : NULL;
        rc = path ? put_json(c, &set, path, v, 1) : no_memory(c);
        free(ek);
        free(path);
        if (rc != 0)
            break;
    }
    bson_append_document_end(update, &set);
    BCON_APPEND(update, "$inc", "{", "v", BCON_INT64(1), "}");
    append_expiry(c->b, update, now, refreshed);
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
    int64_t now = now_ms(), matched = 0;
    int rc = writable_thread(c, id, true, false, &t, again);
    if (rc == 0 && !*again && !t.found)
        rc = create_with_extra(c, id, patch_obj, again);
    if (rc || *again || !t.found)
        goto out;
    if ((rc = extra_to_json(c, &t.extra, &current)) != 0 ||
        (rc = convo__extra_merge(current, strlen(current), patch, c->b->limits.max_extra_bytes,
                                 &merged, &merged_len, c->err)) != 0 ||
        (rc = refresh_batches(c, &t, now, &refreshed)) != 0)
        goto out;
    bson_t update;
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(id), "g", BCON_OID(&t.g), "v", BCON_INT64(t.v));
    rc = build_extra_update(c, patch_obj, now, refreshed, &update);
    if (rc == 0)
        rc = update_one(c, c->threads, filter, &update, &matched, "saving extra");
    *again = rc == 0 && matched == 0;
    bson_destroy(&update);
    bson_destroy(filter);
out:
    free(current);
    free(merged);
    thread_free(&t);
    return rc;
}

static int mongo_save_extra(convo_backend *b, const char *id, const char *patch, void *patch_obj,
                            convo_error *err)
{
    call c;
    call_begin(&c, b, err);
    int rc = 0;
    for (int attempt = 0;; attempt++) {
        bool again = false;
        if (attempt == ATTEMPTS) {
            rc = contention(&c);
            break;
        }
        backoff(attempt);
        rc = save_attempt(&c, id, patch, (json_t *)patch_obj, &again);
        if (rc != 0 || !again)
            break;
    }
    call_end(&c);
    return rc;
}

/* ---- delete ---- */

static int not_found(call *c)
{
    return convo__error(c->err, CONVO_ENOTFOUND, NULL, "thread not found");
}

/* An invisible placeholder (no batch, never live) is nobody's thread: fence it
 * at 0, so an append still aiming at it starts over, and remove it. */
static int drop_placeholder(call *c, const char *id, const bson_oid_t *g, bool *again)
{
    bool dup;
    int rc = insert_fence(c, g, 0, &dup);
    if (rc == 0 && dup)
        *again = true; /* a first batch landed: it is a thread after all */
    else if (rc == 0)
        rc = retire(c, id, g);
    return rc;
}

static int delete_attempt(call *c, const char *id, bool *again)
{
    thread_doc t;
    batch_head top = {false, false, 0, 0};
    int64_t matched = 0, now = now_ms();
    int rc = read_thread(c, id, false, &t);
    if (rc == 0 && t.found && !t.forking && !expired(&t, now))
        rc = top_batch(c, &t.g, &top);
    if (rc != 0 || !t.found)
        goto out;
    if (t.forking) { /* a fork's placeholder: not a thread; clear it if abandoned */
        if (now - t.created_ms > FORK_STALE_MS)
            rc = abort_fork(c, id, &t.g);
    } else if (expired(&t, now) || (top.found && top.fence) || t.dying) {
        rc = finish_delete(c, id, &t.g, false); /* gone, or another delete's: help it finish */
    } else if (!t.live && !top.found) {
        rc = drop_placeholder(c, id, &t.g, again);
    } else {
        /* the mark makes save_extra stop writing here; the fence stops appends */
        rc = mark_dying(c, id, &t.g, true, &matched);
        if (rc == 0 && (*again = matched == 0))
            goto out;
        if (rc == 0 && (rc = finish_delete(c, id, &t.g, true)) == 0)
            quietly(c, collect_garbage, id);
        thread_free(&t);
        return rc;
    }
out:
    thread_free(&t);
    return rc ? rc : *again ? 0 : not_found(c);
}

static int mongo_thread_delete(convo_backend *b, const char *id, convo_error *err)
{
    call c;
    call_begin(&c, b, err);
    int rc = 0;
    for (int attempt = 0;; attempt++) {
        bool again = false;
        if (attempt == ATTEMPTS) {
            rc = contention(&c);
            break;
        }
        backoff(attempt);
        rc = delete_attempt(&c, id, &again);
        if (rc != 0 || !again)
            break;
    }
    call_end(&c);
    return rc;
}

/* ---- list ---- */

/* Whether a thread doc is a thread a caller can see. */
static int visible(call *c, const thread_doc *t, int64_t now, bool *yes)
{
    *yes = false;
    if (t->forking || expired(t, now))
        return 0;
    if (t->live && !t->dying) {
        *yes = true;
        return 0;
    }
    batch_head top;
    int rc = top_batch(c, &t->g, &top);
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
    int64_t now = now_ms();
    int rc = 0;
    const char *last = NULL;
    while (rc == 0 && mongoc_cursor_next(cur, &doc)) {
        bson_iter_t it;
        thread_doc t;
        bool yes = false;
        memset(&t, 0, sizeof t);
        bson_init(&t.extra);
        if (!bson_iter_init_find(&it, doc, "_id") || !BSON_ITER_HOLDS_UTF8(&it)) {
            thread_free(&t);
            continue;
        }
        uint32_t len;
        const char *id = bson_iter_utf8(&it, &len);
        rc = parse_thread(c, doc, &t);
        if (rc == 0)
            rc = visible(c, &t, now, &yes);
        thread_free(&t);
        if (rc != 0 || !yes)
            continue;
        if (convo_thread_page_count(p) == limit) {
            if (convo__thread_page_set_next(p, last) != 0)
                rc = no_memory(c);
            break;
        }
        if (convo__thread_page_add(p, id, len) != 0)
            rc = no_memory(c);
        last = convo_thread_page_id(p, convo_thread_page_count(p) - 1);
    }
    bson_error_t e;
    if (rc == 0 && mongoc_cursor_error(cur, &e))
        rc = fail(c, &e, "listing threads");
    mongoc_cursor_destroy(cur);
    bson_destroy(filter);
    bson_destroy(opts);
    return rc;
}

static int mongo_thread_list(convo_backend *b, const char *after, size_t limit,
                             convo_thread_page **out, convo_error *err)
{
    convo_thread_page *p = convo__thread_page_new();
    if (!p)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    call c;
    call_begin(&c, b, err);
    int rc = list_threads(&c, after, limit, p);
    call_end(&c);
    if (rc != 0) {
        convo_thread_page_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

/* ---- fork ---- */

/* Makes the invisible placeholder {forking: true} for dst with src's extra, after
 * clearing what may be there; CONVO_ECONFLICT when dst is a thread. */
static int claim_destination(call *c, const char *dst, const bson_t *extra, bson_oid_t *gd)
{
    for (int attempt = 0; attempt < ATTEMPTS; attempt++) {
        bson_t doc;
        thread_doc d;
        batch_head top = {false, false, 0, 0};
        bool dup, again = false;
        int64_t now = now_ms();
        backoff(attempt);
        new_generation(dst, gd);
        if (!build_thread(c->b, dst, gd, false, true, 0, extra, now, &doc)) {
            bson_destroy(&doc);
            return convo__error(c->err, CONVO_ETOOLARGE, NULL, "extra is too large for MongoDB");
        }
        int rc = insert_doc(c, c->threads, &doc, &dup, "creating the fork");
        bson_destroy(&doc);
        if (rc != 0 || !dup)
            return rc;
        if ((rc = read_thread(c, dst, false, &d)) == 0 && d.found && !d.forking)
            rc = top_batch(c, &d.g, &top);
        if (rc == 0 && d.found) {
            if (d.forking && now - d.created_ms <= FORK_STALE_MS)
                rc = convo__error(c->err, CONVO_ECONFLICT, NULL,
                                  "another fork into the destination thread is under way");
            else if (d.forking)
                rc = abort_fork(c, dst, &d.g);
            else if (expired(&d, now) || (top.found && top.fence))
                rc = finish_delete(c, dst, &d.g, false);
            else if (d.live || top.found)
                rc = convo__error(c->err, CONVO_ECONFLICT, NULL,
                                  "destination thread already exists");
            else
                rc = drop_placeholder(c, dst, &d.g, &again);
        }
        thread_free(&d);
        if (rc != 0)
            return rc;
    }
    return contention(c);
}

/* A copy of a source batch for dst, cut at upto. */
static bool copy_batch(const convo_backend *b, const bson_t *src, const batch_head *h,
                       const bson_oid_t *gd, int64_t upto, int64_t now, bson_t *doc)
{
    int64_t e = h->e < upto ? h->e : upto;
    bson_iter_t it, item;
    bson_init(doc);
    BSON_APPEND_OID(doc, "g", gd);
    BSON_APPEND_INT64(doc, "s", h->s);
    BSON_APPEND_INT64(doc, "e", e);
    BSON_APPEND_INT64(doc, "n", e - h->s);
    BSON_APPEND_INT64(doc, "at", get_int(src, "at", 0));
    if (b->ttl_ms)
        BSON_APPEND_DATE_TIME(doc, "exp", now + 3 * b->ttl_ms + TTL_MARGIN_MS);
    if (!bson_iter_init_find(&it, src, "m") || !BSON_ITER_HOLDS_ARRAY(&it))
        return false;
    if (e == h->e)
        return bson_append_iter(doc, "m", 1, &it);
    bson_t arr;
    BSON_APPEND_ARRAY_BEGIN(doc, "m", &arr);
    bson_iter_recurse(&it, &item);
    for (int64_t i = 0; i < e - h->s && bson_iter_next(&item); i++)
        bson_append_iter(&arr, NULL, 0, &item);
    return bson_append_array_end(doc, &arr);
}

static int flush(call *c, mongoc_bulk_operation_t **bulk)
{
    bson_error_t e;
    int rc = 0;
    if (*bulk && !mongoc_bulk_operation_execute(*bulk, NULL, &e))
        rc = fail(c, &e, "copying messages");
    mongoc_bulk_operation_destroy(*bulk);
    *bulk = NULL;
    return rc;
}

/* Copies src's batches [0, upto) into generation gd of dst; *complete is false
 * when src lost batches on the way (it was deleted meanwhile). */
static int copy_batches(call *c, const bson_oid_t *gs, const bson_oid_t *gd, int64_t upto,
                        bool *complete)
{
    bson_t *filter = BCON_NEW("g", BCON_OID(gs), "s", "{", "$lt", BCON_INT64(upto), "}");
    bson_t *opts = BCON_NEW("sort", "{", "s", BCON_INT32(1), "}");
    bson_t *bulk_opts = BCON_NEW("ordered", BCON_BOOL(false));
    mongoc_cursor_t *cur =
        mongoc_collection_find_with_opts(c->batches, filter, opts, c->b->primary);
    mongoc_bulk_operation_t *bulk = NULL;
    const bson_t *doc;
    size_t pending = 0;
    int64_t next = 0, now = now_ms();
    bson_error_t e;
    int rc = 0;
    while (rc == 0 && next < upto && mongoc_cursor_next(cur, &doc)) {
        batch_head h;
        bson_t copy;
        parse_head(doc, &h);
        if (h.fence || h.s != next)
            break;
        if (!bulk)
            bulk = mongoc_collection_create_bulk_operation_with_opts(c->batches, bulk_opts);
        if (!copy_batch(c->b, doc, &h, gd, upto, now, &copy))
            rc = corrupt(c, "batch without messages");
        else if (!mongoc_bulk_operation_insert_with_opts(bulk, &copy, NULL, &e))
            rc = fail(c, &e, "copying messages");
        pending += copy.len;
        bson_destroy(&copy);
        next = h.e < upto ? h.e : upto;
        if (rc == 0 && pending >= COPY_FLUSH_BYTES) {
            rc = flush(c, &bulk);
            pending = 0;
        }
    }
    if (rc == 0 && mongoc_cursor_error(cur, &e))
        rc = fail(c, &e, "reading messages to copy");
    if (rc == 0)
        rc = flush(c, &bulk);
    mongoc_bulk_operation_destroy(bulk);
    mongoc_cursor_destroy(cur);
    bson_destroy(filter);
    bson_destroy(opts);
    bson_destroy(bulk_opts);
    *complete = next == upto;
    return rc;
}

/* The fork becomes visible in one step: its placeholder turns live, unless a
 * writer cancelled it meanwhile. */
static int commit_fork(call *c, const char *dst, const bson_oid_t *gd, bool *committed)
{
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(dst), "g", BCON_OID(gd), "forking", BCON_BOOL(true));
    bson_t *update = BCON_NEW("$set", "{", "live", BCON_BOOL(true), "}", "$unset", "{", "forking",
                              BCON_UTF8(""), "c", BCON_UTF8(""), "}");
    int64_t matched = 0;
    int rc = update_one(c, c->threads, filter, update, &matched, "committing the fork");
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
    int rc = abort_fork(c, dst, gd);
    if (rc == 0)
        rc = read_thread(c, dst, false, &d);
    if (rc == 0 && !(d.found && bson_oid_equal(&d.g, gd)))
        rc = delete_generation(c, gd, "cancelling a fork");
    if (rc == 0)
        thread_free(&d);
    return rc;
}

static int fork_thread(call *c, const char *src, const char *dst, int64_t upto)
{
    thread_doc s;
    batch_head top = {false, false, 0, 0};
    bson_oid_t gd;
    bool complete = false, committed = false;
    int rc = read_thread(c, src, true, &s);
    if (rc == 0 && s.found && !s.forking && !expired(&s, now_ms()))
        rc = top_batch(c, &s.g, &top);
    else if (rc == 0)
        rc = convo__error(c->err, CONVO_ENOTFOUND, NULL, "source thread not found");
    int64_t length = top.found ? top.e : 0;
    if (rc == 0 && ((top.found && top.fence) || (!s.live && length == 0)))
        rc = convo__error(c->err, CONVO_ENOTFOUND, NULL, "source thread not found");
    if (rc == 0 && upto > length)
        rc = convo__error(c->err, CONVO_EINVAL, NULL, "fork upto %lld is past the end (%lld)",
                          (long long)upto, (long long)length);
    if (rc == 0)
        rc = claim_destination(c, dst, &s.extra, &gd);
    if (rc != 0) {
        thread_free(&s);
        return rc;
    }
    rc = copy_batches(c, &s.g, &gd, upto < 0 ? length : upto, &complete);
    if (rc == 0 && complete)
        rc = commit_fork(c, dst, &gd, &committed);
    if (rc == 0 && !complete)
        rc = convo__error(c->err, CONVO_ENOTFOUND, NULL,
                          "source thread was deleted while being forked");
    else if (rc == 0 && !committed)
        rc = convo__error(c->err, CONVO_ECONFLICT, NULL,
                          "destination thread was written to while being forked");
    if (!committed)
        quietly(c, cancel_own_fork, dst, &gd);
    thread_free(&s);
    return rc;
}

static int mongo_thread_fork(convo_backend *b, const char *src, const char *dst, int64_t upto,
                             convo_error *err)
{
    call c;
    call_begin(&c, b, err);
    int rc = fork_thread(&c, src, dst, upto);
    call_end(&c);
    return rc;
}

/* ---- checkpoints ----
 * <prefix>_checkpoints: one document per (thread, ns, checkpoint id) of a
 * generation, numbered by the store-wide counter in <prefix>_meta in the
 * order first put (o) and last written (w); <prefix>_values: one per (ns, channel, version);
 * <prefix>_writes: one per (ns, checkpoint, task, idx). A delete retires them
 * with the generation, so nothing of a deleted thread can come back. */

static bson_t *ns_filter(const bson_oid_t *g, const char *ns)
{
    return BCON_NEW("g", BCON_OID(g), "ns", BCON_UTF8(ns));
}

static void append_exp(const convo_backend *b, bson_t *doc, int64_t now)
{
    if (b->ttl_ms)
        BSON_APPEND_DATE_TIME(doc, "exp", now + 3 * b->ttl_ms + TTL_MARGIN_MS);
}

static const char *get_utf8(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_UTF8(&it))
        return bson_iter_utf8(&it, NULL);
    return NULL;
}

static const uint8_t *get_binary(const bson_t *doc, const char *key, uint32_t *len)
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
        rc = fail(c, &e, what);
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
        rc = fail(c, &e, what);
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
    bson_t *selector = ns_filter(g, ns), *update = bson_new(), set;
    BSON_APPEND_UTF8(selector, "c", channel);
    BSON_APPEND_UTF8(selector, "v", version);
    BSON_APPEND_DOCUMENT_BEGIN(update, "$setOnInsert", &set);
    BSON_APPEND_UTF8(&set, "ty", type);
    BSON_APPEND_BINARY(&set, "b", BSON_SUBTYPE_BINARY, bytes ? bytes : (const void *)"", len);
    append_exp(c->b, &set, now);
    bson_append_document_end(update, &set);
    return queue_upsert(c, kind(c, VALUES), bulk, selector, update, "storing channel values");
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
static int next_order(call *c, int64_t *order)
{
    bson_t *query = BCON_NEW("_id", BCON_UTF8("order"));
    bson_t *update = BCON_NEW("$inc", "{", "n", BCON_INT64(1), "}");
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
        bool ok = mongoc_collection_find_and_modify_with_opts(meta_collection(c), query, opts,
                                                              &reply, &e);
        if (ok && bson_iter_init_find(&it, &reply, "value") && BSON_ITER_HOLDS_DOCUMENT(&it) &&
            bson_iter_recurse(&it, &v) && bson_iter_find(&v, "n") && BSON_ITER_HOLDS_NUMBER(&v))
            *order = bson_iter_as_int64(&v);
        else if (ok)
            rc = corrupt(c, "checkpoint counter without a number");
        bson_destroy(&reply);
        /* a duplicate: two first puts of the store made the counter at once */
        if (ok || !is_duplicate(&e) || attempt == 1) {
            if (!ok)
                rc = fail(c, &e, "numbering a checkpoint");
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
    bson_t *key = ns_filter(g, ns), update = BSON_INITIALIZER, set, min;
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
        (void)mongoc_collection_update_one(kind(c, CHECKPOINTS), selector, &update, opts, NULL,
                                           &e);
        (void)mongoc_collection_update_one(kind(c, CHECKPOINTS), key, lower, later, NULL, &e);
        bson_destroy(lower);
        bson_destroy(later);
        stored = true;
    }
    /* a duplicate: another put of this new key inserted it first (try again: the
     * filter on w then decides), or a newer version is there */
    for (int attempt = 0; attempt < 2 && !stored && rc == 0; attempt++) {
        if (mongoc_collection_update_one(kind(c, CHECKPOINTS), selector, &update, opts, NULL, &e))
            stored = true;
        else if (!is_duplicate(&e))
            rc = fail(c, &e, "storing a checkpoint");
    }
    if (rc == 0 && !stored) {
        bson_t *lower = BCON_NEW("$min", "{", "o", BCON_INT64(w), "at", BCON_INT64(at), "}");
        rc = update_one(c, kind(c, CHECKPOINTS), key, lower, NULL, "storing a checkpoint");
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
    int64_t now = now_ms(), order = 0, matched = 1;
    int rc = writable_thread(c, cp->thread_id, false, true, &t, again);
    if (rc == 0 && !*again)
        rc = extend_expiry(c, cp->thread_id, &t, now, again);
    if (rc == 0 && !*again)
        rc = put_values(c, cp, &t.g, now);
    if (rc == 0 && !*again)
        rc = next_order(c, &order);
    if (rc == 0 && !*again) {
        bson_t fields;
        checkpoint_fields(cp, &fields);
        rc = store_checkpoint(c, &t.g, cp->checkpoint_ns, cp->checkpoint_id, &fields, order,
                              convo__now_micros(), now, true);
        bson_destroy(&fields);
    }
    if (rc == 0 && !*again && !t.live)
        rc = mark_live(c, cp->thread_id, &t.g, &matched);
    if (rc == 0 && matched == 0)
        *again = true;
    thread_free(&t);
    return rc;
}

static int too_large(call *c, const char *what)
{
    return convo__error(c->err, CONVO_ETOOLARGE, NULL,
                        "%s is larger than a MongoDB document (16 MiB)", what);
}

static int mongo_checkpoint_put(convo_backend *b, const convo_checkpoint_in *cp, convo_error *err)
{
    call c;
    bson_t probe;
    call_begin(&c, b, err);
    checkpoint_fields(cp, &probe);
    int rc = probe.len <= DOC_LIMIT - 4096 ? 0 : too_large(&c, "the checkpoint");
    bson_destroy(&probe);
    for (size_t i = 0; i < cp->nchannels && rc == 0; i++)
        if (cp->channels[i].value && cp->channels[i].value->len > DOC_LIMIT - 4096)
            rc = too_large(&c, "a channel value");
    for (int attempt = 0; rc == 0; attempt++) {
        bool again = false;
        if (attempt == ATTEMPTS) {
            rc = contention(&c);
            break;
        }
        backoff(attempt);
        rc = put_attempt(&c, cp, &again);
        if (!again)
            break;
    }
    call_end(&c);
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

/* Adds cp: {ns, id, o, at, p, meta, bt, bb, ch, ll, vs: [{c, v, ty, b}, ...]} to
 * a batch document; false when the document grows past 16 MiB. */
static bool add_pending(const convo_checkpoint_in *cp, int64_t order, int64_t at, bson_t *doc)
{
    bson_t sub, fields, vs, item;
    uint32_t n = 0;
    checkpoint_fields(cp, &fields);
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
static int settle(call *c, const bson_oid_t *g, const bson_t *batch, bool wait)
{
    static const char *const names[] = {"p", "meta", "bt", "bb", "ch", "ll", NULL};
    bson_iter_t it, vs;
    bson_t cp, fields = BSON_INITIALIZER;
    uint32_t len = 0;
    const uint8_t *data = NULL;
    if (bson_iter_init_find(&it, batch, "cp") && BSON_ITER_HOLDS_DOCUMENT(&it))
        bson_iter_document(&it, &len, &data);
    if (!data || !bson_init_static(&cp, data, len))
        return corrupt(c, "checkpoint of a batch is not a document");
    const char *ns = get_utf8(&cp, "ns"), *id = get_utf8(&cp, "id");
    int64_t order = get_int(&cp, "o", -1), at = get_int(&cp, "at", 0);
    int64_t s = get_int(batch, "s", -1), now = now_ms();
    if (!ns || !id || order < 0 || s < 0)
        return corrupt(c, "checkpoint of a batch without its key");
    bson_t *unacknowledged = BCON_NEW("ordered", BCON_BOOL(false), "writeConcern", "{", "w",
                                      BCON_INT32(0), "}");
    mongoc_bulk_operation_t *bulk =
        wait ? NULL
             : mongoc_collection_create_bulk_operation_with_opts(kind(c, VALUES), unacknowledged);
    bool queued = false;
    int rc = 0;
    if (bson_iter_init_find(&it, &cp, "vs") && BSON_ITER_HOLDS_ARRAY(&it) &&
        bson_iter_recurse(&it, &vs)) {
        while (rc == 0 && bson_iter_next(&vs)) {
            bson_t item;
            uint32_t blen = 0;
            if (!BSON_ITER_HOLDS_DOCUMENT(&vs)) {
                rc = corrupt(c, "channel value of a batch is not a document");
                break;
            }
            bson_iter_document(&vs, &len, &data);
            bson_init_static(&item, data, len);
            const char *channel = get_utf8(&item, "c"), *version = get_utf8(&item, "v"),
                       *type = get_utf8(&item, "ty");
            const uint8_t *bytes = get_binary(&item, "b", &blen);
            rc = channel && version && type
                     ? queue_value(c, &bulk, g, ns, channel, version, type, bytes, blen, now)
                     : corrupt(c, "channel value of a batch without its fields");
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
    if (rc == 0) {
        bson_t *filter = bson_new();
        if (bson_iter_init_find(&it, batch, "_id"))
            bson_append_iter(filter, "_id", 3, &it);
        else
            BCON_APPEND(filter, "g", BCON_OID(g), "s", BCON_INT64(s));
        bson_t *unset = BCON_NEW("$unset", "{", "cp", BCON_UTF8(""), "}");
        rc = update_one(c, c->batches, filter, unset, NULL, "storing a checkpoint");
        bson_destroy(filter);
        bson_destroy(unset);
    }
    bson_destroy(&fields);
    return rc;
}

/* Settles every batch in array field "pc" of doc (what lookup_pending found). */
static int settle_found(call *c, const bson_oid_t *g, const bson_t *doc)
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
            return corrupt(c, "batch is not a document");
        bson_iter_document(&arr, &len, &data);
        bson_init_static(&batch, data, len);
        rc = settle(c, g, &batch, true);
    }
    return rc;
}

/* A stage {$lookup: ... as: "pc"}: the batches of the thread doc's generation
 * still carrying a checkpoint (index convo_pending_v3), without their messages. */
static void lookup_pending(call *c, bson_t *stages, const char *pos)
{
    bson_t *cond = BCON_NEW("cp", "{", "$exists", BCON_BOOL(true), "}");
    bson_t *pending = BCON_NEW("0", "{", "$sort", "{", "s", BCON_INT32(1), "}", "}", "1", "{",
                               "$project", "{", "m", BCON_INT32(0), "}", "}");
    lookup_batches(c, stages, pos, cond, pending, "pc");
    bson_destroy(cond);
    bson_destroy(pending);
}

/* Reads thread doc id (without extra) and, in the same aggregate, the batches
 * still carrying a checkpoint; *yes when callers can see the thread, and then
 * those checkpoints have been settled. */
static int read_settled(call *c, const char *id, thread_doc *t, bool *yes)
{
    bson_t stages = BSON_INITIALIZER, *match = BCON_NEW("$match", "{", "_id", BCON_UTF8(id), "}");
    bson_t *project = BCON_NEW("$project", "{", "extra", BCON_INT32(0), "}");
    BSON_APPEND_DOCUMENT(&stages, "0", match);
    BSON_APPEND_DOCUMENT(&stages, "1", project);
    lookup_pending(c, &stages, "2");
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
        rc = fail(c, &e, "reading a thread");
    mongoc_cursor_destroy(cur);
    if (copy) {
        t->found = true;
        rc = parse_thread(c, copy, t);
        if (rc == 0)
            rc = visible(c, t, now_ms(), yes);
        if (rc == 0 && *yes)
            rc = settle_found(c, &t->g, copy);
        bson_destroy(copy);
    }
    bson_destroy(&stages);
    bson_destroy(match);
    bson_destroy(project);
    return rc;
}

/* A thread callers can see (its checkpoints settled), else CONVO_ENOTFOUND. */
static int read_visible(call *c, const char *id, thread_doc *t)
{
    bool yes = false;
    int rc = read_settled(c, id, t, &yes);
    if (rc == 0 && !yes)
        rc = not_found(c);
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
    int64_t now = now_ms(), order = 0;
    int rc = read_for_append(c, id, NULL, &t, &top, &replayed, &unused);
    if (rc == 0 && !t.found && cp->expected_length != 0) { /* no thread: nothing to create */
        rc = conflict(c, 0, cp->expected_length);
        goto out;
    }
    if (rc == 0)
        rc = clear_way(c, id, true, &t, &created, again);
    if (rc || *again)
        goto out;
    if (top.found && top.fence) { /* a delete is under way: finish it, then start over */
        rc = finish_delete(c, id, &t.g, false);
        *again = true;
        goto out;
    }
    int64_t length = top.found ? top.e : 0;
    if (length != cp->expected_length) {
        rc = conflict(c, length, cp->expected_length);
        goto out;
    }
    if ((rc = extend_expiry(c, id, &t, now, again)) != 0 || *again)
        goto out;
    if ((rc = next_order(c, &order)) != 0)
        goto out;
    bson_t doc;
    bson_oid_t bid; /* settle finds the batch by it */
    int64_t at = convo__now_micros();
    bson_oid_init(&bid, NULL);
    build_batch(c->b, &t.g, length, cp->nmessages, NULL, at, now, m, &doc);
    BSON_APPEND_OID(&doc, "_id", &bid);
    add_pending(cp, order, at, &doc);
    rc = insert_doc(c, c->batches, &doc, &dup, "storing a checkpoint with messages");
    if (rc == 0 && !dup) { /* committed: the rest only saves readers the work */
        quietly(c, settle, &t.g, &doc, false);
        if (!t.live)
            quietly(c, mark_live, id, &t.g, NULL);
    }
    bson_destroy(&doc);
    *again = rc == 0 && dup;
out:
    thread_free(&t);
    return rc;
}

static int mongo_checkpoint_put_log(convo_backend *b, const convo_checkpoint_in *cp,
                                    const convo_message_in *msgs, convo_error *err)
{
    call c;
    bson_t m, probe;
    bson_oid_t zero;
    call_begin(&c, b, err);
    int rc = build_messages(&c, msgs, cp->nmessages, &m);
    bson_oid_init_from_string(&zero, "000000000000000000000000");
    if (rc == 0) { /* the same size whatever g, number and times it gets */
        bool fits = build_batch(b, &zero, 0, cp->nmessages, NULL, 0, 0, &m, &probe) &&
                    BSON_APPEND_OID(&probe, "_id", &zero) && add_pending(cp, 0, 0, &probe);
        bson_destroy(&probe);
        if (!fits)
            rc = convo__error(err, CONVO_ETOOLARGE, NULL,
                              "messages and checkpoint are larger than a MongoDB document "
                              "(16 MiB); put fewer messages with it");
    }
    for (int attempt = 0; rc == 0; attempt++) {
        bool again = false;
        if (attempt == ATTEMPTS) {
            rc = contention(&c);
            break;
        }
        backoff(attempt);
        rc = put_log_attempt(&c, cp, &m, &again);
        if (!again)
            break;
    }
    bson_destroy(&m);
    call_end(&c);
    return rc;
}

/* Pending writes: idx >= 0 stored once per (task, idx), a negative idx replaces. */
static int put_writes(call *c, const bson_oid_t *g, const char *ns, const char *cpid,
                      const char *task, const char *path, const convo_write_in *w, size_t n)
{
    mongoc_bulk_operation_t *bulk = NULL;
    int64_t now = now_ms();
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        bson_t *selector = ns_filter(g, ns), *update = bson_new(), set;
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
        rc = queue_upsert(c, kind(c, WRITES), &bulk, selector, update, "storing pending writes");
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
    bson_t *filter = ns_filter(g, ns), doc;
    bson_t *opts = BCON_NEW("limit", BCON_INT64(1), "projection", "{", "_id", BCON_INT32(1), "}");
    bool found;
    BSON_APPEND_UTF8(filter, "id", cpid);
    int rc = find_one(c, kind(c, CHECKPOINTS), filter, opts, &doc, &found, "reading a checkpoint");
    bson_destroy(&doc);
    bson_destroy(filter);
    bson_destroy(opts);
    if (rc == 0 && !found)
        rc = convo__error(c->err, CONVO_ENOTFOUND, NULL, "checkpoint not found");
    return rc;
}

static int mongo_checkpoint_put_writes(convo_backend *b, const char *id, const char *ns,
                                       const char *cpid, const char *task, const char *path,
                                       const convo_write_in *writes, size_t n, convo_error *err)
{
    call c;
    thread_doc t;
    bool again = false;
    call_begin(&c, b, err);
    memset(&t, 0, sizeof t);
    bson_init(&t.extra);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++)
        if (writes[i].value.len > DOC_LIMIT - 4096)
            rc = too_large(&c, "a pending write");
    if (rc == 0)
        rc = read_visible(&c, id, &t);
    if (rc == 0)
        rc = checkpoint_exists(&c, id, &t.g, ns, cpid);
    if (rc == 0)
        rc = extend_expiry(&c, id, &t, now_ms(), &again);
    if (rc == 0 && again)
        rc = convo__error(err, CONVO_ENOTFOUND, NULL, "checkpoint not found");
    if (rc == 0)
        rc = put_writes(&c, &t.g, ns, cpid, task, path, writes, n);
    thread_free(&t);
    call_end(&c);
    return rc;
}

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
    bson_t *filter = ns_filter(g, ns), or;
    BSON_APPEND_ARRAY_BEGIN(filter, "$or", &or);
    int n = channel_refs(doc, &or), rc = 0;
    bson_append_array_end(filter, &or);
    if (n > 0) {
        mongoc_cursor_t *cur =
            mongoc_collection_find_with_opts(kind(c, VALUES), filter, NULL, c->b->primary);
        const bson_t *v;
        bson_error_t e;
        while (rc == 0 && mongoc_cursor_next(cur, &v))
            if (walk_keep(w, v) != 0)
                rc = no_memory(c);
        if (rc == 0 && mongoc_cursor_error(cur, &e))
            rc = fail(c, &e, "reading channel values");
        mongoc_cursor_destroy(cur);
    }
    bson_destroy(filter);
    return rc;
}

static const bson_t *find_value(const walk *w, const char *name, const char *version)
{
    for (size_t i = 0; i < w->count; i++) {
        const char *c = get_utf8(w->docs[i], "c"), *v = get_utf8(w->docs[i], "v");
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
    walk values = {NULL, 0, 0};
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
            const char *name = get_utf8(&item, "c"), *version = get_utf8(&item, "v");
            const bson_t *value = name && version ? find_value(&values, name, version) : NULL;
            const uint8_t *bytes = value ? get_binary(value, "b", &len) : NULL;
            if (!name || !version)
                rc = corrupt(c, "checkpoint channel without a name or version");
            else if (convo__checkpoint_add_channel(cp, name, version,
                                                   value ? get_utf8(value, "ty") : NULL, bytes,
                                                   value ? len : 0) != 0)
                rc = no_memory(c);
        }
    }
    walk_free(&values);
    return rc;
}

static int add_writes(call *c, convo_checkpoint *cp, const bson_oid_t *g, const char *ns,
                      const char *cpid)
{
    bson_t *filter = ns_filter(g, ns);
    BSON_APPEND_UTF8(filter, "cp", cpid);
    mongoc_cursor_t *cur =
        mongoc_collection_find_with_opts(kind(c, WRITES), filter, NULL, c->b->primary);
    const bson_t *w;
    bson_error_t e;
    int rc = 0;
    while (rc == 0 && mongoc_cursor_next(cur, &w)) {
        uint32_t len;
        const uint8_t *bytes = get_binary(w, "b", &len);
        const char *task = get_utf8(w, "task"), *path = get_utf8(w, "path"),
                   *channel = get_utf8(w, "c"), *type = get_utf8(w, "ty");
        if (!task || !path || !channel || !type)
            rc = corrupt(c, "pending write without its fields");
        else if (convo__checkpoint_add_write(cp, task, path, get_int(w, "idx", 0), channel, type,
                                             bytes, len) != 0)
            rc = no_memory(c);
    }
    if (rc == 0 && mongoc_cursor_error(cur, &e))
        rc = fail(c, &e, "reading pending writes");
    mongoc_cursor_destroy(cur);
    bson_destroy(filter);
    return rc;
}

/* The checkpoint a stored document describes, with its values and writes. */
static int export_checkpoint(call *c, const char *id, const bson_oid_t *g, const bson_t *doc,
                             convo_checkpoint **out)
{
    const char *ns = get_utf8(doc, "ns"), *cpid = get_utf8(doc, "id");
    const char *meta = get_utf8(doc, "meta"), *body_type = get_utf8(doc, "bt");
    uint32_t body_len;
    const uint8_t *body = get_binary(doc, "bb", &body_len);
    *out = NULL;
    if (!ns || !cpid)
        return corrupt(c, "checkpoint without a namespace or id");
    convo_checkpoint *cp = convo__checkpoint_new(id, ns, cpid, get_utf8(doc, "p"),
                                                 meta ? meta : "{}", body_type, body, body_len,
                                                 get_int(doc, "ll", 0), get_int(doc, "at", 0));
    if (!cp)
        return no_memory(c);
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

static int mongo_checkpoint_get(convo_backend *b, const char *id, const char *ns,
                                const char *cpid, convo_checkpoint **out, convo_error *err)
{
    call c;
    thread_doc t;
    bson_t doc;
    bool found = false;
    call_begin(&c, b, err);
    int rc = read_visible(&c, id, &t);
    if (rc == 0) {
        bson_t *filter = ns_filter(&t.g, ns);
        bson_t *opts = BCON_NEW("sort", "{", "o", BCON_INT32(-1), "}", "limit", BCON_INT64(1));
        if (cpid)
            BSON_APPEND_UTF8(filter, "id", cpid);
        rc = find_one(&c, kind(&c, CHECKPOINTS), filter, opts, &doc, &found,
                      "reading a checkpoint");
        if (rc == 0 && !found)
            rc = convo__error(err, CONVO_ENOTFOUND, NULL, "checkpoint not found");
        if (rc == 0)
            rc = export_checkpoint(&c, id, &t.g, &doc, out);
        bson_destroy(&doc);
        bson_destroy(filter);
        bson_destroy(opts);
    }
    thread_free(&t);
    call_end(&c);
    return rc;
}

/* Adds the thread's matching checkpoints, newest first, until the set holds
 * limit; below (when not NULL): only those numbered lower, i.e. put before. */
static int list_thread_checkpoints(call *c, const char *id, const bson_oid_t *g,
                                   const convo_checkpoint_list_opts *o, const int64_t *below,
                                   void *filter, convo_checkpoint_set *set)
{
    bson_t *query = generation_filter(g);
    bson_t *opts = BCON_NEW("sort", "{", "o", BCON_INT32(-1), "}");
    int rc = 0;
    if (o->checkpoint_ns)
        BSON_APPEND_UTF8(query, "ns", o->checkpoint_ns);
    if (below)
        BCON_APPEND(query, "o", "{", "$lt", BCON_INT64(*below), "}");
    mongoc_cursor_t *cur =
        mongoc_collection_find_with_opts(kind(c, CHECKPOINTS), query, opts, c->b->primary);
    const bson_t *d;
    while (rc == 0 && (!o->limit || convo_checkpoint_set_count(set) < o->limit) &&
           mongoc_cursor_next(cur, &d)) {
        const char *meta = get_utf8(d, "meta");
        convo_checkpoint *cp;
        if (filter && !(meta && convo__json_contains(meta, strlen(meta), filter)))
            continue;
        rc = export_checkpoint(c, id, g, d, &cp);
        if (rc == 0 && convo__checkpoint_set_add(set, cp) != 0)
            rc = no_memory(c);
    }
    bson_error_t e;
    if (rc == 0 && mongoc_cursor_error(cur, &e))
        rc = fail(c, &e, "listing checkpoints");
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
    lookup_pending(c, &stages, "2");
    mongoc_cursor_t *cur =
        mongoc_collection_aggregate(c->threads, MONGOC_QUERY_NONE, &stages, NULL, c->b->primary);
    const bson_t *doc;
    int64_t now = now_ms();
    int rc = 0;
    while (rc == 0 && (!o->limit || convo_checkpoint_set_count(set) < o->limit) &&
           mongoc_cursor_next(cur, &doc)) {
        thread_doc t;
        bool yes = false;
        const char *id = get_utf8(doc, "_id");
        memset(&t, 0, sizeof t);
        bson_init(&t.extra);
        if (id && (rc = parse_thread(c, doc, &t)) == 0 &&
            (rc = visible(c, &t, now, &yes)) == 0 && yes &&
            (rc = settle_found(c, &t.g, doc)) == 0)
            rc = list_thread_checkpoints(c, id, &t.g, o, below, filter, set);
        thread_free(&t);
    }
    bson_error_t e;
    if (rc == 0 && mongoc_cursor_error(cur, &e))
        rc = fail(c, &e, "listing checkpoints");
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
    int rc = read_visible(c, tid, &t);
    if (rc == 0) {
        bson_t *filter = ns_filter(&t.g, ns), doc;
        bson_t *opts =
            BCON_NEW("limit", BCON_INT64(1), "projection", "{", "o", BCON_INT32(1), "}");
        bool found;
        BSON_APPEND_UTF8(filter, "id", o->before);
        rc = find_one(c, kind(c, CHECKPOINTS), filter, opts, &doc, &found, "reading a checkpoint");
        if (rc == 0 && !found)
            rc = convo__error(c->err, CONVO_ENOTFOUND, NULL, "checkpoint '%s' not found",
                              o->before);
        *number = get_int(&doc, "o", 0);
        bson_destroy(&doc);
        bson_destroy(filter);
        bson_destroy(opts);
    } else if (rc == CONVO_ENOTFOUND) {
        convo__error_clear(c->err);
        rc = convo__error(c->err, CONVO_ENOTFOUND, NULL, "checkpoint '%s' not found", o->before);
    }
    thread_free(&t);
    return rc;
}

static int mongo_checkpoint_list(convo_backend *b, const convo_checkpoint_list_opts *o,
                                 void *filter, convo_checkpoint_set **out, convo_error *err)
{
    convo_checkpoint_set *set = convo__checkpoint_set_new();
    if (!set)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    call c;
    int64_t number = 0;
    call_begin(&c, b, err);
    int rc = o->before ? before_number(&c, o, &number) : 0;
    const int64_t *below = o->before ? &number : NULL;
    if (rc == 0 && o->thread_id) {
        thread_doc t;
        bool yes = false;
        rc = read_settled(&c, o->thread_id, &t, &yes);
        if (rc == 0 && yes)
            rc = list_thread_checkpoints(&c, o->thread_id, &t.g, o, below, filter, set);
        thread_free(&t);
    } else if (rc == 0) {
        rc = list_all_checkpoints(&c, o, below, filter, set);
    }
    call_end(&c);
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
        const char *name = get_utf8(&item, "c"), *version = get_utf8(&item, "v");
        char *key = name && version ? value_key(ns, name, version) : NULL;
        if (key && json_object_set_new(refs, key, json_true()) != 0) {
            free(key);
            return no_memory(c);
        }
        free(key);
    }
    return 0;
}

/* Deletes the documents of kind k whose field (id or cp) is one of ids, in ns. */
static int delete_ids(call *c, int k, const bson_oid_t *g, const char *ns, const char *field,
                      json_t *ids)
{
    bson_t *filter = ns_filter(g, ns), in, arr;
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
    int rc = delete_docs(c, kind(c, k), filter, true, NULL, "pruning checkpoints");
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
        bson_t *filter = ns_filter(g, json_string_value(json_array_get(a, 0)));
        BSON_APPEND_UTF8(filter, "c", json_string_value(json_array_get(a, 1)));
        BSON_APPEND_UTF8(filter, "v", json_string_value(json_array_get(a, 2)));
        rc = delete_docs(c, kind(c, VALUES), filter, false, NULL, "pruning values");
        bson_destroy(filter);
        json_decref(a);
        if (rc != 0)
            break;
    }
    return rc;
}

/* Sorts each checkpoint of the thread, newest first, into kept (the first
 * keep_last of its namespace) or dropped, with the values each side refers to. */
static int sort_for_prune(call *c, const char *id, const bson_oid_t *g, size_t keep_last,
                          json_t *counts, json_t *drop_ids, json_t *kept, json_t *dropped)
{
    bson_t *query = generation_filter(g);
    bson_t *opts = BCON_NEW("sort", "{", "o", BCON_INT32(-1), "}", "projection", "{", "ns",
                            BCON_INT32(1), "id", BCON_INT32(1), "ch", BCON_INT32(1), "}");
    mongoc_cursor_t *cur =
        mongoc_collection_find_with_opts(kind(c, CHECKPOINTS), query, opts, c->b->primary);
    const bson_t *doc;
    bson_error_t e;
    int rc = 0;
    while (rc == 0 && mongoc_cursor_next(cur, &doc)) {
        const char *ns = get_utf8(doc, "ns"), *cpid = get_utf8(doc, "id");
        if (!ns || !cpid)
            continue;
        size_t seen = (size_t)json_integer_value(json_object_get(counts, ns));
        json_object_set_new(counts, ns, json_integer((json_int_t)seen + 1));
        if (seen < keep_last) {
            rc = note_refs(c, doc, ns, kept);
            continue;
        }
        json_t *ids = json_object_get(drop_ids, ns);
        if (!ids)
            json_object_set_new(drop_ids, ns, ids = json_array());
        if (!ids || json_array_append_new(ids, json_string(cpid)) != 0)
            rc = no_memory(c);
        else
            rc = note_refs(c, doc, ns, dropped);
    }
    if (rc == 0 && mongoc_cursor_error(cur, &e))
        rc = fail(c, &e, "reading checkpoints");
    mongoc_cursor_destroy(cur);
    bson_destroy(query);
    bson_destroy(opts);
    return rc;
}

static int prune_thread(call *c, const char *id, const bson_oid_t *g, size_t keep_last)
{
    json_t *counts = json_object(), *drop_ids = json_object(), *kept = json_object(),
           *dropped = json_object();
    int rc = counts && drop_ids && kept && dropped
                 ? sort_for_prune(c, id, g, keep_last, counts, drop_ids, kept, dropped)
                 : no_memory(c);
    const char *ns;
    json_t *ids;
    json_object_foreach(drop_ids, ns, ids) {
        if (rc == 0) /* the checkpoints first: a value goes only once nothing names it */
            rc = delete_ids(c, CHECKPOINTS, g, ns, "id", ids);
        if (rc == 0)
            rc = delete_ids(c, WRITES, g, ns, "cp", ids);
    }
    if (rc == 0)
        rc = delete_values(c, g, dropped, kept);
    json_decref(counts);
    json_decref(drop_ids);
    json_decref(kept);
    json_decref(dropped);
    return rc;
}

static int mongo_checkpoint_prune(convo_backend *b, const char *id, size_t keep_last,
                                  convo_error *err)
{
    call c;
    thread_doc t;
    call_begin(&c, b, err);
    int rc = read_visible(&c, id, &t);
    if (rc == 0)
        rc = prune_thread(&c, id, &t.g, keep_last);
    thread_free(&t);
    call_end(&c);
    return rc;
}

/* ---- import (convo import / copy) ---- */

/* A run of messages [from, to) of an import chunk and its messages array (on
 * the heap: a bson_t must not move once it has grown). */
typedef struct piece {
    size_t from, to;
    bson_t *m;
} piece;

/* A new piece starting with message i; false when that message alone is too big. */
static bool piece_start(piece *p, size_t i, const convo_message_in *msgs, const int64_t *at)
{
    p->from = i;
    p->to = i + 1;
    p->m = bson_new();
    return add_message(p->m, 0, &msgs[i], false, at[i], PIECE_LIMIT);
}

/* Adds message i to p, or leaves p as it was and returns false when it would not fit. */
static bool piece_add(piece *p, size_t i, const convo_message_in *msgs, const int64_t *at)
{
    const int64_t base = at[p->from];
    if (add_message(p->m, (uint32_t)(i - p->from), &msgs[i], at[i] != base, at[i], PIECE_LIMIT)) {
        p->to = i + 1;
        return true;
    }
    bson_destroy(p->m); /* rebuild without the message that did not fit */
    p->m = bson_new();
    for (size_t j = p->from; j < p->to; j++)
        add_message(p->m, (uint32_t)(j - p->from), &msgs[j], at[j] != base, at[j], PIECE_LIMIT);
    return false;
}

/* Splits a chunk into pieces whose batch documents fit in 16 MiB (one piece,
 * stored atomically, unless the chunk is larger). */
static int split_chunk(call *c, const convo_message_in *msgs, const int64_t *at, size_t n,
                       piece **out, size_t *count)
{
    piece *p = NULL;
    size_t np = 0;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (np && piece_add(&p[np - 1], i, msgs, at))
            continue;
        piece *grown = realloc(p, (np + 1) * sizeof *p);
        if (!grown) {
            rc = no_memory(c);
            break;
        }
        p = grown;
        if (!piece_start(&p[np++], i, msgs, at))
            rc = convo__error(c->err, CONVO_ETOOLARGE, NULL,
                              "message %zu is larger than a MongoDB document (16 MiB)", i);
    }
    *out = p;
    *count = np;
    return rc;
}

static void pieces_free(piece *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        bson_destroy(p[i].m);
    free(p);
}

/* One try at storing a chunk at first_seq; resumes at a piece boundary a killed
 * import of the same chunk reached. */
static int import_attempt(call *c, const char *id, int64_t first_seq, const piece *p, size_t np,
                          const int64_t *at, int *skipped, bool *again)
{
    thread_doc t;
    batch_head top;
    int64_t now = now_ms(), end = first_seq + (int64_t)p[np - 1].to;
    size_t j = 0;
    int rc = writable_thread(c, id, false, true, &t, again);
    if (rc == 0 && !*again)
        rc = top_batch(c, &t.g, &top);
    if (rc || *again)
        goto out;
    if (top.found && top.fence) {
        rc = finish_delete(c, id, &t.g, false);
        *again = true;
        goto out;
    }
    int64_t length = top.found ? top.e : 0;
    if ((*skipped = length >= end))
        goto out;
    while (j < np && first_seq + (int64_t)p[j].from != length)
        j++;
    if (j == np) {
        rc = convo__error(c->err, CONVO_ECONFLICT, NULL,
                          "thread has %lld messages, the dump continues at %lld",
                          (long long)length, (long long)first_seq);
        goto out;
    }
    if ((rc = extend_expiry(c, id, &t, now, again)) != 0 || *again)
        goto out;
    for (; j < np && rc == 0 && !*again; j++) {
        bson_t doc;
        int64_t s = first_seq + (int64_t)p[j].from;
        build_batch(c->b, &t.g, s, p[j].to - p[j].from, NULL, at[p[j].from], now, p[j].m,
                    &doc);
        rc = insert_doc(c, c->batches, &doc, again, "importing messages");
        bson_destroy(&doc);
    }
    if (rc == 0 && !*again && !t.live)
        quietly(c, mark_live, id, &t.g, NULL);
out:
    thread_free(&t);
    return rc;
}

static int mongo_thread_import(convo_backend *b, const char *id, int64_t first_seq,
                               const convo_message_in *msgs, const int64_t *created_at, size_t n,
                               int *skipped, convo_error *err)
{
    call c;
    piece *p = NULL;
    size_t np = 0;
    call_begin(&c, b, err);
    *skipped = 0;
    int rc = split_chunk(&c, msgs, created_at, n, &p, &np);
    for (int attempt = 0; rc == 0; attempt++) {
        bool again = false;
        if (attempt == ATTEMPTS) {
            rc = contention(&c);
            break;
        }
        backoff(attempt);
        rc = import_attempt(&c, id, first_seq, p, np, created_at, skipped, &again);
        if (!again)
            break;
    }
    pieces_free(p, np);
    call_end(&c);
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
            rc = fail(c, &e, "reading collection sizes");
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
static int mongo_stored_bytes(convo_backend *b, int64_t *bytes, convo_error *err)
{
    call c;
    bool reported = true;
    call_begin(&c, b, err);
    *bytes = 0;
    int rc = collection_bytes(&c, b->threads_name, bytes, &reported);
    if (rc == 0)
        rc = collection_bytes(&c, b->meta_name, bytes, &reported);
    for (int k = 0; k < KINDS && rc == 0; k++)
        rc = collection_bytes(&c, b->kinds_name[k], bytes, &reported);
    call_end(&c);
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
static int mongo_bench_raw(convo_backend *b, const char *payload, size_t payload_len, size_t n,
                           double *seconds, convo_error *err)
{
    call c;
    char name[96];
    bson_error_t e;
    int rc = 0;
    call_begin(&c, b, err);
    snprintf(name, sizeof name, "%s_bench_%ld_%lld", b->meta_name, (long)getpid(),
             (long long)convo__now_micros());
    mongoc_collection_t *coll = mongoc_client_get_collection(c.client, b->database, name);
    double start = seconds_now();
    for (size_t i = 0; i < n && rc == 0; i++) {
        bson_t *doc = BCON_NEW("i", BCON_INT64((int64_t)i));
        BSON_APPEND_BINARY(doc, "p", BSON_SUBTYPE_BINARY, (const uint8_t *)payload,
                           (uint32_t)payload_len);
        if (!mongoc_collection_insert_one(coll, doc, NULL, NULL, &e))
            rc = fail(&c, &e, "inserting");
        bson_destroy(doc);
    }
    *seconds = seconds_now() - start;
    mongoc_collection_drop(coll, NULL);
    mongoc_collection_destroy(coll);
    call_end(&c);
    return rc;
}

static const char *const mongo_schemes[] = {"mongodb", "mongodb+srv", NULL};

const convo_driver convo_driver_mongo = {
    .version = CONVO_DRIVER_VERSION,
    .name = "mongo",
    .schemes = mongo_schemes,
    .open = mongo_open,
    .close = mongo_close,
    .append = mongo_append,
    .load = mongo_load,
    .save_extra = mongo_save_extra,
    .thread_delete = mongo_thread_delete,
    .thread_list = mongo_thread_list,
    .thread_fork = mongo_thread_fork,
    .checkpoint_put = mongo_checkpoint_put,
    .checkpoint_put_writes = mongo_checkpoint_put_writes,
    .checkpoint_get = mongo_checkpoint_get,
    .checkpoint_list = mongo_checkpoint_list,
    .checkpoint_prune = mongo_checkpoint_prune,
    .checkpoint_put_log = mongo_checkpoint_put_log,
    .bench_raw = mongo_bench_raw,
    .stored_bytes = mongo_stored_bytes,
    .thread_import = mongo_thread_import,
};
