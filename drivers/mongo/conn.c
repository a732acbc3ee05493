/* conn.c — the MongoDB driver: calls (a pooled client), errors, small queries, generation ids. */
#include "mongo_int.h"

int64_t convo__mg_now_ms(void)
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

int convo__mg_fail(call *c, const bson_error_t *e, const char *what)
{
    char code[16];
    snprintf(code, sizeof code, "%u", e->code); /* the core masks passwords in the message */
    return convo__error(c->err, map_code(e), code, "MongoDB: %s failed: %s", what, e->message);
}

int convo__mg_corrupt(call *c, const char *what)
{
    return convo__error(c->err, CONVO_ECORRUPT, NULL, "MongoDB: %s", what);
}

int convo__mg_no_memory(call *c)
{
    return convo__error(c->err, CONVO_ENOMEM, NULL, "out of memory");
}

int convo__mg_contention(call *c)
{
    return convo__error(c->err, CONVO_EIO, NULL,
                        "MongoDB: gave up after %d attempts: too many concurrent writers",
                        ATTEMPTS);
}

int convo__mg_retry(call *c, int (*attempt)(call *c, const void *arg, bool *again),
                    const void *arg)
{
    for (int n = 0; n < ATTEMPTS; n++) {
        bool again = false;
        convo__mg_backoff(n);
        int rc = attempt(c, arg, &again);
        if (rc != 0 || !again)
            return rc;
    }
    return convo__mg_contention(c);
}

bool convo__mg_is_duplicate(const bson_error_t *e)
{
    return (e->domain == MONGOC_ERROR_SERVER || e->domain == MONGOC_ERROR_COLLECTION ||
            e->domain == MONGOC_ERROR_COMMAND) &&
           (e->code == 11000 || e->code == 11001);
}

/* A short pause after a few lost races, so contending writers spread out. */
void convo__mg_backoff(int attempt)
{
    if (attempt < 3)
        return;
    long us = 50L * (attempt < 40 ? attempt : 40) + convo__now_micros() % 500;
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

/* ---- calls and small queries ---- */

void convo__mg_call_begin(call *c, convo_backend *b, convo_error *err)
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
mongoc_collection_t *convo__mg_kind(call *c, int k)
{
    if (!c->kinds[k])
        c->kinds[k] = mongoc_client_get_collection(c->client, c->b->database, c->b->kinds_name[k]);
    return c->kinds[k];
}

void convo__mg_call_end(call *c)
{
    mongoc_collection_destroy(c->threads);
    for (int k = 0; k < KINDS; k++)
        mongoc_collection_destroy(c->kinds[k]);
    mongoc_collection_destroy(c->meta);
    mongoc_client_pool_push(c->b->pool, c->client);
}

/* The first document matching filter into *out (always initialized; destroy it). */
int convo__mg_find_one(call *c, mongoc_collection_t *coll, const bson_t *filter, const bson_t *opts,
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
        rc = convo__mg_fail(c, &e, what);
    mongoc_cursor_destroy(cur);
    return rc;
}

int convo__mg_insert_doc(call *c, mongoc_collection_t *coll, const bson_t *doc, bool *dup,
                      const char *what)
{
    bson_error_t e;
    *dup = false;
    if (mongoc_collection_insert_one(coll, doc, NULL, NULL, &e))
        return 0;
    if (convo__mg_is_duplicate(&e)) {
        *dup = true;
        return 0;
    }
    return convo__mg_fail(c, &e, what);
}

static int64_t reply_count(const bson_t *reply, const char *field)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, reply, field) && BSON_ITER_HOLDS_NUMBER(&it))
        return bson_iter_as_int64(&it);
    return 0;
}

/* Updates one document; *matched (may be NULL) gets how many matched. */
int convo__mg_update_one(call *c, mongoc_collection_t *coll, const bson_t *filter,
                      const bson_t *update, int64_t *matched, const char *what)
{
    bson_t reply;
    bson_error_t e;
    bool ok = mongoc_collection_update_one(coll, filter, update, NULL, &reply, &e);
    if (ok && matched)
        *matched = reply_count(&reply, "matchedCount");
    bson_destroy(&reply);
    return ok ? 0 : convo__mg_fail(c, &e, what);
}

/* Sends an update without waiting for its answer (write concern w: 0: the
 * server is told to send none), so it costs no round trip: the connection's
 * next command is read after it. For writes a reader repairs when they are
 * lost (the thread index after an append): an error is never known. */
int convo__mg_update_one_unacked(call *c, mongoc_collection_t *coll, const bson_t *filter,
                                 const bson_t *update, const char *what)
{
    bson_t *opts = BCON_NEW("writeConcern", "{", "w", BCON_INT32(0), "}");
    bson_error_t e;
    bool ok = mongoc_collection_update_one(coll, filter, update, opts, NULL, &e);
    bson_destroy(opts);
    return ok ? 0 : convo__mg_fail(c, &e, what);
}

int convo__mg_update_many(call *c, mongoc_collection_t *coll, const bson_t *filter,
                       const bson_t *update, const char *what)
{
    bson_error_t e;
    bool ok = mongoc_collection_update_many(coll, filter, update, NULL, NULL, &e);
    return ok ? 0 : convo__mg_fail(c, &e, what);
}

int convo__mg_delete_docs(call *c, mongoc_collection_t *coll, const bson_t *filter, bool many,
                       int64_t *deleted, const char *what)
{
    bson_t reply;
    bson_error_t e;
    bool ok = many ? mongoc_collection_delete_many(coll, filter, NULL, &reply, &e)
                   : mongoc_collection_delete_one(coll, filter, NULL, &reply, &e);
    if (ok && deleted)
        *deleted = reply_count(&reply, "deletedCount");
    bson_destroy(&reply);
    return ok ? 0 : convo__mg_fail(c, &e, what);
}

int64_t convo__mg_get_int(const bson_t *doc, const char *key, int64_t def)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_NUMBER(&it))
        return bson_iter_as_int64(&it);
    return def;
}

bool convo__mg_get_bool(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    return bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_BOOL(&it) && bson_iter_bool(&it);
}

int64_t convo__mg_get_date(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    if (bson_iter_init_find(&it, doc, key) && BSON_ITER_HOLDS_DATE_TIME(&it))
        return bson_iter_date_time(&it);
    return 0;
}

/* {g: g}: every document of one generation of a thread. */
bson_t *convo__mg_generation_filter(const bson_oid_t *g)
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
void convo__mg_new_generation(const char *id, bson_oid_t *g)
{
    uint8_t random[8];
    bson_oid_init(g, NULL); /* its process-unique bytes, should getentropy fail */
    if (getentropy(random, sizeof random) == 0)
        memcpy(g->bytes + 4, random, sizeof random);
    put_id_hash(id, g);
}

/* The range of g every generation of thread id falls in. */
void convo__mg_generation_range(const char *id, bson_oid_t *low, bson_oid_t *high)
{
    memset(low->bytes, 0x00, sizeof low->bytes);
    memset(high->bytes, 0xff, sizeof high->bytes);
    put_id_hash(id, low);
    put_id_hash(id, high);
}
