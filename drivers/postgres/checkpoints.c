/* checkpoints.c — the PostgreSQL driver's checkpoint calls: put (with messages
 * in one transaction: put_log), pending writes, get, list and prune; a
 * checkpoint comes back as its row, decoded by readback.c. */
#include "config.h"
#include "pg_int.h"
#include "drivers/postgres/sql.h"
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static const void *bytes_or_empty(const void *bytes)
{
    return bytes ? bytes : ""; /* NULL would be an SQL NULL, not zero bytes */
}

/* A checkpoint body as stored (layout v7, docs/postgres.md): one byte 0 and
 * the body as given, or, when deflating makes it smaller, one byte 1, the
 * body's length (4 bytes, big-endian) and its zlib stream. PostgreSQL
 * compresses nothing in a row under about 2 kB, and bodies are mostly JSON or
 * msgpack: a LangGraph-shaped body of 526 bytes is stored in 210. */
enum { BODY_AS_GIVEN = 0, BODY_DEFLATED = 1, BODY_DEFLATE_MIN = 64 };

/* src deflated into dst (room for compressBound(len)) as a zlib stream: its
 * length, 0 on failure. The window and hash table are sized to the body (a
 * default deflate state is about 256 kB, allocated and cleared on each call:
 * slower than the rest of a put for a body of a few hundred bytes). */
static uLong deflate_into(char *dst, uLong room, const void *src, size_t len)
{
    int wbits = 9;
    while (wbits < 15 && ((size_t)1 << wbits) < len)
        wbits++;
    int mem = wbits - 6 < 1 ? 1 : wbits - 6 > 8 ? 8 : wbits - 6;
    z_stream z;
    memset(&z, 0, sizeof z);
    if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, wbits, mem, Z_DEFAULT_STRATEGY) != Z_OK)
        return 0;
    z.next_in = (Bytef *)src;
    z.avail_in = (uInt)len;
    z.next_out = (Bytef *)dst;
    z.avail_out = (uInt)room;
    int st = deflate(&z, Z_FINISH);
    uLong out = st == Z_STREAM_END ? z.total_out : 0;
    deflateEnd(&z);
    return out;
}

static int body_encode(const convo_blob *body, char **out, int *out_len)
{
    size_t len = body->len;
    if (len > (size_t)INT_MAX - 16)
        return CONVO_ETOOLARGE;
    uLong bound = len >= BODY_DEFLATE_MIN && len <= UINT32_MAX ? compressBound((uLong)len) : 0;
    char *buf = malloc(1 + (bound > len ? bound + 4 : len));
    if (!buf)
        return CONVO_ENOMEM;
    uLong zlen = bound > 0 ? deflate_into(buf + 5, bound, body->bytes, len) : 0;
    if (zlen > 0 && 5 + zlen < 1 + len) {
        buf[0] = BODY_DEFLATED;
        put32(buf + 1, (uint32_t)len);
        *out_len = (int)(5 + zlen);
    } else {
        buf[0] = BODY_AS_GIVEN;
        if (len > 0)
            memcpy(buf + 1, body->bytes, len);
        *out_len = (int)(1 + len);
    }
    *out = buf;
    return 0;
}

/* Every channel's name and version, and type and value where it brings one. */
static int encode_channels(const convo_checkpoint_in *cp, char *out[4], int lens[4])
{
    size_t total = 0;
    for (size_t i = 0; i < cp->nchannels; i++)
        total += 4 + (cp->channels[i].value ? cp->channels[i].value->len : 0);
    pg_array a[4];
    convo__pg_array_start(&a[0], OID_TEXT, cp->nchannels * 16);
    convo__pg_array_start(&a[1], OID_TEXT, cp->nchannels * 16);
    convo__pg_array_start(&a[2], OID_TEXT, cp->nchannels * 16);
    convo__pg_array_start(&a[3], OID_BYTEA, total);
    for (size_t i = 0; i < cp->nchannels; i++) {
        const convo_channel_in *c = &cp->channels[i];
        convo__pg_array_add(&a[0], c->channel, strlen(c->channel));
        convo__pg_array_add(&a[1], c->version, strlen(c->version));
        convo__pg_array_add(&a[2], c->value ? c->value->type : NULL,
                            c->value ? strlen(c->value->type) : 0);
        convo__pg_array_add(&a[3], c->value ? bytes_or_empty(c->value->bytes) : NULL,
                            c->value ? c->value->len : 0);
    }
    int rc = 0;
    for (int i = 0; i < 4; i++) {
        if (a[i].failed)
            rc = a[i].failed == 2 ? CONVO_ETOOLARGE : CONVO_ENOMEM;
        out[i] = convo__pg_array_finish(&a[i], &lens[i]);
    }
    if (rc != 0)
        for (int i = 0; i < 4; i++)
            free(out[i]), out[i] = NULL;
    return rc;
}

/* The parameters of @S.checkpoint_put, the store's ttl last (14); the
 * arrays are the caller's to free, also when this fails. */
typedef struct cp_params {
    const char *values[14];
    int lens[14];
    char *arrays[4];
    char *body; /* as stored: body_encode() */
    char log_length[8], at[8];
} cp_params;

static int checkpoint_params(const convo_backend *b, const convo_checkpoint_in *cp,
                             cp_params *p)
{
    int rc = encode_channels(cp, p->arrays, &p->lens[8]);
    if (rc != 0)
        return rc;
    int body_len = 0;
    if (cp->body.type && (rc = body_encode(&cp->body, &p->body, &body_len)) != 0)
        return rc;
    put64(p->log_length, (uint64_t)cp->log_length);
    put64(p->at, (uint64_t)(convo__now_micros() - PG_EPOCH_MICROS));
    const char *values[14] = {cp->thread_id, cp->checkpoint_ns, cp->checkpoint_id,
                              cp->parent_id, cp->metadata_json, cp->body.type,
                              p->body, p->log_length, p->arrays[0], p->arrays[1], p->arrays[2],
                              p->arrays[3], p->at, b->ttl};
    memcpy(p->values, values, sizeof values);
    for (int i = 0; i < 6; i++)
        p->lens[i] = values[i] ? (int)strlen(values[i]) : 0;
    p->lens[6] = body_len;
    p->lens[7] = 8;
    p->lens[12] = 8;
    p->lens[13] = TTL_LEN;
    return 0;
}

static void checkpoint_params_free(cp_params *p)
{
    for (int i = 0; i < 4; i++)
        free(p->arrays[i]);
    free(p->body);
}

/* After this handle's ANALYZE_AFTER_PUTS-th checkpoint put, once:
 * checkpoint_analyze.sql (an ANALYZE of a checkpoints table the server never
 * analyzed, so that gets by id are planned on the primary key). A failure is
 * not the put's: it is dropped. */
#define ANALYZE_AFTER_PUTS 128

/* After a put (r its result, then cleared): a seal when one is due by the
 * rows its namespace had, the statement's last column (schema 42; its own
 * statements, and the put has succeeded whatever it meets: a seal not done is
 * done later), and the statistics once. */
static void put_done(convo_backend *b, const convo_checkpoint_in *cp, PGresult *r)
{
    int sealed, last = PQnfields(r) - 1;
    int64_t rows_before = last >= 1 && PQntuples(r) == 1 && !PQgetisnull(r, 0, last)
                              ? convo__pg_get_int(r, 0, last)
                              : 0;
    PQclear(r);
    if (rows_before >= PG_SEAL_COUNT_MAX) {
        /* past the statement's count: a seal is tried after one put in
         * PG_SEGMENT_ROWS, chosen by the id's hash (whoever puts), so a thread
         * of rows from before schema 42 is sealed too, and one whose ids are
         * out of put order pays a try no more often than below the count */
        uint32_t h = 2166136261u;
        for (const char *p = cp->checkpoint_id; *p; p++)
            h = (h ^ (unsigned char)*p) * 16777619u;
        if ((h ^ (h >> 16)) % PG_SEGMENT_ROWS == 0)
            rows_before = -1; /* now */
    }
    (void)convo__pg_seal(b, cp->thread_id, cp->checkpoint_ns ? cp->checkpoint_ns : "",
                         rows_before, &sealed, NULL);
    if (__atomic_add_fetch(&b->cp_puts, 1, __ATOMIC_RELAXED) != ANALYZE_AFTER_PUTS)
        return;
    char *sql = convo__pg_fill(b, SQL_CHECKPOINT_ANALYZE, NULL);
    pg_conn *c;
    convo_error ignored;
    memset(&ignored, 0, sizeof ignored);
    if (sql && convo__pg_conn_get(b, &c, &ignored) == 0) {
        (void)convo__pg_exec(b, c->pg, sql, &ignored);
        convo__pool_release(b->pool, c, PQstatus(c->pg) != CONNECTION_OK);
    }
    free(sql);
}

int convo__pg_checkpoint_put(convo_backend *b, const convo_checkpoint_in *cp, convo_error *err)
{
    cp_params p = {0};
    int rc = checkpoint_params(b, cp, &p);
    if (rc != 0)
        return convo__pg_too_large(rc, err);
    PGresult *r;
    rc = convo__pg_run_unsealed(b, cp->thread_id, ST_CP_PUT, 14, p.values, p.lens, PG_RUN_PLAIN,
                                &r, err);
    checkpoint_params_free(&p);
    if (rc == 0) {
        put_done(b, cp, r);
    }
    return rc;
}

/* The 18 parameters of @S.checkpoint_put_log(), also the first 18 of
 * @S.checkpoint_put_refs(): the checkpoint's, the nmsgs messages (none: empty
 * arrays), the expected length and generation, then time and ttl. */
typedef struct log_params {
    cp_params cp;
    char *bodies, *roles, expected[8], generation[8];
    const char *values[18];
    int lens[18];
} log_params;

static void log_params_free(log_params *p)
{
    checkpoint_params_free(&p->cp);
    free(p->bodies);
    free(p->roles);
}

static int log_params_make(const convo_backend *b, const convo_checkpoint_in *cp,
                           const convo_message_in *msgs, size_t nmsgs, log_params *p)
{
    int blen = 0, rlen = 0;
    int rc = checkpoint_params(b, cp, &p->cp);
    if (rc == 0)
        rc = convo__pg_encode_batch(msgs, nmsgs, &p->bodies, &blen, &p->roles, &rlen);
    if (rc != 0)
        return rc;
    put64(p->expected, (uint64_t)cp->expected_length);
    put64(p->generation, (uint64_t)cp->expected_generation);
    memcpy(p->values, p->cp.values, 12 * sizeof *p->values);
    memcpy(p->lens, p->cp.lens, 12 * sizeof *p->lens);
    p->values[12] = p->bodies, p->lens[12] = blen;
    p->values[13] = p->roles, p->lens[13] = rlen;
    p->values[14] = p->expected, p->lens[14] = 8;
    p->values[15] = p->generation, p->lens[15] = 8;
    p->values[16] = p->cp.values[12], p->lens[16] = p->cp.lens[12]; /* at */
    p->values[17] = p->cp.values[13], p->lens[17] = p->cp.lens[13]; /* ttl */
    return 0;
}

/* @S.checkpoint_put_log(): one statement, one transaction. */
int convo__pg_checkpoint_put_log(convo_backend *b, const convo_checkpoint_in *cp,
                                 const convo_message_in *msgs, convo_error *err)
{
    log_params p = {0};
    int rc = log_params_make(b, cp, msgs, cp->nmessages, &p);
    if (rc != 0) {
        log_params_free(&p);
        return convo__pg_too_large(rc, err);
    }
    PGresult *r;
    rc = convo__pg_run_unsealed(b, cp->thread_id, ST_CP_PUT_LOG, 18, p.values, p.lens,
                                PG_RUN_PLAIN, &r, err);
    log_params_free(&p);
    if (rc == 0) {
        put_done(b, cp, r);
    }
    return rc;
}

enum { SWAP_ARRAYS = 10 };

/* The swaps as the ten arrays of @S.checkpoint_put_refs(), one element
 * each: checkpoint id, task id (NULL for a channel value), idx, channel and
 * version (NULL for a pending write), old type and bytes, new type and bytes,
 * log length. */
static int encode_swaps(const convo_swap *swaps, size_t n, char *out[SWAP_ARRAYS],
                        int lens[SWAP_ARRAYS])
{
    static const uint32_t oids[SWAP_ARRAYS] = {OID_TEXT, OID_TEXT,  OID_INT8, OID_TEXT,
                                               OID_TEXT, OID_TEXT,  OID_BYTEA, OID_TEXT,
                                               OID_BYTEA, OID_INT8};
    pg_array a[SWAP_ARRAYS];
    for (int k = 0; k < SWAP_ARRAYS; k++)
        convo__pg_array_start(&a[k], oids[k], n * 16);
    for (size_t i = 0; i < n; i++) {
        const convo_swap *w = &swaps[i];
        char idx[8], log_length[8];
        put64(idx, (uint64_t)(w->task_id ? w->idx : 0));
        put64(log_length, (uint64_t)w->log_length);
        const char *ch = w->task_id ? NULL : w->channel, *ver = w->task_id ? NULL : w->version;
        convo__pg_array_add(&a[0], w->checkpoint_id, strlen(w->checkpoint_id));
        convo__pg_array_add(&a[1], w->task_id, w->task_id ? strlen(w->task_id) : 0);
        convo__pg_array_add(&a[2], idx, 8);
        convo__pg_array_add(&a[3], ch, ch ? strlen(ch) : 0);
        convo__pg_array_add(&a[4], ver, ver ? strlen(ver) : 0);
        convo__pg_array_add(&a[5], w->old_value.type, strlen(w->old_value.type));
        convo__pg_array_add(&a[6], bytes_or_empty(w->old_value.bytes), w->old_value.len);
        convo__pg_array_add(&a[7], w->new_value.type, strlen(w->new_value.type));
        convo__pg_array_add(&a[8], bytes_or_empty(w->new_value.bytes), w->new_value.len);
        convo__pg_array_add(&a[9], log_length, 8);
    }
    int rc = 0;
    for (int k = 0; k < SWAP_ARRAYS; k++) {
        if (a[k].failed)
            rc = a[k].failed == 2 ? CONVO_ETOOLARGE : CONVO_ENOMEM;
        out[k] = convo__pg_array_finish(&a[k], &lens[k]);
    }
    if (rc != 0)
        for (int k = 0; k < SWAP_ARRAYS; k++)
            free(out[k]), out[k] = NULL;
    return rc;
}

/* @S.checkpoint_put_refs(): the put (with the nmsgs messages, or as
 * checkpoint_put when none), its generation condition and the swaps in one
 * statement, so one transaction: a failure anywhere leaves nothing. */
int convo__pg_checkpoint_put_refs(convo_backend *b, const convo_checkpoint_in *cp,
                                  const convo_message_in *msgs, size_t nmsgs,
                                  const convo_swap *swaps, size_t nswaps, convo_error *err)
{
    log_params p = {0};
    char *arrays[SWAP_ARRAYS] = {0};
    const char *values[18 + SWAP_ARRAYS];
    int lens[18 + SWAP_ARRAYS];
    int rc = log_params_make(b, cp, msgs, nmsgs, &p);
    if (rc == 0)
        rc = encode_swaps(swaps, nswaps, arrays, &lens[18]);
    if (rc == 0) {
        memcpy(values, p.values, sizeof p.values);
        memcpy(lens, p.lens, sizeof p.lens);
        for (int k = 0; k < SWAP_ARRAYS; k++)
            values[18 + k] = arrays[k];
        PGresult *r;
        if ((rc = convo__pg_run_unsealed(b, cp->thread_id, ST_CP_PUT_REFS, 18 + SWAP_ARRAYS,
                                         values, lens, PG_RUN_PLAIN, &r, err)) == 0) {
            put_done(b, cp, r);
        }
    } else {
        rc = convo__pg_too_large(rc, err);
    }
    log_params_free(&p);
    for (int k = 0; k < SWAP_ARRAYS; k++)
        free(arrays[k]);
    return rc;
}

static int encode_writes(const convo_write_in *writes, size_t n, char *out[4], int lens[4])
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += 4 + writes[i].value.len;
    pg_array a[4];
    convo__pg_array_start(&a[0], OID_INT8, n * 12);
    convo__pg_array_start(&a[1], OID_TEXT, n * 16);
    convo__pg_array_start(&a[2], OID_TEXT, n * 16);
    convo__pg_array_start(&a[3], OID_BYTEA, total);
    for (size_t i = 0; i < n; i++) {
        char idx[8];
        put64(idx, (uint64_t)writes[i].idx);
        convo__pg_array_add(&a[0], idx, 8);
        convo__pg_array_add(&a[1], writes[i].channel, strlen(writes[i].channel));
        convo__pg_array_add(&a[2], writes[i].value.type, strlen(writes[i].value.type));
        convo__pg_array_add(&a[3], bytes_or_empty(writes[i].value.bytes), writes[i].value.len);
    }
    int rc = 0;
    for (int i = 0; i < 4; i++) {
        if (a[i].failed)
            rc = a[i].failed == 2 ? CONVO_ETOOLARGE : CONVO_ENOMEM;
        out[i] = convo__pg_array_finish(&a[i], &lens[i]);
    }
    if (rc != 0)
        for (int i = 0; i < 4; i++)
            free(out[i]), out[i] = NULL;
    return rc;
}

int convo__pg_checkpoint_put_writes(convo_backend *b, const char *thread_id, const char *ns,
                                    const char *checkpoint_id, const char *task_id,
                                    const char *task_path, const convo_write_in *writes,
                                    size_t n, convo_error *err)
{
    char *arrays[4];
    int lens[10];
    int rc = encode_writes(writes, n, arrays, &lens[5]);
    if (rc != 0)
        return convo__pg_too_large(rc, err);
    const char *values[10] = {thread_id, ns, checkpoint_id, task_id, task_path,
                              arrays[0], arrays[1], arrays[2], arrays[3], b->ttl};
    lens[9] = TTL_LEN;
    for (int i = 0; i < 5; i++)
        lens[i] = (int)strlen(values[i]);
    PGresult *r;
    /* the merge reads the stored elements (write_fields(): 2202E); a sealed
     * checkpoint is unsealed for its writes */
    rc = convo__pg_run_unsealed(b, thread_id, ST_CP_WRITES, 10, values, lens, PG_RUN_BYTES, &r,
                                err);
    for (int i = 0; i < 4; i++)
        free(arrays[i]);
    if (rc == 0)
        PQclear(r);
    return rc;
}

/* The reads: a statement that gives checkpoint rows as stored, then
 * readback.c's decoding, again when a row changed between the rows and the
 * values read from checkpoint_blobs (a concurrent swap, prune or delete). */
enum { READ_ATTEMPTS = 8 };

int convo__pg_checkpoint_get(convo_backend *b, const char *thread_id, const char *ns,
                             const char *checkpoint_id, convo_checkpoint **out, convo_error *err)
{
    const char *values[3] = {thread_id, ns, checkpoint_id};
    int lens[3] = {(int)strlen(thread_id), (int)strlen(ns),
                   checkpoint_id ? (int)strlen(checkpoint_id) : 0};
    int rc = PG_READ_AGAIN;
    convo_checkpoint *cp = NULL;
    for (int attempt = 0; rc == PG_READ_AGAIN && attempt < READ_ATTEMPTS; attempt++) {
        PGresult *r;
        rc = convo__pg_run_stored(b, checkpoint_id ? ST_CP_GET : ST_CP_LATEST, values, lens, &r,
                                  err);
        if (rc != 0)
            return rc;
        pg_read_opts o = {.id = checkpoint_id};
        pg_rows rows;
        const char *why = NULL;
        rc = convo__pg_rows_read(r, &o, &rows, &why);
        if (rc == 0 && rows.n == 0)
            rc = CONVO_ENOTFOUND;
        if (rc == 0)
            rc = convo__pg_read_rows(b, &rows, NULL, NULL, &cp, err);
        else if (rc == CONVO_ECORRUPT)
            rc = convo__error(err, rc, NULL, "postgres: a stored checkpoint is corrupt (%s)", why);
        convo__pg_rows_free(&rows);
        PQclear(r);
    }
    if (rc == CONVO_ENOTFOUND)
        return convo__error(err, rc, NULL, "checkpoint not found");
    if (rc == PG_READ_AGAIN)
        return convo__error(err, CONVO_ECONFLICT, NULL,
                            "postgres: the checkpoint changed under %d reads", READ_ATTEMPTS);
    if (rc != 0) {
        convo_checkpoint_free(cp);
        return rc;
    }
    *out = cp;
    return 0;
}

/* One listing: the statement's rows into a new set (*out). */
static int list_once(convo_backend *b, const convo_checkpoint_list_opts *o, void *filter,
                     const char *const *values, const int *lens, convo_checkpoint_set **out,
                     convo_error *err)
{
    PGresult *r;
    convo_error e = {0}; /* the SQLSTATE even when err is NULL */
    /* only_channel: a statement of its own that carries no metadata nor body
     * (checkpoint_list_channel.sql); the driver decodes that channel alone */
    int rc = convo__pg_run_stored(b, o->only_channel ? ST_CP_LIST_CHANNEL : ST_CP_LIST, values,
                                  lens, &r, &e);
    /* the core checked the filter: 22P02 is a stored metadata text (v36) that
     * meta_jsonb() cannot read as JSON */
    if (rc != 0 && o->filter_json && strcmp(e.backend_code, "22P02") == 0)
        return convo__error(err, CONVO_ECORRUPT, e.backend_code,
                            "postgres: a stored checkpoint's metadata does not decode as JSON");
    if (rc != 0) {
        if (err)
            *err = e;
        return rc;
    }
    pg_read_opts ro = {.listing = 1, .before = o->before, .filter = filter, .limit = o->limit,
                       .only_channel = o->only_channel != NULL};
    pg_rows rows;
    const char *why = NULL;
    rc = convo__pg_rows_read(r, &ro, &rows, &why);
    convo_checkpoint_set *set = rc == 0 ? convo__checkpoint_set_new() : NULL;
    if (rc == CONVO_ECORRUPT)
        rc = convo__error(err, rc, NULL, "postgres: a stored checkpoint is corrupt (%s)", why);
    else if (rc == 0)
        rc = set ? convo__pg_read_rows(b, &rows, o->only_channel, set, NULL, err)
                 : convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    convo__pg_rows_free(&rows);
    PQclear(r);
    if (rc != 0) {
        convo_checkpoint_set_free(set);
        return rc;
    }
    *out = set;
    return 0;
}

int convo__pg_checkpoint_list(convo_backend *b, const convo_checkpoint_list_opts *o,
                              void *filter, convo_checkpoint_set **out, convo_error *err)
{
    /* the server applies the filter to rows (metadata @> filter), the driver
     * to sealed checkpoints */
    char limit[8];
    put64(limit, (uint64_t)o->limit);
    const char *values[7] = {o->thread_id, o->checkpoint_ns, o->before, o->filter_json,
                             o->limit ? limit : NULL, o->before_thread_id, o->before_ns};
    int lens[7] = {0, 0, 0, 0, 8, 0, 0};
    for (int i = 0; i < 7; i++)
        if (i != 4)
            lens[i] = values[i] ? (int)strlen(values[i]) : 0;
    int rc = PG_READ_AGAIN;
    for (int attempt = 0; rc == PG_READ_AGAIN && attempt < READ_ATTEMPTS; attempt++)
        rc = list_once(b, o, filter, values, lens, out, err);
    if (rc == CONVO_ENOTFOUND)
        return convo__error(err, rc, NULL, "checkpoint '%s' not found", o->before);
    if (rc == PG_READ_AGAIN)
        return convo__error(err, CONVO_ECONFLICT, NULL,
                            "postgres: the checkpoints changed under %d reads", READ_ATTEMPTS);
    return rc;
}

int convo__pg_checkpoint_prune(convo_backend *b, const char *thread_id, size_t keep_last,
                               convo_error *err)
{
    char keep[8];
    put64(keep, keep_last > INT64_MAX ? (uint64_t)INT64_MAX : (uint64_t)keep_last);
    const char *values[3] = {thread_id, keep, b->ttl};
    const int lens[3] = {(int)strlen(thread_id), 8, TTL_LEN};
    PGresult *r;
    int rc = convo__pg_run_unsealed(b, thread_id, ST_CP_PRUNE, 3, values, lens, PG_RUN_STORED, &r,
                                    err);
    if (rc == 0)
        PQclear(r);
    return rc;
}

int convo__pg_checkpoint_delete(convo_backend *b, const char *thread_id, const char *const *ns,
                                const char *const *ids, size_t n, uint64_t *removed,
                                convo_error *err)
{
    *removed = 0;
    pg_array a[2];
    convo__pg_array_start(&a[0], OID_TEXT, n * 8);
    convo__pg_array_start(&a[1], OID_TEXT, n * 40);
    for (size_t i = 0; i < n; i++) {
        convo__pg_array_add(&a[0], ns[i], strlen(ns[i]));
        convo__pg_array_add(&a[1], ids[i], strlen(ids[i]));
    }
    int failed = a[0].failed || a[1].failed, lens[4] = {(int)strlen(thread_id), 0, 0, TTL_LEN};
    char *arrays[2] = {convo__pg_array_finish(&a[0], &lens[1]),
                       convo__pg_array_finish(&a[1], &lens[2])};
    const char *values[4] = {thread_id, arrays[0], arrays[1], b->ttl};
    PGresult *r = NULL;
    int rc = failed || !arrays[0] || !arrays[1]
                 ? convo__error(err, CONVO_ENOMEM, NULL, "out of memory")
                 : convo__pg_run_unsealed(b, thread_id, ST_CP_DELETE, 4, values, lens,
                                          PG_RUN_STORED, &r, err);
    if (rc == 0) {
        *removed = (uint64_t)convo__pg_get_int(r, 0, 0);
        PQclear(r);
    }
    free(arrays[0]);
    free(arrays[1]);
    return rc;
}
