/* redis_int.h — what the files of the Redis driver share: the backend, its
 * connections, commands and thread keys, the scripts, and each file's
 * functions used by the others, prefixed convo__rd_ (every name libconvo.a
 * defines starts with convo).
 * Private to drivers/redis; the core never includes it. */
#ifndef CONVO_REDIS_INT_H
#define CONVO_REDIS_INT_H

#include "config.h"
#include "cluster.h"
#include <convo/driver.h>
#include <hiredis/hiredis.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define DEFAULT_PREFIX "convo"
#define DEFAULT_POOL 8
#define DEFAULT_TIMEOUT_MS 5000
#define MAX_PREFIX_BYTES 128
#define RECENT_SLOTS 4096 /* threads a store remembers having indexed */
#ifndef IX_SHARDS
#define IX_SHARDS 16     /* cluster: the index sets are split in 16 slot ranges, over the masters */
#endif
#define IX_SHARD_SLOTS (RCL_SLOTS / IX_SHARDS) /* the slots of one shard's range */
#define RELAYOUT_TRIES 3  /* a thread migrated by a call that met it (CONVO_MIGRATE) */
/* One server (layout 6): a thread's updated_at lies in [u, u + WINDOW_US),
 * u its activity time, the score of its :r entries; an append inside that
 * window leaves them alone (docs/redis.md, "The activity window"). Writers
 * and readers of a store must agree on it: it is part of the layout. */
#define WINDOW_US 5000
#define IX_VALUE_MAX 200 /* longer value texts are cut, with "\n" after (index.lua) */

/* The scripts (scripts.c joins the .lua files that make each). */
enum {
    S_APPEND, S_APPEND_FAST, S_EXTRA, S_DELETE, S_FORK, S_IMPORT, S_CP_PUT, S_CP_PUT_LOG,
    S_CP_MIGRATE, S_CP_WRITES, S_CP_GET, S_CP_LIST, S_CP_PRUNE, S_CP_RELAYOUT, S_REWRITE,
    S_REWRITE_CP, S_REINDEX, S_LIST, S_CP_DELETE, S_CP_PUT_REFS, S_PERSIST, S_REWRITE_QUICK,
    S_COPY,
    S_COUNT
};
extern const char *const convo__rd_scripts[S_COUNT];

typedef struct rconn {
    redisContext *c;
    uint64_t gen; /* creation number, to drop connections older than a failure */
    int broken;   /* a send failed: the connection must not be reused */
    rcl_conns *nodes; /* cluster mode (c is NULL): a socket per node */
} rconn;

struct convo_backend {
    convo_pool *pool;
    convo_limits limits;
    char *host, *socket_path, *user, *password, *redacted;
    int port, db;
    long long ttl_ms;
    int connect_timeout_ms, timeout_ms;
    char *prefix, *index_key;
    char *store_key;            /* P:store: layout version, on one server the put order */
    atomic_int_fast64_t order_hint; /* the highest checkpoint order this store saw */
    char sha[S_COUNT][41];
    atomic_uint_fast64_t recent[RECENT_SLOTS]; /* threads written lately (convo__rd_run_writer) */
    atomic_uint_fast64_t moved[RECENT_SLOTS];  /* when this store last set their activity time */
    int64_t moved_epoch;                       /* µs: moved[] counts from here */
    atomic_uint_fast64_t next_gen;
    atomic_uint_fast64_t stale_below; /* connections with gen < this are suspect */
    rcl *cluster;                       /* redis+cluster: routing (cluster.c) */
    int wait_replicas, wait_timeout_ms; /* ?wait=N&wait_timeout=MS */
    /* the thread index (ix.c): the declared extra keys (recorded in P:store),
     * each as JSON text, the fields of the extra hash; ix_fields holds
     * "\0F1\0F2..." as index.lua takes them */
    char **ix_keys, **ix_field;
    size_t ix_nkeys;
    char *ix_fields;
    size_t ix_fields_len;
    char *ix_prefix;              /* "P:ix:" */
    char *ix_recent;              /* "P:ix:r": on one server, every thread by updated_at */
    char *ix_shard[IX_SHARDS];    /* cluster: "P:ix:{T}:s:", the global sets' shards */
    char *ix_vbase[IX_SHARDS];    /* cluster: "P:ix:{T}:v:", the start of a value's sets there */
    struct rd_guess *guess;       /* one server: a page's batches' last candidates (rows.c) */
    struct rd_beside *beside;     /* cluster: the :r keys of threads written lately (beside.c) */
};

/* Runs on each batch of keys SCAN finds (convo__rd_scan_each). */
typedef int (*scan_fn)(convo_backend *b, rconn *c, const redisReply *keys, void *ctx,
                       convo_error *err);

/* A pipeline command: arguments with lengths, plus room for a few numbers. */
/* A command's arguments; the first CMD_INLINE live in the struct itself (most
 * commands are short, and each call builds several). */
#define CMD_INLINE 8

typedef struct cmd {
    const char **argv;
    size_t *lens;
    size_t n, cap;
    const char *argv_inline[CMD_INLINE];
    size_t lens_inline[CMD_INLINE];
    char nums[8][24];
    int nnums;
    int failed;
} cmd;

/* The keys of one thread, P:{tag}:SUFFIX, in the KEYS order of every script. */
enum key_kind { K_MSGS, K_IDEM, K_META, K_EXTRA, K_CP, K_CPIDX, K_BLOBS, K_WRITES, K_COUNT };

typedef struct thread_keys {
    char *buf;
    const char *k[K_COUNT];
    size_t len[K_COUNT];
    const char *id;   /* the thread id given to convo__rd_keys_make (not a copy) */
    const char *spec; /* index.lua's argument (in buf): the time of the call, the index */
    size_t spec_len;
} thread_keys;

/* A growable msgpack output buffer; marks[] remember where parts start. */
typedef struct packbuf {
    char *data;
    size_t len, cap;
    size_t *marks;
    size_t nmarks, mcap;
    int failed;
} packbuf;

/* Builds a script call, create = 1 allowing it to create the thread; returns
 * the script to run (its S_ number), or CONVO_ENOMEM. */
typedef int (*build_fn)(void *ctx, cmd *c, int create);

/* cmd.c: building commands */
void convo__rd_cmd_add(cmd *c, const char *s, size_t len);
void convo__rd_cmd_str(cmd *c, const char *s);
size_t convo__rd_fmt_num(char *buf, long long v);
size_t convo__rd_key_head(const convo_backend *b, const char *id, char *out);
const char *convo__rd_key_suffix(int kind);
void convo__rd_cmd_num(cmd *c, long long v);
cmd *convo__rd_cmds_new(size_t n);
void convo__rd_cmd_free(cmd *c);
int convo__rd_keys_make(const convo_backend *b, const char *id, thread_keys *tk);
int convo__rd_keys_read(const convo_backend *b, const char *id, thread_keys *tk); /* no spec */
/* msgs, idem, meta and extra only (a listing's row): the others NULL */
int convo__rd_keys_row(const convo_backend *b, const char *id, thread_keys *tk);
void convo__rd_cmd_script_keys(cmd *c, const thread_keys *tk, size_t n);
void convo__rd_cmd_script_head(cmd *c, const thread_keys *tk);
void convo__rd_cmd_spec(cmd *c, const thread_keys *tk);
void convo__rd_cmd_index_key(cmd *c, const convo_backend *b, const char *id);
/* The cluster slot of thread id's keys (its tag's). */
unsigned convo__rd_id_slot(const char *id);
void convo__rd_cmd_index(cmd *c, const convo_backend *b, const char *verb, const char *id);
int convo__rd_packbuf_write(void *data, const char *buf, size_t len);
void convo__rd_packbuf_mark(packbuf *p);
void convo__rd_packbuf_free(packbuf *p);
void convo__rd_cmd_part(cmd *c, const packbuf *p, size_t i);
int convo__rd_pack_records(const convo_message_in *msgs, size_t n, const int64_t *created_at,
                           int64_t now, packbuf *pb);
int convo__rd_pack_error(int code, convo_error *err);

/* conn.c: connections, pipelines, replies */
int convo__rd_oom(convo_error *err);
int convo__rd_reply_error(const redisReply *r, convo_error *err);
void convo__rd_replies_free(redisReply **replies, size_t n);
int convo__rd_pipeline_plain(convo_backend *b, rconn *rc, cmd *cmds, size_t n,
                             redisReply **replies, int arena, convo_error *err);
int convo__rd_send(convo_backend *b, rconn *rc, cmd *cmds, size_t n, convo_error *err);
int convo__rd_send_raw(convo_backend *b, rconn *rc, const char *buf, size_t len, convo_error *err);
int convo__rd_send_with(convo_backend *b, rconn *rc, cmd *cmds, size_t n, const char *raw,
                        size_t raw_len, convo_error *err);
int convo__rd_read_failed(convo_backend *b, rconn *rc, int errnum, convo_error *err);

/* rows.c: a listing's rows on one server, and the guess of a batch's
 * candidates. A row is R_PER replies (R_EXTRA is list.c's). */
enum { R_META, R_LEN, R_EXTRA, R_LAST, R_PER };
typedef struct rd_rows_req {
    char *buf; /* the request in RESP (malloc'd) */
    size_t len, ncmds;
    size_t *at; /* the caller's: n * R_PER, each reply's index (SIZE_MAX: none) */
} rd_rows_req;
int convo__rd_rows_resp(const convo_backend *b, const char *const *ids, size_t n, int last,
                        rd_rows_req *out);
int convo__rd_record_bytes(const redisReply *rec, const char **bytes, size_t *len);
long long convo__rd_record_time(const redisReply *rec);
int convo__rd_parse_time(const redisReply *r, long long *out);
typedef struct rd_guess rd_guess;
rd_guess *convo__rd_guess_new(void);
void convo__rd_guess_free(rd_guess *g);
int convo__rd_guess_get(rd_guess *g, const char *key, size_t klen, char **ids, size_t *n);
void convo__rd_guess_put(rd_guess *g, const char *key, size_t klen, const char *const *ids,
                         size_t n);

/* arena.c: a pipeline's replies from one arena, freed together */
typedef struct rd_arena rd_arena;
rd_arena *convo__rd_arena_new(void);
void convo__rd_arena_free(rd_arena *a);
int convo__rd_pipeline_arena(convo_backend *b, rconn *rc, cmd *cmds, size_t n,
                             redisReply **replies, rd_arena *a, convo_error *err);
int convo__rd_replies_arena(convo_backend *b, rconn *rc, size_t n, redisReply **replies,
                            rd_arena *a, convo_error *err);
int convo__rd_pipeline(convo_backend *b, rconn *rc, cmd *cmds, size_t n, redisReply **replies,
                       convo_error *err);
int convo__rd_is_noscript(const redisReply *r);
int convo__rd_pipeline_script(convo_backend *b, rconn *rc, cmd *cmds, size_t n, size_t at,
                              int script, redisReply **replies, convo_error *err);
int convo__rd_node_setup(void *ctx, redisContext *c, convo_error *err);
int convo__rd_acquire(convo_backend *b, rconn **out, convo_error *err);
void convo__rd_release(convo_backend *b, rconn *c);
extern const convo_pool_ops convo__rd_pool_ops;

/* index.c: the thread index and the writers' protocol */
uint64_t convo__rd_id_hash(const char *id);
int convo__rd_recent_has(convo_backend *b, uint64_t h);
int convo__rd_recent_has_messages(convo_backend *b, uint64_t h);
void convo__rd_recent_set_messages(convo_backend *b, uint64_t h);
void convo__rd_recent_forget(convo_backend *b, uint64_t h);
void convo__rd_recent_moved(convo_backend *b, uint64_t h, int64_t at);
int convo__rd_recent_in_window(convo_backend *b, uint64_t h, int64_t now);
int64_t convo__rd_spec_now(const thread_keys *tk);
int convo__rd_run_writer_as(convo_backend *b, rconn *c, const char *id, int known, build_fn build,
                            void *ctx, redisReply **reply, convo_error *err);
/* The same for an append: on a cluster a known thread's remembered :r
 * entries are moved to now (the script's clock, which it writes to meta's u)
 * beside the script (beside.c). */
int convo__rd_run_writer_beside(convo_backend *b, rconn *c, const char *id, int known,
                                const char *now, size_t now_len, build_fn build, void *ctx,
                                redisReply **reply, convo_error *err);
int convo__rd_run_writer(convo_backend *b, rconn *c, const char *id, build_fn build, void *ctx,
                         redisReply **reply, convo_error *err);
int convo__rd_index_remove(convo_backend *b, rconn *c, const char *const *ids, size_t n,
                           size_t *readded, convo_error *err);
int convo__rd_index_range(convo_backend *b, rconn *c, const char *cursor, size_t count,
                          redisReply **out, convo_error *err);
int convo__rd_thread_list(convo_backend *b, const char *after, size_t limit,
                          convo_thread_page **out, convo_error *err);
int convo__rd_sweep(convo_backend *b, uint64_t *removed, convo_error *err);

/* threads.c: threads and messages */
int convo__rd_append(convo_backend *b, const char *thread_id, const convo_message_in *msgs,
                     size_t n, const convo_append_opts *opts, convo_append_result *res,
                     convo_error *err);
int convo__rd_load(convo_backend *b, const char *thread_id, const convo_load_opts *opts,
                   convo_history **out, convo_error *err);
int convo__rd_save_extra(convo_backend *b, const char *thread_id, const char *patch,
                         void *patch_obj, convo_error *err);
int convo__rd_thread_delete(convo_backend *b, const char *thread_id, convo_error *err);
int convo__rd_thread_fork(convo_backend *b, const char *src, const char *dst, int64_t upto,
                          int64_t expected_generation, convo_error *err);
int convo__rd_thread_copy(convo_backend *b, const char *src, const char *dst, int64_t upto,
                          int64_t expected_generation, convo_error *err);

/* maint.c: maintenance */
int convo__rd_scan_each(convo_backend *b, rconn *c, const char *tail, scan_fn fn, void *ctx,
                        convo_error *err);
int convo__rd_thread_import(convo_backend *b, const char *thread_id, int64_t first_seq,
                            const convo_message_in *msgs, const int64_t *created_at, size_t n,
                            int64_t generation, int *skipped, convo_error *err);
int convo__rd_bench_raw(convo_backend *b, const char *payload, size_t payload_len, size_t n,
                        double *seconds, convo_error *err);
int convo__rd_stored_bytes(convo_backend *b, int64_t *bytes, convo_error *err);

/* layout.c: the layout migrations */
int convo__rd_layout_migrate(convo_backend *b, rconn *c, int reindex, convo_error *err);
int convo__rd_scripts_each(convo_backend *b, rconn *c, cmd *cmds, size_t n, size_t step,
                           int script, redisReply **r, convo_error *err);
int convo__rd_is_migrate(const redisReply *r);
int convo__rd_thread_relayout(convo_backend *b, rconn *c, const char *id, convo_error *err);
int convo__rd_relayout_gave_up(const char *id, convo_error *err);

/* ix.c: the thread index of layout 4 (index.lua's keys, the cluster's writes) */
int convo__rd_ix_open(convo_backend *b, rconn *c, int *reindex, convo_error *err);
void convo__rd_ix_free(convo_backend *b);
/* shard: a cluster's shard (convo__rd_ix_shard) whose sets of the value are
 * meant; -1 on one server (or for comparing two values) */
char *convo__rd_ix_kv(const convo_backend *b, int shard, const char *field, const char *json,
                      size_t len);
int convo__rd_ix_field_of(const convo_backend *b, const char *key);
int convo__rd_ix_shard(const convo_backend *b, const char *id);
int convo__rd_ix_sync(convo_backend *b, rconn *c, const char *const *ids, size_t n,
                      convo_error *err);
void convo__rd_ix_after(convo_backend *b, rconn *c, const char *id);
void convo__rd_ix_read_cmds(const convo_backend *b, const thread_keys *tk, cmd *two);
int convo__rd_ix_write(convo_backend *b, rconn *c, const char *id, const redisReply *m,
                       const redisReply *x, convo_error *err);
int convo__rd_ix_reindex(convo_backend *b, rconn *c, const char *const *ids, size_t n,
                         convo_error *err);
int convo__rd_ix_sweep(convo_backend *b, rconn *c, convo_error *err);
int convo__rd_ix_drop_layout4(convo_backend *b, rconn *c, convo_error *err);
/* a field of the extra: on one server its hash also holds the thread's c, u
 * and p (layout 8), not the extra's */
int convo__rd_extra_field(const convo_backend *b, const redisReply *field);
int convo__rd_extra_text(const convo_backend *b, const redisReply *all, char **out, size_t *len);

/* list.c: convo_thread_list_ex */
int convo__rd_thread_list_ex(convo_backend *b, const convo_thread_list_opts *o, void *where,
                             const convo_thread_cursor *after, convo_thread_page **out,
                             convo_error *err);

/* rewrite.c: the tail rewrite */
int convo__rd_replace_tail(convo_backend *b, const char *thread_id, int64_t keep,
                           const convo_message_in *msgs, size_t n, const convo_rewrite_opts *opts,
                           convo_rewrite_result *res, convo_error *err);

/* checkpoints.c: checkpoints */
int convo__rd_record_log_length(const redisReply *rec, int64_t *log_length);
void convo__rd_cmd_cp_head(cmd *c, const convo_backend *b, const thread_keys *tk);
int convo__rd_checkpoint_put(convo_backend *b, const convo_checkpoint_in *cp, convo_error *err);
int convo__rd_checkpoint_put_log(convo_backend *b, const convo_checkpoint_in *cp,
                                 const convo_message_in *msgs, convo_error *err);
int convo__rd_checkpoint_put_refs(convo_backend *b, const convo_checkpoint_in *cp,
                                  const convo_message_in *msgs, size_t nmsgs,
                                  const convo_swap *swaps, size_t nswaps, convo_error *err);
int convo__rd_checkpoint_put_writes(convo_backend *b, const char *thread_id, const char *ns,
                                    const char *checkpoint_id, const char *task_id,
                                    const char *task_path, const convo_write_in *writes, size_t n,
                                    convo_error *err);
int convo__rd_checkpoint_get(convo_backend *b, const char *thread_id, const char *ns,
                             const char *checkpoint_id, convo_checkpoint **out, convo_error *err);
int convo__rd_checkpoint_list(convo_backend *b, const convo_checkpoint_list_opts *o, void *filter,
                              convo_checkpoint_set **out, convo_error *err);
int convo__rd_checkpoint_prune(convo_backend *b, const char *thread_id, size_t keep_last,
                               convo_error *err);
int convo__rd_checkpoint_delete(convo_backend *b, const char *thread_id, const char *const *ns,
                                const char *const *ids, size_t n, uint64_t *removed,
                                convo_error *err);

/* beside.c: a cluster append's :r entries in its own round trip */
typedef struct rd_beside rd_beside;
rd_beside *convo__rd_beside_new(void);
void convo__rd_beside_free(rd_beside *t);
/* Remembers thread id's :r keys from its reads (convo__rd_ix_read_cmds). */
void convo__rd_beside_learn(convo_backend *b, const char *id, const redisReply *m,
                            const redisReply *x);
/* 1 and a copy (keys, each ending with '\0'; the caller frees) when known. */
/* The store remembers thread hash h's keys (it wrote the thread lately: on a
 * cluster more of them than the recent table keeps); forget: deleted. */
int convo__rd_beside_has(convo_backend *b, uint64_t h);
void convo__rd_beside_forget(convo_backend *b, uint64_t h);
int convo__rd_beside_get(convo_backend *b, const char *id, char **keys, size_t *len,
                         size_t *count);
/* out[0..count): ZADD KEY XX CH now id. */
void convo__rd_beside_zadds(const char *keys, size_t count, const char *id, const char *now,
                            size_t now_len, cmd *out);
/* 1 when the ZADDs (replies zr) did all convo__rd_ix_write would do, as the
 * reads after the script (m, x) show. */
int convo__rd_beside_done(const convo_backend *b, const char *id, const char *keys, size_t len,
                          const char *now, size_t now_len, redisReply *const *zr, size_t count,
                          const redisReply *m, const redisReply *x);

#endif
