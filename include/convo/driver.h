/* convo/driver.h — the interface between libconvo's core and a storage driver.
 * For driver authors only (not installed); applications include <convo.h>.
 * The core validates every input (thread ids, JSON, roles, limits) before a
 * driver sees it. */
#ifndef CONVO_DRIVER_H
#define CONVO_DRIVER_H

#include <stdarg.h>
#include <stdbool.h>
#include <convo.h>

#ifdef __cplusplus
extern "C" {
#endif

/* A message that passed validation: bytes exactly as the caller gave them. */
typedef struct convo_message_in {
    const char *bytes;
    size_t len;
    const char *role; /* NUL-terminated copy of the "role" field */
} convo_message_in;

/* Limits in force for a store (defaults applied). */
/* Called around a wait of the driver's (convo__wait_begin / _end). */
typedef struct convo_wait_hooks {
    void *(*enter)(void);
    void (*leave)(void *entered);
} convo_wait_hooks;

typedef struct convo_limits {
    size_t max_message_bytes;
    size_t max_batch_messages;
    size_t max_extra_bytes;
    size_t max_checkpoint_bytes;
    /* The extra keys the opener declared for the thread index (NULL-terminated,
     * validated, sorted, no duplicates), or NULL when it declared none. A driver
     * that keeps per-key indexes records them in the store at the first open
     * that declares them, uses the recorded ones when NULL, and refuses other
     * ones with CONVO_EINVAL. */
    char *const *indexed_keys;
    /* The opener's wait hooks (convo_store_opts version 3), both NULL or both set. */
    convo_wait_hooks wait;
} convo_limits;

/* A position in a thread listing (convo_thread_list_ex): the row's sort time
 * (updated_at or created_at, microseconds; 0 in id order) and its id. */
typedef struct convo_thread_cursor {
    int64_t time;
    const char *id;
} convo_thread_cursor;

/* A parsed URL: scheme, the part after "scheme:" without the query, and the
 * query parameters. Drivers take their own parameters out with
 * convo__url_take(); whatever is left is handed to the client library or,
 * when the driver owns all parameters, rejected with convo__url_reject_rest(). */
typedef struct convo_url_param {
    char *key;
    char *value;
} convo_url_param;

typedef struct convo_url {
    char *scheme;      /* "sqlite", "redis", ... */
    char *rest;        /* after "scheme:" up to '?', percent-encoding kept */
    char *user;        /* for "//" URLs: decoded user or NULL */
    char *password;    /* decoded password or NULL */
    char *host;        /* decoded host (brackets removed) or NULL */
    int port;          /* 0 when absent */
    char *path;        /* decoded path after host, without the leading '/', or NULL */
    convo_url_param *params;
    size_t nparams;
    char *redacted;    /* the whole URL with the password replaced by "***" */
} convo_url;

typedef struct convo_backend convo_backend; /* a driver's open instance */

/* Version 2 added the checkpoint calls at the end of the table, version 3 the
 * checkpoint put that appends to the log, version 4 the tail rewrite and the
 * thread generation, version 5 the thread index, version 6 the checkpoint
 * delete and the fork with checkpoints, version 7 the put with log references
 * (checkpoint_put_refs); the core answers CONVO_ENOTSUP for them when a driver
 * is older or leaves them NULL (but see thread_copy and checkpoint_put_refs). */
#define CONVO_DRIVER_VERSION 7

/* A value of the parent checkpoint that a put with log references turns into a
 * reference (lib/items.c plans it): a pending write (task_id non-NULL) or a
 * channel value (task_id NULL: channel and version). */
typedef struct convo_swap {
    const char *checkpoint_id; /* in the put's thread and namespace */
    const char *task_id;       /* a pending write (task_id, idx) of checkpoint_id ... */
    int64_t idx;
    const char *channel;       /* ... or the value of (channel, version) */
    const char *version;
    convo_blob old_value;      /* replaced only while the stored value is exactly this */
    convo_blob new_value;
    int64_t log_length;        /* checkpoint_id's log_length is raised to at least this */
} convo_swap;

typedef struct convo_driver {
    unsigned int version; /* CONVO_DRIVER_VERSION the driver was built against */
    const char *name;
    const char *const *schemes; /* NULL-terminated */

    int (*open)(convo_backend **out, convo_url *url, const convo_limits *limits,
                convo_error *err);
    void (*close)(convo_backend *b);

    /* msgs already validated, n >= 1; opts never NULL (defaults filled, version
     * set to CONVO_APPEND_OPTS_VERSION): with expected_generation >= 0 the append
     * is CONVO_ECONFLICT (nothing written) unless the thread's generation is that
     * (a missing thread has generation 0). An idempotency key that matches an
     * earlier batch answers its result before any condition is checked. */
    int (*append)(convo_backend *b, const char *thread_id, const convo_message_in *msgs,
                  size_t n, const convo_append_opts *opts, convo_append_result *res,
                  convo_error *err);
    /* opts never NULL; tail already resolved by the driver against the length.
     * Sets the generation (convo__history_set_generation) read in the same
     * snapshot as the messages. */
    int (*load)(convo_backend *b, const char *thread_id, const convo_load_opts *opts,
                convo_history **out, convo_error *err);
    /* patch: compact JSON text of a validated object (it may be empty: {} still
     * creates the thread);
     * patch_obj: the same object parsed (a jansson json_t *). */
    int (*save_extra)(convo_backend *b, const char *thread_id, const char *patch,
                      void *patch_obj, convo_error *err);
    int (*thread_delete)(convo_backend *b, const char *thread_id, convo_error *err);
    int (*thread_list)(convo_backend *b, const char *after, size_t limit,
                       convo_thread_page **out, convo_error *err);
    /* upto already checked >= -1; the driver checks it against the length.
     * expected_generation -1 = any; else CONVO_ECONFLICT unless src has it. The
     * messages copied are all of one generation of src (a rewrite racing the
     * fork makes it fail or wait, never mix); dst takes that generation (so an
     * import, which publishes a staged thread by a fork, keeps the dump's). */
    int (*thread_fork)(convo_backend *b, const char *src, const char *dst, int64_t upto,
                       int64_t expected_generation, convo_error *err);

    /* ---- version 2: checkpoints. Inputs validated by the core: checkpoint_ns
     * never NULL, metadata_json compact JSON object text, sizes within limits,
     * channel names unique. put creates the thread when needed. ---- */
    int (*checkpoint_put)(convo_backend *b, const convo_checkpoint_in *cp, convo_error *err);
    /* CONVO_ENOTFOUND when the checkpoint does not exist. */
    int (*checkpoint_put_writes)(convo_backend *b, const char *thread_id, const char *ns,
                                 const char *checkpoint_id, const char *task_id,
                                 const char *task_path, const convo_write_in *writes, size_t n,
                                 convo_error *err);
    /* checkpoint_id NULL = latest in ns; build the result with convo__checkpoint_*. */
    int (*checkpoint_get)(convo_backend *b, const char *thread_id, const char *ns,
                          const char *checkpoint_id, convo_checkpoint **out, convo_error *err);
    /* opts->filter_json already validated; filter is its parsed json_t (or NULL);
     * match metadata with convo__json_contains. before (when set) comes with
     * before_thread_id and before_ns (both non-NULL, validated): that checkpoint
     * must exist (else CONVO_ENOTFOUND), and the list holds the matching
     * checkpoints of any thread and namespace put before it, in a store-wide put
     * order (not the id order). thread_id NULL lists every thread. */
    int (*checkpoint_list)(convo_backend *b, const convo_checkpoint_list_opts *opts,
                           void *filter, convo_checkpoint_set **out, convo_error *err);
    int (*checkpoint_prune)(convo_backend *b, const char *thread_id, size_t keep_last,
                            convo_error *err);

    /* ---- version 2: measuring (convo bench). Optional (NULL = CONVO_ENOTSUP). ---- */
    /* Runs the backend's own raw write primitive n times in a row, each on a fresh
     * payload of payload_len bytes, on one connection, and cleans up after itself:
     * SQLite a bare INSERT transaction, Redis one RPUSH round trip, PostgreSQL one
     * INSERT round trip. *seconds is the wall time of the n operations only. */
    int (*bench_raw)(convo_backend *b, const char *payload, size_t payload_len, size_t n,
                     double *seconds, convo_error *err);
    /* Bytes the backend uses for this store's data: the SQLite file after a WAL
     * checkpoint, PostgreSQL relation sizes, Redis used memory, MongoDB storage size. */
    int (*stored_bytes)(convo_backend *b, int64_t *bytes, convo_error *err);

    /* ---- version 2: restoring a dump (convo import / copy). ---- */
    /* Stores messages [first_seq, first_seq + n) of a thread with their own
     * created_at, atomically: when the thread has exactly first_seq messages (a
     * missing thread has 0 and is created). When it already has at least
     * first_seq + n, nothing is done and *skipped is set (the same dump imported
     * again). Otherwise CONVO_ECONFLICT. msgs validated; n >= 1.
     * generation: the dumped thread's. A thread without messages (missing, or
     * created by save_extra) takes it when first_seq is 0; any other must have
     * it, else CONVO_ECONFLICT naming both, checked before *skipped (a tail
     * rewritten since an earlier import is never mixed with the old one). */
    int (*thread_import)(convo_backend *b, const char *thread_id, int64_t first_seq,
                         const convo_message_in *msgs, const int64_t *created_at, size_t n,
                         int64_t generation, int *skipped, convo_error *err);

    /* ---- version 2: expiry. With ttl=S in the URL a thread expires S seconds
     * after its last write: from then on it is invisible (load, list, append
     * start afresh) and sweep removes what expired. Optional: NULL when the
     * backend expires data itself (Redis, MongoDB TTL index) or has no ttl. ---- */
    int (*sweep)(convo_backend *b, uint64_t *removed, convo_error *err);

    /* ---- version 3: checkpoint_put with messages (cp->nmessages > 0): msgs,
     * validated, are appended at seq cp->expected_length and the checkpoint
     * stored, in one atomic write and one round trip; CONVO_ECONFLICT with
     * nothing written when the thread's length is not cp->expected_length.
     * Creates the thread when needed (expected_length 0). ---- */
    int (*checkpoint_put_log)(convo_backend *b, const convo_checkpoint_in *cp,
                              const convo_message_in *msgs, convo_error *err);
    /* (version 3 put_log: cp->expected_generation >= 0 is a condition too, as
     * for append; cp->version is CONVO_CHECKPOINT_IN_VERSION, defaults filled.) */

    /* ---- version 4: the tail rewrite (convo_replace_tail). In one atomic step:
     *   1. thread missing: CONVO_ENOTFOUND.
     *   2. opts->idempotency_key known for this thread: fill res from what that
     *      call (or append) stored (first_seq, count; generation = current),
     *      set res->replayed, return 0 (the core then compares the messages).
     *   3. opts->expected_length / expected_generation (>= 0) not met:
     *      CONVO_ECONFLICT, saying the thread's length and generation. The core
     *      passes INT64_MAX as expected_generation to force this conflict
     *      (after the key check) when the caller's expected suffix differed.
     *   4. keep > length: CONVO_EINVAL.
     *   5. a checkpoint of the thread (any namespace) with log_length > keep:
     *      unless opts->drop_checkpoints, CONVO_ECONFLICT naming it (id and
     *      namespace); with it, remove every such checkpoint and its writes.
     *   6. remove messages [keep, length), store msgs at keep.. with created_at
     *      now, generation + 1, record the key as (keep, n), refresh the ttl.
     * msgs validated (n may be 0); keep >= 0; opts never NULL (defaults filled,
     * the expected_suffix fields already handled by the core). res->removed =
     * length - keep, res->generation = the new generation. ---- */
    int (*replace_tail)(convo_backend *b, const char *thread_id, int64_t keep,
                        const convo_message_in *msgs, size_t n, const convo_rewrite_opts *opts,
                        convo_rewrite_result *res, convo_error *err);

    /* ---- version 5: the thread index (convo_thread_list_ex). Every write that
     * creates a thread sets its created_at; every append, save_extra, tail
     * rewrite and checkpoint put sets updated_at, in the same atomic write where
     * the backend allows it. A fork or an import creates its thread with its own
     * times (now). opts validated (order one of CONVO_ORDER_*, reverse 0/1, limit
     * 1..10,000); where is the parsed where_json (a json_t * object) or NULL:
     * match with convo__json_contains on the extra. after is NULL or the
     * position to continue after. The order is the tuple (time, id) descending
     * (recent, created) or id ascending (id); reverse turns it around. Return
     * up to opts->limit + 1 rows (the core trims the extra one and makes the
     * cursors), added with convo__thread_page_add_row; extra only when
     * opts->with_extra, the last message only when opts->with_last_message.
     * The cost of a page must not grow with the number of threads that do not
     * match where it filters on an indexed key (limits->indexed_keys). ---- */
    int (*thread_list_ex)(convo_backend *b, const convo_thread_list_opts *opts, void *where,
                          const convo_thread_cursor *after, convo_thread_page **out,
                          convo_error *err);

    /* ---- version 6: removing chosen checkpoints (convo_checkpoint_delete).
     * In one atomic step: removes the checkpoints (ns[i], ids[i]), i < n, of
     * the thread that exist, their pending writes, and every channel value no
     * remaining checkpoint of its namespace lists; *removed = how many were
     * there. A missing thread or checkpoint is not an error (0 removed). Inputs
     * validated, n >= 1. ---- */
    int (*checkpoint_delete)(convo_backend *b, const char *thread_id, const char *const *ns,
                             const char *const *ids, size_t n, uint64_t *removed,
                             convo_error *err);
    /* ---- version 6, optional: thread_fork that copies the checkpoints too
     * (convo_fork_opts.with_checkpoints) in one atomic step: the messages and
     * extra as thread_fork does, and every checkpoint of src (any namespace)
     * with log_length <= the messages copied, with its ids, parent, metadata,
     * body, log_length, channel values and pending writes, listed in the same
     * relative order. NULL: the core copies them after a thread_fork, one put
     * at a time, and removes dst again when that fails. ---- */
    int (*thread_copy)(convo_backend *b, const char *src, const char *dst, int64_t upto,
                       int64_t expected_generation, convo_error *err);
    /* ---- version 7, optional: a checkpoint put with log references
     * (lib/items.c); NULL: the core puts without the swaps (values keep their
     * inline copies). In one atomic write where the backend allows it (else
     * the swaps right after the put, in the same call):
     *   1. cp->expected_generation >= 0 and the thread's generation (0 when it
     *      does not exist) differs: CONVO_ECONFLICT, nothing written;
     *   2. nmsgs > 0: as checkpoint_put_log (msgs at seq cp->expected_length,
     *      CONVO_ECONFLICT when the length differs); nmsgs == 0: as
     *      checkpoint_put (cp->expected_length is then -1, not a condition);
     *   3. each swap: the value it names, when it is stored and equal (type and
     *      bytes) to old_value, becomes new_value, and its checkpoint's
     *      log_length becomes max(log_length, swap->log_length); a swap whose
     *      value is missing or different is skipped (not an error).
     * Channel values of type "convo/items" are stored as any other blob. ---- */
    int (*checkpoint_put_refs)(convo_backend *b, const convo_checkpoint_in *cp,
                               const convo_message_in *msgs, size_t nmsgs,
                               const convo_swap *swaps, size_t nswaps, convo_error *err);
} convo_driver;

/* ---- helpers the core offers to drivers (lib/) ---- */

/* Sets err (when non-NULL and still unset) and returns code. */
int convo__error(convo_error *err, int code, const char *backend_code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void convo__error_clear(convo_error *err);

/* Removes parameter key from url and returns its value (caller frees), or NULL. */
char *convo__url_take(convo_url *url, const char *key);
/* Removes integer parameter key from url into *out: a whole number (digits,
 * '-' first only when min < 0) from min to max, else CONVO_EINVAL with one
 * message for every driver. *out is left alone when key is absent. */
int convo__url_take_int(convo_url *url, const char *key, long long min, long long max,
                        long long *out, convo_error *err);
/* ttl=S, the same for every driver: seconds from 1 to CONVO_MAX_TTL_SECONDS;
 * *seconds is 0 (no expiry) when absent. */
#define CONVO_MAX_TTL_SECONDS 2147483647LL
int convo__url_take_ttl(convo_url *url, int64_t *seconds, convo_error *err);
/* CONVO_EINVAL naming the first parameter left, if any. */
int convo__url_reject_rest(const convo_url *url, convo_error *err);

/* The URL again ("scheme:rest?k=v..."), with only the parameters left in it;
 * for handing to a client library. Caller frees. */
char *convo__url_rebuild(const convo_url *url);

/* Building results. All return 0 or CONVO_ENOMEM. */
convo_history *convo__history_new(void);
int convo__history_add(convo_history *h, const char *bytes, size_t len, const char *role,
                       int64_t seq, int64_t created_at);
int convo__history_set_extra(convo_history *h, const char *json, size_t len);
void convo__history_set_length(convo_history *h, int64_t length);
void convo__history_set_generation(convo_history *h, int64_t generation);
/* Pre-sizes the message array for n more messages. */
int convo__history_reserve(convo_history *h, size_t n);

convo_thread_page *convo__thread_page_new(void);
int convo__thread_page_add(convo_thread_page *p, const char *id, size_t len);
/* A row of the thread index: extra and last (a message) may be NULL. */
int convo__thread_page_add_row(convo_thread_page *p, const char *id, size_t id_len,
                               int64_t created_at, int64_t updated_at, int64_t length,
                               const char *extra, size_t extra_len, const char *last,
                               size_t last_len);
int convo__thread_page_set_next(convo_thread_page *p, const char *next);

/* Resolves load options against a thread of `length` messages into the half-open
 * seq range [*from, *to). */
void convo__load_range(const convo_load_opts *opts, int64_t length, int64_t *from, int64_t *to);

/* Checkpoint results. new() copies every argument (NULL parent/body_type kept NULL). */
convo_checkpoint *convo__checkpoint_new(const char *thread_id, const char *ns, const char *id,
                                        const char *parent_id, const char *metadata_json,
                                        const char *body_type, const void *body, size_t body_len,
                                        int64_t log_length, int64_t created_at);
/* type NULL: the version has no stored value. */
int convo__checkpoint_add_channel(convo_checkpoint *cp, const char *channel, const char *version,
                                  const char *type, const void *bytes, size_t len);
int convo__checkpoint_add_write(convo_checkpoint *cp, const char *task_id, const char *task_path,
                                int64_t idx, const char *channel, const char *type,
                                const void *bytes, size_t len);
/* Sorts channels by name and writes by (task_id, idx); call once when complete. */
void convo__checkpoint_finish(convo_checkpoint *cp);
convo_checkpoint_set *convo__checkpoint_set_new(void);
/* Takes ownership of cp (also on failure). */
int convo__checkpoint_set_add(convo_checkpoint_set *set, convo_checkpoint *cp);
/* 1 when the JSON object text metadata contains filter (a json_t *), as
 * PostgreSQL's jsonb @> does: objects by key, arrays by element, scalars equal. */
int convo__json_contains(const char *metadata_json, size_t len, void *filter);
/* 1 when bytes[0..len) is one JSON object (lib/validate.c's scanner where it
 * is sure, else jansson): an extra object a driver joined from stored parts,
 * checked in one pass without building it. */
int convo__json_object_valid(const char *bytes, size_t len);

/* Microseconds since the epoch, from the system clock. */
int64_t convo__now_micros(void);

/* Shallow merge of patch (compact JSON object text) into current (JSON object
 * text or NULL); returns a malloc'd compact JSON string in *out. Keeps key
 * order: existing keys in place, new keys appended. CONVO_ETOOLARGE when the
 * result exceeds max_bytes. */
int convo__extra_merge(const char *current, size_t current_len, const char *patch,
                       size_t max_bytes, char **out, size_t *out_len, convo_error *err);

/* msgpack helpers (lib/pack.c) for records in msgpack-c, shared by the dump
 * format (lib/dump.c) and drivers that store msgpack (redis): the types are
 * msgpack-c's msgpack_packer and msgpack_object, named by tag so this header
 * needs no msgpack.h. Each returns 0, or -1 (the packer's write failed; an
 * object of another type). */
struct msgpack_packer;
struct msgpack_object;
/* s as a str, NULL as nil. */
int convo__pack_str(struct msgpack_packer *pk, const char *s);
/* len bytes as a bin. */
int convo__pack_bin(struct msgpack_packer *pk, const void *bytes, size_t len);
/* A positive or negative integer that fits int64_t, into *out. */
int convo__unpack_int(const struct msgpack_object *o, int64_t *out);

/* A small pool of connections for drivers that need them. connect() makes one;
 * disconnect() frees one. acquire blocks while all `size` are in use. */
typedef struct convo_pool convo_pool;
typedef struct convo_pool_ops {
    int (*connect)(void *ctx, void **conn, convo_error *err);
    void (*disconnect)(void *ctx, void *conn);
} convo_pool_ops;
int convo__pool_new(convo_pool **out, size_t size, const convo_pool_ops *ops, void *ctx);
void convo__pool_free(convo_pool *p);
int convo__pool_acquire(convo_pool *p, void **conn, convo_error *err);
/* broken: the connection failed and must be dropped, not reused. */
void convo__pool_release(convo_pool *p, void *conn, bool broken);
/* Calls hooks around acquire's wait for a free connection (no hooks: NULLs). */
void convo__pool_set_wait(convo_pool *p, const convo_wait_hooks *hooks);

/* A wait between convo__wait_begin(&w, hooks) and convo__wait_end(&w): the
 * hooks' enter before it, their leave after it; nothing when hooks->enter is NULL. */
typedef struct convo_wait {
    const convo_wait_hooks *hooks;
    void *entered;
} convo_wait;
void convo__wait_begin(convo_wait *w, const convo_wait_hooks *hooks);
void convo__wait_end(convo_wait *w);
/* The calling thread, one of libconvo's own, runs no hooks from now on. */
void convo__wait_unhook_thread(void);

/* ---- the drivers built into libconvo ----
 * Each defines its table; lib/registry.c lists those configure found. None is
 * exported from libconvo.so (built with -fvisibility=hidden), and this header
 * is not installed: drivers are chosen by URL scheme, not registered. */
extern const convo_driver convo_driver_memory;
extern const convo_driver convo_driver_sqlite;
extern const convo_driver convo_driver_redis;
extern const convo_driver convo_driver_postgres;
extern const convo_driver convo_driver_mongo;

#ifdef __cplusplus
}
#endif
#endif
