/* sqlite_int.h — what the files of the SQLite driver share, and only they:
 *
 *   sqlite.c       the driver table, convo_open's URL options, open and close
 *   conn.c         connections (WAL, pragmas), errors, the statement cache,
 *                  transactions
 *   schema.c       the layout version and the migrations runner
 *   threads.c      thread rows and the log: append, load, extra, list,
 *                  delete, fork, import
 *   rewrite.c      the tail rewrite (replace_tail)
 *   index.c        the thread index's upkeep: the declared extra keys and the
 *                  rows kept with each thread's extra and activity
 *   list.c         the thread index's listing (thread_list_ex)
 *   checkpoints.c  checkpoints, their channel values and pending writes
 *   removal.c      checkpoints removed (delete, beyond a length, prune) and copied
 *   lists.c        (layout 9) channel lists stored as deltas, their chains
 *   maint.c        sweep (ttl), bench's raw baseline, stored bytes
 *
 * The SQL lives in files of its own, embedded at build time by scripts/embed.sh
 * into sql.h: migrate-V-W.sql (the layout, one migration each) and
 * statements/NAME.sql (one statement each, macro SQL_NAME). The stored layout is
 * described in docs/sqlite.md. */
#ifndef CONVO_SQLITE_INT_H
#define CONVO_SQLITE_INT_H

#include <convo/driver.h>
#include <sqlite3.h>
#include <stdint.h>
#include "sql.h"

/* Version of the stored layout this code writes: migrate-0-1.sql up to
 * migrate-12-13.sql (schema.c). */
#define SCHEMA_VERSION 17

/* A message's row key is (thread number << 32) | seq, and a checkpoint's is
 * (thread number << 32) | its position in put order, so one thread's rows are
 * one contiguous range of each rowid B-tree. A checkpoint's put_order is its
 * place in the order of first put across the whole store. */
#define SEQ_BITS 32
#define MAX_LENGTH INT64_C(0xFFFFFFFF)
#define MAX_THREAD_NUM INT64_C(0x7FFFFFFF)

/* A checkpoint whose parent is at most this many places before it in its
 * thread's order names it by that number (layout 7), else by its id. */
#define PARENT_NEAR 16
/* Layout 8: a metadata shape longer than this, or new when this many names are
 * kept, leaves the metadata as text (convo_names never shrinks: the bound keeps
 * metadata of ever new keys from growing it without end). */
#define SHAPE_MAX_BYTES 512
#define SHAPE_NAMES_MAX 4096
/* Layout 9: a delta channel list is decoded against at most this many rows
 * before it, the last of them a full list (lists.c). */
#define LIST_CHAIN_MAX 16
#define LIST_CACHE_MAX (LIST_CHAIN_MAX + 1)

/* The statements a connection prepares on first use and keeps until it
 * closes: X(NAME) for statements/name.sql ('-' for '_'), whose text is
 * SQL_NAME and whose slot in the cache ST_NAME. */
#define SQ_STATEMENTS(X)                                                                     \
    X(BEGIN) X(BEGIN_IMMEDIATE) X(COMMIT) X(ROLLBACK)                                        \
    X(THREAD_GET) X(THREAD_BY_NUM) X(THREAD_INSERT) X(THREAD_SET_EXTRA) X(THREAD_SET_EXPIRY)   \
    X(THREAD_TOUCH) X(THREAD_SET_GENERATION) X(THREAD_DELETE) X(THREAD_LIST)                 \
    X(THREAD_EXPIRED) X(THREAD_ANY_DEADLINE) X(THREAD_ACTIVITY)                              \
    X(IDEM_GET) X(IDEM_PUT) X(IDEM_DELETE)                                                   \
    X(MSG_INSERT) X(MSG_REPLACE) X(MSG_LAST) X(MSG_LAST_BODY) X(MSG_RANGE) X(MSG_DELETE)     \
    X(MSG_COPY) X(CP_COPY) X(BLOB_COPY)                                                     \
    X(ACTIVITY_ADD) X(ACTIVITY_MOVE) X(ACTIVITY_DELETE) X(ACTIVITY_FORGET) X(ACTIVITY_NEWEST)  \
    X(RECENT_MOVE) X(RECENT_DELETE) X(RECENT_ADD) X(RECENT_FORGET)                           \
    X(THREAD_KEY_VALUES) X(THREAD_SET_KEY_VALUES) X(KEY_THREADS_ADD) X(KEY_THREADS_DELETE)   \
    X(INDEX_KEYS) X(INDEX_KEY_ADD) X(INDEX_BACKFILL)                                         \
    X(LIST_RECENT) X(LIST_RECENT_REVERSE) X(LIST_CREATED) X(LIST_CREATED_REVERSE)            \
    X(LIST_ID) X(LIST_ID_REVERSE) X(LIST_KEY_RECENT) X(LIST_KEY_RECENT_REVERSE)              \
    X(LIST_KEY_CREATED) X(LIST_KEY_CREATED_REVERSE) X(LIST_KEY_ID) X(LIST_KEY_ID_REVERSE)    \
    X(LIST_RECENT_BARE) X(LIST_RECENT_REVERSE_BARE) X(LIST_KEY_RECENT_BARE)                  \
    X(LIST_KEY_RECENT_REVERSE_BARE) X(LIST_KEY_OPEN) X(ACTIVITY_OPEN_VALUES)                \
    X(CP_FIND) X(CP_LAST) X(CP_LAST_ORDER) X(CP_TAKE_ORDERS) X(CP_PUT) X(CP_GET) X(CP_LATEST)                  \
    X(CP_LIST_THREAD) X(CP_LIST_ALL) X(CP_LIST_ALL_BEFORE) X(CP_KEYS) X(CP_DELETE)           \
    X(CP_BEYOND) X(CP_DELETE_BEYOND) X(CP_LOG_AT_LEAST) X(CP_ORPHANS) X(CP_ORPHANS_BEYOND) \
    X(CP_CHAIN) X(CP_LIST_OF) X(CP_LIST_SET) X(CP_LIST_WALK) X(CP_NEXT)                     \
    X(REACH_RAISE) X(REACH_GET) X(REACH_SET) X(REACH_DELETE) X(DATA_VERSION)                                      \
    X(CH_VALUES) X(NAME_FIND) X(NAME_ADD) X(NAME_LAST)                                                  \
    X(BLOB_PUT) X(BLOB_DELETE) X(BLOB_UNUSED) X(BLOB_SWAP) X(BLOB_HAS)                               \
    X(WRITE_LIST) X(CP_PENDING_GET) X(CP_PENDING_SET) X(CP_PENDING_WAIT)                      \
    X(CP_PENDING_SETTLE) X(CP_PENDING_SETTLED)                                                \
    X(SEG_ROWS) X(SEG_PUT) X(SEG_SEAL) X(SEG_SEAL_HOT) X(SEG_THAW) X(SEG_THAW_MARK)          \
    X(SEG_DROP) X(CP_SEALED) X(CP_PUT_HOT) X(HOT_PUT) X(HOT_DELETE) X(HOT_DROP)             \
    X(HOT_PENDING_SET) X(HOT_LIST_SET)

enum stmt_id {
#define SQ_STMT_ID(name) ST_##name,
    SQ_STATEMENTS(SQ_STMT_ID)
#undef SQ_STMT_ID
    ST_COUNT
};

/* The open thread's activity time and length as a write read them, for the
 * rest of its transaction (index.c); num 0: none read. */
struct sq_open_read {
    int64_t num, at, length;
};

/* The last channel list this connection decoded or stored (lists.c): the
 * checkpoint's key, its stored bytes, its full list and how many deltas its
 * chain holds; valid while no other connection committed (data_version). */
struct sq_list_memo {
    int64_t key, data_version;
    unsigned char *stored, *full;
    size_t stored_len, full_len;
    int depth, valid;
};

/* The key values of the thread written last, as this connection last read
 * them (list.c), for the data version it read them at. */
struct sq_open_memo {
    unsigned version;
    int valid;
    char *values; /* NULL: none */
    size_t values_len;
};

typedef struct sq_conn {
    sqlite3 *db;
    int busy_ms;
    const convo_wait_hooks *wait;  /* the store's (its backend's limits) */
    int64_t ttl_us;                /* the store's ttl; 0: threads never expire */
    int seal;                      /* the store's seal= (layout 17, segments.c) */
    sqlite3_stmt *stmts[ST_COUNT]; /* prepared on first use, kept until disconnect */
    struct sq_open_read open_read; /* cleared when a transaction starts */
    struct sq_list_memo memo;      /* layout 9 (lists.c) */
    struct sq_open_memo open_memo; /* layout 15 (list.c) */
} sq_conn;

struct convo_backend {
    char *path;       /* absolute path of the file, or ":memory:" */
    int memory;       /* one private in-memory database, so one connection */
    int busy_ms;
    int sync_full;    /* PRAGMA synchronous=FULL instead of NORMAL */
    int seal;         /* seal=0|1 (default 1): puts seal older checkpoints (layout 17) */
    int ttl_s;        /* ttl=S from the URL; 0: none */
    convo_pool *pool; /* of sq_conn */
    convo_limits limits;
};

static inline int no_memory(convo_error *err)
{
    return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
}

static inline int64_t key_of(int64_t num, int64_t seq)
{
    return (int64_t)((uint64_t)num << SEQ_BITS) + seq;
}

/* ---- conn.c: connections, errors, statements, transactions ---- */

extern const convo_pool_ops sq_pool_ops;

int sq_conn_error(sq_conn *c, int rc, convo_error *err, const char *what);
int sq_stmt_get(sq_conn *c, enum stmt_id id, sqlite3_stmt **out, convo_error *err);
void sq_stmt_done(sqlite3_stmt *st);
int sq_stmt_step(sq_conn *c, sqlite3_stmt *st, const char *what, convo_error *err);
int sq_stmt_run(sq_conn *c, sqlite3_stmt *st, const char *what, convo_error *err);
int sq_exec_id(sq_conn *c, enum stmt_id id, const char *what, convo_error *err);
int sq_exec_sql(sq_conn *c, const char *sql, const char *what, convo_error *err);
int sq_run_with_ints(sq_conn *c, enum stmt_id id, int nargs, int64_t a, int64_t b, int64_t d,
                     const char *what, convo_error *err);

typedef int (*tx_body)(sq_conn *c, void *arg, convo_error *err);
int sq_run_tx(convo_backend *b, int write, tx_body body, void *arg, convo_error *err);

/* ---- schema.c ---- */

int sq_migrate(sq_conn *c, convo_error *err);

/* ---- threads.c: thread rows and the log ---- */

typedef struct thread_row {
    int64_t num, length;
    int64_t expires_at; /* microseconds since the epoch; 0: never */
    int64_t generation; /* tail rewrites so far; a new thread is created with it */
    int64_t updated_at; /* the last write that rewrote the row */
    int64_t last_at;    /* created_at of the last message (0: none), read with length */
    int64_t entry_at;   /* where a write left its entries in the activity orders */
} thread_row;

/* A thread's activity time, its place in the activity order (convo_activity):
 * the later of its row's updated_at and its last message's created_at, since
 * an append writes the one and not the other. Needs length read. */
static inline int64_t activity_of(const thread_row *t)
{
    return t->updated_at > t->last_at ? t->updated_at : t->last_at;
}

/* How a call treats a thread whose ttl has passed: readers do not see it,
 * writers remove what is left of it first (in their own transaction) and then
 * do not see it either, so they start afresh; RAW sees it as it is. */
enum thread_view { VIEW_READ, VIEW_WRITE, VIEW_RAW };

int sq_thread_get(sq_conn *c, const char *id, enum thread_view view, thread_row *t, char **extra,
                  size_t *extra_len, convo_error *err);
int sq_thread_find(sq_conn *c, const char *id, enum thread_view view, thread_row *t,
                   convo_error *err);
int sq_thread_last(sq_conn *c, int64_t num, int64_t *length, int64_t *last_at,
                   convo_error *err);
/* The time of a thread's entry in the activity order while it is the thread
 * written last, from its creation or its second write in a row (the open
 * entry, index.c): its later writes leave the entry alone, and a reader takes
 * the time and length from the thread itself. Since layout 15 the open thread
 * has no rows in its keys' activity orders (list-key-open.sql adds it). */
#define ACTIVITY_OPEN INT64_MAX

int sq_activity_next(sq_conn *c, const thread_row *t, int64_t *at, convo_error *err);
int sq_activity_front(sq_conn *c, const char *id, const thread_row *t, int found, int64_t to,
                      int64_t length, int64_t *entry_at, convo_error *err);
int sq_thread_activity(sq_conn *c, int64_t num, int64_t *at, int64_t *length,
                       convo_error *err);
int sq_thread_touch(sq_conn *c, const char *id, thread_row *t, int64_t at, int64_t length,
                    convo_error *err);
int sq_thread_extend(sq_conn *c, const thread_row *t, convo_error *err);
int sq_thread_ensure(sq_conn *c, const char *id, int found, thread_row *t, convo_error *err);
int sq_thread_set_generation(sq_conn *c, const char *id, thread_row *t, int64_t generation,
                             int64_t length, convo_error *err);
int sq_thread_purge(sq_conn *c, int64_t num, convo_error *err);
int sq_length_conflict(int64_t length, int64_t expected, convo_error *err);
int sq_generation_conflict(int64_t generation, int64_t expected, convo_error *err);
int sq_idem_find(sq_conn *c, int64_t num, const char *key, convo_append_result *res,
                 convo_error *err);
int sq_idem_put(sq_conn *c, int64_t num, const char *key, int64_t first, size_t n,
                convo_error *err);
int sq_messages_put(sq_conn *c, enum stmt_id id, int64_t num, int64_t first,
                    const convo_message_in *msgs, size_t n, int64_t now,
                    const int64_t *created_at, convo_error *err);
int sq_log_append(sq_conn *c, const char *thread_id, int found, thread_row *t,
                  const convo_message_in *msgs, size_t n, const int64_t *created_at,
                  convo_error *err);

int sq_append(convo_backend *b, const char *thread_id, const convo_message_in *msgs, size_t n,
              const convo_append_opts *opts, convo_append_result *res, convo_error *err);
int sq_load(convo_backend *b, const char *thread_id, const convo_load_opts *opts,
            convo_history **out, convo_error *err);
int sq_save_extra(convo_backend *b, const char *thread_id, const char *patch, void *patch_obj,
                  convo_error *err);
int sq_thread_delete(convo_backend *b, const char *thread_id, convo_error *err);
int sq_thread_list(convo_backend *b, const char *after, size_t limit, convo_thread_page **out,
                   convo_error *err);
int sq_thread_fork(convo_backend *b, const char *src, const char *dst, int64_t upto,
                   int64_t expected_generation, convo_error *err);
int sq_thread_import(convo_backend *b, const char *thread_id, int64_t first_seq,
                     const convo_message_in *msgs, const int64_t *created_at, size_t n,
                     int64_t generation, int *skipped, convo_error *err);

/* ---- index.c: the declared extra keys and the rows kept with the extra ---- */

struct json_t; /* jansson's */

/* Longest canonical JSON value the index keeps (longer ones are listed by scan). */
#define INDEX_VALUE_MAX 512

int sq_index_value(const struct json_t *v, char **out, convo_error *err);
int sq_index_keys(sq_conn *c, char ***keys, convo_error *err);
void sq_index_keys_free(char **keys);
int sq_key_values_hold(const char *values, size_t len, const char *key, const char *value,
                       int *holds, convo_error *err);
void sq_open_memo_clear(sq_conn *c);
int sq_index_declare(convo_backend *b, char *const *keys, convo_error *err);
int sq_index_extra(sq_conn *c, int64_t num, int64_t at, int64_t length,
                   const struct json_t *patch, convo_error *err);
int sq_index_copy(sq_conn *c, int64_t src, int64_t dst, int64_t at, int64_t length,
                  convo_error *err);
int sq_index_forget(sq_conn *c, int64_t num, convo_error *err);

/* ---- list.c ---- */

int sq_thread_list_ex(convo_backend *b, const convo_thread_list_opts *opts, void *where,
                      const convo_thread_cursor *after, convo_thread_page **out,
                      convo_error *err);

/* Where a checkpoint stands: its row key (its place in its thread's order),
 * its place in the store's order, and the time of its first put. */
typedef struct cp_place {
    int64_t key, put_order, created_at;
} cp_place;

/* ---- checkpoints.c and removal.c ---- */
/* 1 with *at filled for checkpoint (ns, id) of thread num, 0 if none. */
int sq_cp_find(sq_conn *c, int64_t num, const char *ns, const char *id, cp_place *at,
               convo_error *err);
/* The store's last put_order. */
int sq_cp_last_order(sq_conn *c, int64_t *put_order, convo_error *err);

int sq_checkpoints_delete(sq_conn *c, int64_t lo, int64_t hi, convo_error *err);
/* Copies the checkpoints of thread src with log_length <= upto, their channel
 * lists, pending writes and values, to thread dst (new), in their order. */
int sq_checkpoints_copy(sq_conn *c, int64_t src, int64_t dst, int64_t upto, convo_error *err);
int sq_thread_copy(convo_backend *b, const char *src, const char *dst, int64_t upto,
                   int64_t expected_generation, convo_error *err);
int sq_checkpoints_beyond(sq_conn *c, int64_t num, int64_t keep, int drop, convo_error *err);

int sq_checkpoint_put(convo_backend *b, const convo_checkpoint_in *cp, convo_error *err);
int sq_checkpoint_put_log(convo_backend *b, const convo_checkpoint_in *cp,
                          const convo_message_in *msgs, convo_error *err);
int sq_checkpoint_put_refs(convo_backend *b, const convo_checkpoint_in *cp,
                           const convo_message_in *msgs, size_t nmsgs, const convo_swap *swaps,
                           size_t nswaps, convo_error *err);
int sq_checkpoint_put_writes(convo_backend *b, const char *thread_id, const char *ns,
                             const char *checkpoint_id, const char *task_id,
                             const char *task_path, const convo_write_in *writes, size_t n,
                             convo_error *err);
int sq_checkpoint_get(convo_backend *b, const char *thread_id, const char *ns,
                      const char *checkpoint_id, convo_checkpoint **out, convo_error *err);
int sq_checkpoint_list(convo_backend *b, const convo_checkpoint_list_opts *o, void *filter,
                       convo_checkpoint_set **out, convo_error *err);
int sq_checkpoint_prune(convo_backend *b, const char *thread_id, size_t keep_last,
                        convo_error *err);
int sq_checkpoint_delete(convo_backend *b, const char *thread_id, const char *const *ns,
                         const char *const *ids, size_t n, uint64_t *removed, convo_error *err);

/* ---- lists.c: channel lists as deltas (layout 9) ---- */

/* Decoded lists of one call (a list or a get), by checkpoint key; a list keeps
 * every row of a chain it decodes (keep_all), so the rows after come from it. */
typedef struct sq_list_cache {
    int keep_all;
    size_t n;
    int64_t keys[LIST_CACHE_MAX];
    unsigned char *lists[LIST_CACHE_MAX];
    size_t lens[LIST_CACHE_MAX];
} sq_list_cache;

void sq_list_cache_clear(sq_list_cache *k);
/* Forgets the memo: after a rollback, and before this connection changes or
 * removes checkpoint rows other than by a put. */
void sq_list_memo_clear(sq_conn *c);
/* The full list of checkpoint key, whose stored list is list[0..len): list
 * itself, or decoded against the rows before it (*out then in k). */
int sq_list_full(sq_conn *c, sq_list_cache *k, int64_t key, const void *list, size_t len,
                 const unsigned char **out, size_t *outlen, convo_error *err);
/* The list a put at key in namespace ns is coded against: the decoded full
 * list of the row just before key when it is of ns (e NULL: none, then pred
 * is 0, else that row's key), entries pointing into hold; depth: how many
 * deltas its chain holds. */
typedef struct sq_list_base {
    struct sq_entry *e;
    size_t n;
    unsigned char *hold;
    int64_t pred;
    int depth;
} sq_list_base;
int sq_list_base_get(sq_conn *c, int64_t key, const char *ns, sq_list_base *b,
                     convo_error *err);
void sq_list_base_free(sq_list_base *b);
/* What to store for a checkpoint put at key in namespace ns whose full list
 * is now[0..n): entries at the version base holds take base's value (layout
 * 11; or none), then *out (malloc'd) is a delta against base, or the full list
 * (values it takes from base over SQ_CARRY_MAX bytes then in convo_blobs). */
int sq_list_encode(sq_conn *c, int64_t key, const char *ns, const sq_list_base *b,
                   struct sq_entry *now, size_t n, unsigned char **out, size_t *outlen,
                   convo_error *err);
/* Before checkpoint key's list changes: the row after it, if a delta against
 * it, is stored in full. */
int sq_list_before_change(sq_conn *c, int64_t key, convo_error *err);
/* Before the checkpoints of thread num for which gone() is true go: each one
 * that stays right after one that goes, if a delta, is stored in full. */
typedef int (*sq_gone_fn)(void *arg, int64_t key, int64_t log_length);
int sq_lists_settle(sq_conn *c, int64_t num, sq_gone_fn gone, void *arg, convo_error *err);

/* ---- values.c: channel values in the list entries (layout 11) ---- */

/* A put's list: its entries (versions pointing into packed), with the values
 * they hold; to_blob[i]: cp->channels[i]'s value goes to convo_blobs. */
typedef struct sq_put_list {
    unsigned char *packed;
    size_t packed_len;
    struct sq_entry *e;
    size_t n;
    unsigned char **owned; /* copies of values found elsewhere */
    size_t nowned;
    unsigned char *to_blob;
} sq_put_list;
/* The entries of cp's list in thread num, each new to the row before (b) with
 * the value already stored for its version or else the one cp brings (small:
 * in the entry, else to_blob); old: cp's row is there already; parent: the
 * parent's key, 0 when none or not found. */
int sq_values_place(sq_conn *c, int64_t num, const convo_checkpoint_in *cp, int old,
                    int64_t parent, const sq_list_base *b, sq_put_list *p, convo_error *err);
void sq_put_list_free(sq_put_list *p);
/* A value a full list would repeat (it came from a row before) is kept in the
 * entry up to this many bytes; a larger one goes to convo_blobs. */
#define SQ_CARRY_MAX 64
/* The value of entry e (of thread num, namespace ns) into convo_blobs (a
 * version stored there already keeps its value); e then holds none. */
int sq_values_spill(sq_conn *c, int64_t num, const char *ns, struct sq_entry *e,
                    convo_error *err);
/* The value of (channel, version) held in list entries of namespace ns rows
 * from the checkpoint at key back through its chain and forward to the
 * thread's end: 1 when some held exactly old_type / old and now hold
 * new_type / new, 0 when none. */
int sq_values_swap(sq_conn *c, int64_t key, const char *ns, int64_t channel,
                   const unsigned char *version, size_t version_len, int64_t old_type,
                   const convo_blob *old, int64_t new_type, const convo_blob *new_value,
                   convo_error *err);
/* The number of name in convo_names (checkpoints.c): 1 with *num, 0 when it
 * has none and create is 0 (with create a new name is added). */
int sq_name_num(sq_conn *c, const char *name, int create, int64_t *num, convo_error *err);

/* ---- rewrite.c ---- */

int sq_replace_tail(convo_backend *b, const char *thread_id, int64_t keep,
                    const convo_message_in *msgs, size_t n, const convo_rewrite_opts *opts,
                    convo_rewrite_result *res, convo_error *err);

/* ---- maint.c ---- */

int sq_sweep(convo_backend *b, uint64_t *removed, convo_error *err);
int sq_bench_raw(convo_backend *b, const char *payload, size_t payload_len, size_t n,
                 double *seconds, convo_error *err);
int sq_stored_bytes(convo_backend *b, int64_t *bytes, convo_error *err);

/* segments.c (layout 17; convo_sealed() in segments.h): the seal a put at key
 * makes of the block it leaves behind; and, before a write to checkpoint
 * key's moved columns, where they are: 1 hot (its block unsealed first when
 * sealed: convo_checkpoint_hot's statements), 0 in its row or no such row
 * (convo_checkpoints'), < 0 an error. */
int sq_seg_after_put(sq_conn *c, int64_t key, convo_error *err);
int sq_seg_hot(sq_conn *c, int64_t key, convo_error *err);

#endif
