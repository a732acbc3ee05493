/* pg_int.h — what the files of the PostgreSQL driver share: the open store
 * (pool, schema, statement texts, ttl), running a prepared statement, and
 * values in PostgreSQL's binary format. Not for use outside drivers/postgres. */
#ifndef CONVO_PG_INT_H
#define CONVO_PG_INT_H

#include <convo/driver.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdint.h>

/* PostgreSQL timestamps count microseconds from 2000-01-01, not 1970-01-01. */
#define PG_EPOCH_MICROS INT64_C(946684800000000)
#define OID_BOOL 16
#define OID_BYTEA 17
#define OID_INT8 20
#define OID_INT4 23
#define OID_TEXT 25
#define OID_TEXT_ARRAY 1009
#define OID_TIMESTAMPTZ 1184
#define TTL_LEN 16 /* an interval in binary: microseconds, days, months */
/* The longest message a thread row keeps as its preview (migrate-20.sql's
 * appended_preview()): append_plain.sql stores the body as it is, so longer
 * ones go to append_one.sql, which applies the cap. */
#define PREVIEW_MAX 1024
/* The appends' listed_at: their time's whole second, which keeps listed_at
 * <= updated_at < listed_at + listed_window() (migrate-17.sql: 1 s). */
#define LISTED_SECOND_MICROS INT64_C(1000000)

/* The prepared statements, one .sql file each (conn.c lists them). */
enum {
    ST_APPEND_ONE, ST_APPEND_MANY, ST_APPEND, ST_LOAD,
    ST_SAVE_EXTRA, ST_DELETE, ST_LIST, ST_FORK, ST_CP_PUT, ST_CP_WRITES, ST_CP_GET, ST_CP_LATEST,
    ST_CP_LIST, ST_CP_PRUNE, ST_IMPORT, ST_SWEEP, ST_CP_PUT_LOG, ST_REPLACE_TAIL,
    ST_REPLACE_TAIL_FAST, ST_CP_DELETE, ST_COPY, ST_CP_PUT_REFS, ST_APPEND_PLAIN, ST_CP_LIST_CHANNEL,
    ST_CP_NAMES, ST_CP_BLOBS, ST_CP_SEAL_ROWS, ST_CP_SEAL, ST_CP_UNSEAL_ROWS, ST_CP_UNSEAL,
    ST_COUNT
};

/* The thread index's statements (index.c), thread_list_*.sql filled in for
 * each shape: without a filter and with a where served by the GIN index, for
 * each order and direction (6 each), then with a where on declared key k in
 * activity order, both directions (LIST_KEY_SHAPE). At most 32 keys. */
#define LIST_NPARAMS 7
#define LIST_MAX_KEYS 32
#define LIST_KEY_SHAPE(k, reverse) (12 + 2 * (k) + (reverse))
#define LIST_SHAPES LIST_KEY_SHAPE(LIST_MAX_KEYS, 0)

typedef struct pg_conn {
    PGconn *pg;
    /* bit i: statement i (ST_*, then ST_COUNT + list shape) is prepared here */
    uint32_t prepared[(ST_COUNT + LIST_SHAPES + 31) / 32];
    int fatal;         /* the server said FATAL while the connection was idle */
    int64_t done_at;   /* monotonic microseconds when its last call succeeded; 0: never */
} pg_conn;

/* readback.c: the store's copy of checkpoint_names and checkpoint_channel_sets. */
typedef struct pg_names pg_names;

/* segments.c: a seal, after a put that leaves a namespace with PG_SEGMENT_HOT
 * rows and a multiple of PG_SEGMENT_ROWS more, packs its oldest rows but
 * PG_SEGMENT_HOT, PG_SEGMENT_ROWS a segment, at most PG_SEAL_MAX_SEGMENTS
 * segments at once */
#define PG_SEGMENT_ROWS 16
#define PG_SEGMENT_HOT 4
#define PG_SEAL_MAX_SEGMENTS 64
/* The put statements count a namespace's rows up to this many (their LIMIT 100),
 * so a put's cost does not grow with rows a seal cannot take (ids out of put
 * order); past it a seal is tried after one put in PG_SEGMENT_ROWS, chosen by
 * the checkpoint id's hash (checkpoints.c put_done). */
#define PG_SEAL_COUNT_MAX 100

struct convo_backend {
    convo_pool *pool;
    char *conninfo;     /* the URL for libpq: convo's parameters removed */
    char qschema[70];   /* "name", quoted */
    char schema[64];
    char *sql[ST_COUNT];
    char *list_sql[LIST_SHAPES]; /* NULL: a shape this store has not (no such key) */
    char **keys;                 /* the recorded index keys, sorted; NULL-terminated */
    size_t nkeys;
    /* keys and list_sql are read once (index.c): at open when the opener declares
     * keys, else by the first page, under index_lock */
    pthread_mutex_t index_lock;
    int index_read;
    convo_limits limits;
    char ttl_interval[16]; /* ttl=S as a binary interval parameter */
    const char *ttl;       /* ttl_interval, or NULL (SQL NULL) when threads never expire */
    unsigned long cp_puts; /* checkpoint puts through this handle (checkpoint_analyze.sql) */
    pg_names *names;       /* the names stored checkpoints' numbers stand for (readback.c) */
    /* segments.c: checkpoints a segment holds, the newest kept as rows */
    int seg_rows, seg_hot;
};

/* ---- conn.c: connections, errors, statements */

extern const convo_pool_ops convo__pg_pool_ops;

/* The text of a .sql file for this store: @S the quoted schema, @N its bare
 * name, @T table (when not NULL); caller frees; NULL when out of memory. */
char *convo__pg_fill(const convo_backend *b, const char *template, const char *table);
/* b->sql: the prepared statements' texts for this store. */
int convo__pg_statements_init(convo_backend *b);
/* Fills err from a failed result (or the connection when r is NULL). */
int convo__pg_fail(const convo_backend *b, PGconn *pg, const PGresult *r, convo_error *err);
int convo__pg_is_state(const PGresult *r, const char *state);
/* A connection from the pool, reconnected when the server dropped it idle;
 * back with convo__pool_release(b->pool, c, broken). */
int convo__pg_conn_get(convo_backend *b, pg_conn **out, convo_error *err);
/* sql (one or more statements, no parameters) on pg: 0 or convo__pg_fail(). */
int convo__pg_exec(const convo_backend *b, PGconn *pg, const char *sql, convo_error *err);
/* Prepared statement st (ST_*) with binary parameters and a binary result,
 * retried on serialization failures and deadlocks; *out is the caller's. */
int convo__pg_run(convo_backend *b, int st, const char *const *values, const int *lengths,
                  PGresult **out, convo_error *err);
/* convo__pg_run() for a statement that decodes stored checkpoints (ids,
 * versions) and whose texts the core checked: a value that does not decode
 * is CONVO_ECORRUPT, not class 22's CONVO_EINVAL. */
int convo__pg_run_stored(convo_backend *b, int st, const char *const *values,
                         const int *lengths, PGresult **out, convo_error *err);
/* The same for a statement that also takes text the core did not check (a
 * put_writes's value types, which may be not UTF-8: 22021 is the caller's,
 * CONVO_EINVAL) and decodes stored values past their ends (2202E, 22011). */
int convo__pg_run_stored_bytes(convo_backend *b, int st, const char *const *values,
                               const int *lengths, PGresult **out, convo_error *err);
/* The same for list shape `shape` (b->list_sql, LIST_NPARAMS typed parameters). */
int convo__pg_run_list(convo_backend *b, int shape, const char *const *values,
                       const int *lengths, PGresult **out, convo_error *err);

/* ---- values.c: binary values, compact JSON */

static inline void put32(char *p, uint32_t v)
{
    p[0] = (char)(v >> 24);
    p[1] = (char)(v >> 16);
    p[2] = (char)(v >> 8);
    p[3] = (char)v;
}

static inline void put64(char *p, uint64_t v)
{
    put32(p, (uint32_t)(v >> 32));
    put32(p + 4, (uint32_t)v);
}

/* A 4- or 8-byte integer column in binary. */
int64_t convo__pg_get_int(const PGresult *r, int row, int col);

/* A one-dimensional array in PostgreSQL's binary format (array_recv):
 * a header, then each element as length + bytes (-1 for NULL). */
typedef struct pg_array {
    char *buf;
    size_t len, cap;
    uint32_t count;
    int has_null;
    int failed; /* 1: out of memory, 2: over 1 GiB */
} pg_array;

void convo__pg_array_start(pg_array *a, uint32_t elem_oid, size_t size_hint);
/* bytes NULL: a NULL element. */
void convo__pg_array_add(pg_array *a, const void *bytes, size_t len);
/* The finished value, or NULL (freed) when it failed or grew past 1 GiB. */
char *convo__pg_array_finish(pg_array *a, int *len);

/* A malloc'd NUL-terminated compact copy of jsonb text column col, or NULL. */
char *convo__pg_compact_json(const PGresult *r, int row, int col, size_t *len);
/* The same for bytes [in, in+n). */
char *convo__pg_compact_json_bytes(const char *in, size_t n, size_t *len);
/* The message bodies (bytea[]) and their roles (text[]) as two array
 * parameters: 0, CONVO_ETOOLARGE (over 1 GiB) or CONVO_ENOMEM. */
int convo__pg_encode_batch(const convo_message_in *msgs, size_t n, char **bodies, int *blen,
                           char **roles, int *rlen);
/* The error of a failed encoding (rc: CONVO_ETOOLARGE or CONVO_ENOMEM). */
int convo__pg_too_large(int rc, convo_error *err);

/* ---- schema.c: migrations */

/* Brings the store's schema to this libconvo's version (CONVO_ENOTSUP when it
 * is newer). */
int convo__pg_migrate(convo_backend *b, convo_error *err);

/* ---- index.c: the thread index */

/* After the migrations: records the opener's declared keys (limits.indexed_keys)
 * or reads the recorded ones into b->keys, and fills b->list_sql. */
int convo__pg_index_open(convo_backend *b, convo_error *err);
void convo__pg_index_close(convo_backend *b);

/* ---- the driver's calls (postgres.c lists them in convo_driver_postgres) */

/* threads.c */
int convo__pg_append(convo_backend *b, const char *thread_id, const convo_message_in *msgs,
                     size_t n, const convo_append_opts *opts, convo_append_result *res,
                     convo_error *err);
int convo__pg_load(convo_backend *b, const char *thread_id, const convo_load_opts *opts,
                   convo_history **out, convo_error *err);
int convo__pg_save_extra(convo_backend *b, const char *thread_id, const char *patch,
                         void *patch_obj, convo_error *err);
int convo__pg_thread_delete(convo_backend *b, const char *thread_id, convo_error *err);
int convo__pg_thread_list(convo_backend *b, const char *after, size_t limit,
                          convo_thread_page **out, convo_error *err);
int convo__pg_thread_fork(convo_backend *b, const char *src, const char *dst, int64_t upto,
                          int64_t expected_generation, convo_error *err);
int convo__pg_thread_copy(convo_backend *b, const char *src, const char *dst, int64_t upto,
                          int64_t expected_generation, convo_error *err);
int convo__pg_replace_tail(convo_backend *b, const char *thread_id, int64_t keep,
                           const convo_message_in *msgs, size_t n, const convo_rewrite_opts *opts,
                           convo_rewrite_result *res, convo_error *err);
/* index.c */
int convo__pg_thread_list_ex(convo_backend *b, const convo_thread_list_opts *opts, void *where,
                             const convo_thread_cursor *after, convo_thread_page **out,
                             convo_error *err);
/* unpack.c: the packed columns of a checkpoint row (docs/postgres.md), each
 * function 0 or CONVO_ECORRUPT for bytes convo never writes (or CONVO_ENOMEM) */
typedef struct pg_chan {
    int32_t ch;          /* checkpoint_names number */
    const char *ver;     /* its stored version (ver_pack() bytes), in the row */
    size_t ver_len;
    int32_t type;        /* 0: no value in the row (checkpoint_blobs, or none) */
    const char *value;
    size_t len;
} pg_chan;
/* The n channels of set (its numbers, in order) with their versions and the
 * values vals holds (vals_null: a row of version 28, none). */
int convo__pg_unpack_channels(const int32_t *set, size_t n, const char *versions,
                              size_t vlen, const char *vals, size_t vals_len, int vals_null,
                              pg_chan *out);
typedef struct pg_write {
    int64_t idx;
    int32_t task_path, channel, type; /* checkpoint_names numbers */
    const char *task, *value;         /* id_pack() task id, the value: in the element */
    size_t task_len, len;
} pg_write;
/* One element of writes (NULL: corrupt). */
int convo__pg_unpack_write(const char *elem, size_t len, pg_write *w);
/* 1 and the element's channel number when its header reads, else 0. */
int convo__pg_write_channel(const char *elem, size_t len, int32_t *channel);
/* id_text() and ver_text() in C: *out malloc'd, NUL-terminated. */
int convo__pg_id_text(const char *p, size_t n, char **out);
int convo__pg_ver_text(const char *p, size_t n, char **out);
/* meta_text(): the metadata with meta_pack()'s fragments back, malloc'd. */
char *convo__pg_meta_text(const char *p, size_t n, size_t *len);
/* A one-dimensional array in binary (array_send): its elements (bytes NULL:
 * an SQL NULL) in *out, malloc'd, pointing into p. */
typedef struct pg_array_elem {
    const char *bytes;
    size_t len;
} pg_array_elem;
int convo__pg_unpack_array(const char *p, size_t n, pg_array_elem **out, size_t *count);

/* segments.c: checkpoint rows as cells, a result's own or a segment's */
enum { C_KIND, C_R, C_THREAD, C_NS, C_ID, C_PARENT, C_META, C_LOG, C_AT, C_BODY_TYPE, C_BODY,
       C_TID, C_SET, C_VERSIONS, C_VALS, C_WRITES, C_PUT, PG_NCOLS };
typedef struct pg_cell {
    const char *v;
    size_t len;
    int null;
} pg_cell;
typedef struct convo__seg convo__seg;
typedef struct pg_rows {
    size_t n, cap;
    pg_cell *cells;         /* n rows of PG_NCOLS */
    unsigned char *sealed;  /* per row: 1 when it came from a segment */
    convo__seg **segs;      /* the segments the cells point into */
    size_t nsegs, cap_segs;
} pg_rows;
typedef struct pg_read_opts {
    const char *id;     /* a get by id: a sealed checkpoint only with this id */
    int listing;        /* a listing: filtered, merged and cut as below */
    const char *before; /* its `before` */
    void *filter;       /* its metadata filter (json_t *), or NULL */
    size_t limit;       /* 0: none */
    int only_channel;   /* one channel's listing: no metadata nor body */
} pg_read_opts;
int64_t convo__pg_cell_int(const pg_cell *c);
/* The rows of a read statement (checkpoint_get.sql and the rest): its own
 * (kind 0) and its segments' checkpoints (kind 1); CONVO_ENOTFOUND when
 * `before` names none, CONVO_ECORRUPT (*why) for a segment that does not
 * decode. Freed with convo__pg_rows_free, before the result. */
int convo__pg_rows_read(const PGresult *r, const pg_read_opts *o, pg_rows *rows,
                        const char **why);
void convo__pg_rows_free(pg_rows *rows);
/* After a put: a seal of thread_id / ns when one is due by the rows the
 * namespace had before it (rows_before, the put statement's last column;
 * below 0: now); *sealed the rows sealed. A seal that meets a changed row
 * does nothing. */
int convo__pg_seal(convo_backend *b, const char *thread_id, const char *ns,
                   int64_t rows_before, int *sealed, convo_error *err);
/* Statement st run as convo__pg_run (how PG_RUN_PLAIN), _stored or
 * _stored_bytes (PG_RUN_BYTES); when it meets segments (CV042) the thread is
 * unsealed and st run again in one transaction. */
enum { PG_RUN_PLAIN, PG_RUN_STORED, PG_RUN_BYTES };
int convo__pg_run_unsealed(convo_backend *b, const char *thread_id, int st, int nparams,
                           const char *const *values, const int *lens, int how,
                           PGresult **out, convo_error *err);

/* readback.c */
int convo__pg_names_init(convo_backend *b);
void convo__pg_names_free(convo_backend *b);
/* A read of rows changed between its two statements: run it again. */
#define PG_READ_AGAIN 1
/* The checkpoints of rows (convo__pg_rows_read() of checkpoint_get.sql,
 * _latest, _list, _list_channel with only_channel) into set, or the one into
 * *single: CONVO_ECORRUPT (err says what), or PG_READ_AGAIN. */
int convo__pg_read_rows(convo_backend *b, const pg_rows *rows, const char *only_channel,
                        convo_checkpoint_set *set, convo_checkpoint **single, convo_error *err);

/* checkpoints.c */
int convo__pg_checkpoint_put(convo_backend *b, const convo_checkpoint_in *cp, convo_error *err);
int convo__pg_checkpoint_put_log(convo_backend *b, const convo_checkpoint_in *cp,
                                 const convo_message_in *msgs, convo_error *err);
int convo__pg_checkpoint_put_refs(convo_backend *b, const convo_checkpoint_in *cp,
                                  const convo_message_in *msgs, size_t nmsgs,
                                  const convo_swap *swaps, size_t nswaps, convo_error *err);
int convo__pg_checkpoint_put_writes(convo_backend *b, const char *thread_id, const char *ns,
                                    const char *checkpoint_id, const char *task_id,
                                    const char *task_path, const convo_write_in *writes,
                                    size_t n, convo_error *err);
int convo__pg_checkpoint_get(convo_backend *b, const char *thread_id, const char *ns,
                             const char *checkpoint_id, convo_checkpoint **out,
                             convo_error *err);
int convo__pg_checkpoint_list(convo_backend *b, const convo_checkpoint_list_opts *o,
                              void *filter, convo_checkpoint_set **out, convo_error *err);
int convo__pg_checkpoint_prune(convo_backend *b, const char *thread_id, size_t keep_last,
                               convo_error *err);
int convo__pg_checkpoint_delete(convo_backend *b, const char *thread_id, const char *const *ns,
                                const char *const *ids, size_t n, uint64_t *removed,
                                convo_error *err);
/* maint.c */
int convo__pg_thread_import(convo_backend *b, const char *thread_id, int64_t first_seq,
                            const convo_message_in *msgs, const int64_t *created_at, size_t n,
                            int64_t generation, int *skipped, convo_error *err);
/* An opener with a ttl: threads_by_expiry made if missing (migrate-26.sql). */
int convo__pg_expiry_open(convo_backend *b, convo_error *err);
int convo__pg_sweep(convo_backend *b, uint64_t *removed, convo_error *err);
int convo__pg_bench_raw(convo_backend *b, const char *payload, size_t payload_len, size_t n,
                        double *seconds, convo_error *err);
int convo__pg_stored_bytes(convo_backend *b, int64_t *bytes, convo_error *err);

#endif
