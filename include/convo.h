/* convo.h — the public API of libconvo: conversation threads (an append-only
 * log of role-tagged JSON messages plus one merged "extra" object) kept in an
 * embedded SQLite file, in memory, or on Redis, PostgreSQL or MongoDB. */
#ifndef CONVO_H
#define CONVO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) && __GNUC__ >= 4
#define CONVO_EXTERN __attribute__((visibility("default")))
#else
#define CONVO_EXTERN
#endif

#define CONVO_VERSION "0.1.0"

/* Every call returns 0 or one of these negative codes. */
enum {
    CONVO_OK = 0,
    CONVO_ERROR = -1,     /* anything not listed below */
    CONVO_EINVAL = -2,    /* bad argument: thread id, JSON, role, URL, option */
    CONVO_ENOTFOUND = -3, /* unknown thread or checkpoint */
    CONVO_ECONFLICT = -4, /* expected length did not match */
    CONVO_ETOOLARGE = -5, /* over a configured limit; nothing written */
    CONVO_EIO = -6,       /* the backend failed or went away */
    CONVO_ETIMEOUT = -7,  /* the backend did not answer in time */
    CONVO_ENOMEM = -8,
    CONVO_ENOTSUP = -9,   /* the driver or build cannot do this */
    CONVO_ECORRUPT = -10  /* stored data or a dump could not be decoded */
};

/* Filled by every call that takes one (it may be NULL). The first error in a
 * call is the one kept, as it is the root cause. Messages never hold passwords. */
typedef struct convo_error {
    int code;                 /* one of the CONVO_E* codes */
    char backend_code[16];    /* the backend's own code (SQLSTATE, sqlite rc, ...) or "" */
    char message[256];        /* one line of text */
} convo_error;

typedef struct convo_store convo_store;
typedef struct convo_history convo_history;
typedef struct convo_thread_page convo_thread_page;

/* Store options; start from CONVO_STORE_OPTS_INIT. A limit of 0 keeps the default. */
#define CONVO_STORE_OPTS_VERSION 3
typedef struct convo_store_opts {
    unsigned int version;
    size_t max_message_bytes;    /* default 1 MiB */
    size_t max_batch_messages;   /* default 10,000 */
    size_t max_extra_bytes;      /* default 1 MiB: the patch and the merged object */
    size_t max_checkpoint_bytes; /* default 16 MiB */
    const char *const *roles;    /* NULL = any role; else a NULL-terminated allow list */
    /* ---- version 2 ---- */
    /* Top-level extra keys the thread index keeps an index for, so that
     * convo_thread_list_ex with a `where` on them reads only matching threads
     * (NULL-terminated; NULL = whatever the store recorded). The first opener
     * that declares them records them in the store; later openers without the
     * declaration maintain the same ones; one declaring others is CONVO_EINVAL. */
    const char *const *indexed_keys;
    /* ---- version 3 ---- */
    /* Wait hooks (NULL = none; both or neither): wait_enter() is called just
     * before libconvo waits for something of this store's (the SQLite driver's
     * free connection, busy lock and WAL switch), in the waiting thread, and
     * wait_leave(what wait_enter returned) just after, before libconvo locks
     * anything again; never nested, never around network or disk I/O. For a
     * caller that keeps a lock of its own during its calls and must let other
     * threads take it while a call waits: Python passes PyEval_SaveThread and
     * PyEval_RestoreThread (bindings/python, docs/python.md). */
    void *(*wait_enter)(void);
    void (*wait_leave)(void *entered);
} convo_store_opts;
#define CONVO_STORE_OPTS_INIT { CONVO_STORE_OPTS_VERSION, 0, 0, 0, 0, NULL, NULL, NULL, NULL }

#define CONVO_DEFAULT_MAX_MESSAGE_BYTES ((size_t)1 << 20)
#define CONVO_DEFAULT_MAX_BATCH_MESSAGES ((size_t)10000)
#define CONVO_DEFAULT_MAX_EXTRA_BYTES ((size_t)1 << 20)
#define CONVO_DEFAULT_MAX_CHECKPOINT_BYTES ((size_t)16 << 20)
#define CONVO_MAX_THREAD_ID_BYTES 512
#define CONVO_MAX_ROLE_BYTES 64

/* Append options; start from CONVO_APPEND_OPTS_INIT. */
#define CONVO_APPEND_OPTS_VERSION 2
typedef struct convo_append_opts {
    unsigned int version;
    const char *idempotency_key; /* NULL = none; a retry with the same key is stored once;
                                  * the same key with another batch is CONVO_ECONFLICT */
    int64_t expected_length;     /* -1 = none; else store only if the thread has exactly this many */
    /* ---- version 2 ---- */
    int64_t expected_generation; /* -1 = none; else store only if the thread's generation (the
                                  * number of tail rewrites it had) is this, else CONVO_ECONFLICT.
                                  * A thread that does not exist yet has generation 0. */
} convo_append_opts;
#define CONVO_APPEND_OPTS_INIT { CONVO_APPEND_OPTS_VERSION, NULL, -1, -1 }

typedef struct convo_append_result {
    int64_t first_seq; /* seq of the first message of the batch */
    size_t count;      /* messages in the batch */
    int replayed;      /* 1 when an idempotency key matched an earlier batch */
} convo_append_result;

/* Load options; start from CONVO_LOAD_OPTS_INIT. */
#define CONVO_LOAD_OPTS_VERSION 1
typedef struct convo_load_opts {
    unsigned int version;
    int64_t from_seq; /* first seq to return (default 0) */
    int64_t limit;    /* at most this many messages; 0 = no limit */
    int64_t tail;     /* only the last N messages; 0 = off (applied before from_seq) */
    int with_extra;   /* 1 (default) to fetch the extra object as well */
} convo_load_opts;
#define CONVO_LOAD_OPTS_INIT { CONVO_LOAD_OPTS_VERSION, 0, 0, 0, 1 }

CONVO_EXTERN const char *convo_strerror(int code);
CONVO_EXTERN const char *convo_version(void);
/* Names of the drivers built in, NULL-terminated ("memory", "sqlite", ...). */
CONVO_EXTERN const char *const *convo_drivers(void);

/* url: memory:, sqlite:PATH, sqlite::memory:, redis://..., postgres://...,
 * postgresql://..., mongodb://... ; see README.md. */
CONVO_EXTERN int convo_open(convo_store **out, const char *url, convo_error *err);
CONVO_EXTERN int convo_open_ex(convo_store **out, const char *url,
                               const convo_store_opts *opts, convo_error *err);
CONVO_EXTERN void convo_close(convo_store *s);
/* The driver name of an open store ("sqlite", ...). */
CONVO_EXTERN const char *convo_store_driver(const convo_store *s);

/* Messages are JSON objects with a non-empty string "role"; each is stored and
 * returned byte for byte. lengths may be NULL when every message is NUL-terminated. */
CONVO_EXTERN int convo_append(convo_store *s, const char *thread_id,
                              const char *const *messages, const size_t *lengths, size_t n,
                              const convo_append_opts *opts, convo_append_result *res,
                              convo_error *err);

/* ---- Rewriting the tail: the log only grows, except by this one call ----
 * convo_replace_tail keeps messages [0, keep) of a thread and stores n new
 * messages after them (seq keep .. keep + n - 1, created_at the time of the
 * call), in one atomic step of the backend: a crash leaves the old tail or the
 * new one. n == 0 pops the messages from keep on. Every call increments the
 * thread's generation. Start the options from CONVO_REWRITE_OPTS_INIT. */
#define CONVO_REWRITE_OPTS_VERSION 1
typedef struct convo_rewrite_opts {
    unsigned int version;
    const char *idempotency_key; /* as for convo_append: a retry applies once and returns
                                  * what the first call did; another call under the same
                                  * key is CONVO_ECONFLICT */
    int64_t expected_length;     /* -1 = none; else CONVO_ECONFLICT unless the thread has
                                  * exactly this many messages */
    int64_t expected_generation; /* -1 = none; else CONVO_ECONFLICT unless the thread's
                                  * generation is this */
    /* The caller's view of the messages being replaced, [keep, length): when
     * expected_suffix is not NULL, the stored tail must be exactly these
     * nexpected_suffix messages, byte for byte, else CONVO_ECONFLICT and nothing
     * is written. (An empty view: a non-NULL pointer with nexpected_suffix 0.) */
    const char *const *expected_suffix;
    const size_t *expected_suffix_lengths; /* NULL = each is NUL-terminated */
    size_t nexpected_suffix;
    /* A checkpoint whose log_length is above keep refers to messages the call
     * removes: 0 (default) refuses with CONVO_ECONFLICT naming it; 1 removes
     * those checkpoints and their pending writes in the same atomic step. */
    int drop_checkpoints;
} convo_rewrite_opts;
#define CONVO_REWRITE_OPTS_INIT { CONVO_REWRITE_OPTS_VERSION, NULL, -1, -1, NULL, NULL, 0, 0 }

typedef struct convo_rewrite_result {
    int64_t first_seq;  /* keep: the seq of the first new message */
    size_t count;       /* new messages stored */
    int64_t removed;    /* messages removed (0 on a replay) */
    int64_t generation; /* the thread's generation after the call */
    int replayed;       /* 1 when an idempotency key matched an earlier call */
} convo_rewrite_result;

/* CONVO_ENOTFOUND for an unknown thread; CONVO_EINVAL when keep is negative or
 * above the thread's length (checked after the conditions). */
CONVO_EXTERN int convo_replace_tail(convo_store *s, const char *thread_id, int64_t keep,
                                    const char *const *messages, const size_t *lengths,
                                    size_t n, const convo_rewrite_opts *opts,
                                    convo_rewrite_result *res, convo_error *err);

CONVO_EXTERN int convo_load(convo_store *s, const char *thread_id, const convo_load_opts *opts,
                            convo_history **out, convo_error *err);
CONVO_EXTERN void convo_history_free(convo_history *h);
/* Messages returned by this load. */
CONVO_EXTERN size_t convo_history_count(const convo_history *h);
/* Messages in the whole thread, whatever was asked for. */
CONVO_EXTERN int64_t convo_history_length(const convo_history *h);
/* The i-th returned message, exactly as appended (NUL-terminated for convenience). */
CONVO_EXTERN const char *convo_history_message(const convo_history *h, size_t i, size_t *len);
CONVO_EXTERN const char *convo_history_role(const convo_history *h, size_t i);
CONVO_EXTERN int64_t convo_history_seq(const convo_history *h, size_t i);
/* Microseconds since 1970-01-01T00:00:00Z when the message was stored. */
CONVO_EXTERN int64_t convo_history_created_at(const convo_history *h, size_t i);
/* The merged extra object as compact JSON ("{}" when none was saved). */
CONVO_EXTERN const char *convo_history_extra(const convo_history *h);
/* The thread's generation: how many tail rewrites it has had (0 for a thread
 * never rewritten). Messages below the length never change while it stays. */
CONVO_EXTERN int64_t convo_history_generation(const convo_history *h);

/* Shallow merge: each top-level key of patch_json (an object) replaces that key;
 * null is stored as a value. Creates the thread when it does not exist. */
CONVO_EXTERN int convo_save_extra(convo_store *s, const char *thread_id, const char *patch_json,
                                  convo_error *err);

CONVO_EXTERN int convo_thread_delete(convo_store *s, const char *thread_id, convo_error *err);
/* Thread ids in byte order, strictly after `after` (NULL = from the start); limit 0 = 100. */
CONVO_EXTERN int convo_thread_list(convo_store *s, const char *after, size_t limit,
                                   convo_thread_page **out, convo_error *err);
CONVO_EXTERN size_t convo_thread_page_count(const convo_thread_page *p);
CONVO_EXTERN const char *convo_thread_page_id(const convo_thread_page *p, size_t i);
/* The `after` value for the next page, or NULL when this was the last page. */
CONVO_EXTERN const char *convo_thread_page_next(const convo_thread_page *p);
CONVO_EXTERN void convo_thread_page_free(convo_thread_page *p);
/* ---- The thread index: a user's conversations, newest first ----
 * Every thread has a created_at (its first write), an updated_at (its last
 * append, save_extra, tail rewrite or checkpoint put) and a length. */
enum {
    CONVO_ORDER_RECENT = 0,  /* updated_at, newest first (the default) */
    CONVO_ORDER_CREATED = 1, /* created_at, newest first */
    CONVO_ORDER_ID = 2       /* thread id in byte order */
};
#define CONVO_THREAD_LIST_OPTS_VERSION 1
typedef struct convo_thread_list_opts {
    unsigned int version;
    const char *where_json; /* threads whose extra contains this JSON object (as the checkpoint
                             * metadata filter: objects by key, arrays by element, scalars
                             * equal); NULL = every thread */
    int order;              /* CONVO_ORDER_* */
    int reverse;            /* 1: the other direction (oldest first; ids descending) */
    const char *after;      /* a cursor (convo_thread_page_cursor or _next) of the same order
                             * and direction: the rows after it; NULL = from the start */
    size_t limit;           /* 0 = 100; at most 10,000 */
    int with_extra;         /* 1: each row carries the thread's extra object */
    int with_last_message;  /* 1: each row carries its last message (NULL when empty) */
} convo_thread_list_opts;
#define CONVO_THREAD_LIST_OPTS_INIT { CONVO_THREAD_LIST_OPTS_VERSION, NULL, CONVO_ORDER_RECENT, \
                                      0, NULL, 0, 0, 0 }
/* Paging: in id and creation order a walk gives every thread that existed
 * throughout exactly once, also while others write; in activity order every
 * thread not written during the walk exactly once (one written meanwhile moves
 * ahead of the cursor: it may be missed, or seen twice). Expired, deleted and
 * half-imported threads are never listed. */
CONVO_EXTERN int convo_thread_list_ex(convo_store *s, const convo_thread_list_opts *opts,
                                      convo_thread_page **out, convo_error *err);
/* Per row of a page from convo_thread_list_ex (0 / NULL for convo_thread_list's). */
CONVO_EXTERN int64_t convo_thread_page_created_at(const convo_thread_page *p, size_t i);
CONVO_EXTERN int64_t convo_thread_page_updated_at(const convo_thread_page *p, size_t i);
CONVO_EXTERN int64_t convo_thread_page_length(const convo_thread_page *p, size_t i);
CONVO_EXTERN const char *convo_thread_page_extra(const convo_thread_page *p, size_t i);
CONVO_EXTERN const char *convo_thread_page_last_message(const convo_thread_page *p, size_t i,
                                                        size_t *len);
/* The value of `after` that continues after row i. */
CONVO_EXTERN const char *convo_thread_page_cursor(const convo_thread_page *p, size_t i);

/* Copy messages [0, upto) (upto -1 = all) and the extra object of src into a new
 * thread dst; CONVO_ECONFLICT when dst exists, CONVO_EINVAL when upto > length. */
CONVO_EXTERN int convo_thread_fork(convo_store *s, const char *src, const char *dst, int64_t upto,
                                   convo_error *err);
/* Fork options; start from CONVO_FORK_OPTS_INIT. */
#define CONVO_FORK_OPTS_VERSION 2
typedef struct convo_fork_opts {
    unsigned int version;
    int64_t expected_generation; /* -1 = none; else CONVO_ECONFLICT unless src has it */
    /* ---- version 2 ---- */
    /* 1: copy the checkpoints too (LangGraph's copy_thread): every checkpoint of
     * every namespace whose log_length is within the messages copied, with its
     * ids, parent, metadata, body, log_length, channel values and pending
     * writes, in the same put order (listing order). See docs/checkpoints.md
     * for which drivers do it in one atomic step. */
    int with_checkpoints;
} convo_fork_opts;
#define CONVO_FORK_OPTS_INIT { CONVO_FORK_OPTS_VERSION, -1, 0 }
/* convo_thread_fork with options (opts NULL = defaults). The new thread starts
 * at the generation src had (generations count rewrites of a thread's line of
 * messages, which the fork's first messages are). CONVO_ENOTFOUND when src does
 * not exist, CONVO_ECONFLICT when dst does: nothing is written then. */
CONVO_EXTERN int convo_thread_fork_ex(convo_store *s, const char *src, const char *dst,
                                      int64_t upto, const convo_fork_opts *opts,
                                      convo_error *err);

/* ---- Graph checkpoints (LangGraph-style snapshots layered on the log) ----
 * A checkpoint is keyed by (thread_id, checkpoint_ns, checkpoint_id). It lists
 * every channel's current version; a value is stored once per (thread, ns,
 * channel, version) and only sent with the checkpoint that introduced it.
 * log_length says that messages [0, log_length) of the thread belong to it. */

/* An opaque typed value: type is the serializer's tag ("json", "msgpack", ...). */
typedef struct convo_blob {
    const char *type;
    const void *bytes;
    size_t len;
} convo_blob;

typedef struct convo_channel_in {
    const char *channel;
    const char *version;
    const convo_blob *value; /* NULL when this version was stored before, or is empty */
} convo_channel_in;

#define CONVO_CHECKPOINT_IN_VERSION 5
typedef struct convo_checkpoint_in {
    unsigned int version;
    const char *thread_id;
    const char *checkpoint_ns;  /* NULL = "" */
    const char *checkpoint_id;  /* required; any string of 1..512 bytes */
    const char *parent_id;      /* NULL = none */
    const char *metadata_json;  /* a JSON object; NULL = {} */
    convo_blob body;            /* the snapshot without its channel values; type NULL = none */
    const convo_channel_in *channels;
    size_t nchannels;
    int64_t log_length;         /* messages of the thread that belong to it; 0 = none */
    /* ---- version 2: messages appended to the thread's log in the same atomic write
     * as the checkpoint (one transaction, Lua script or document write: one round
     * trip). They are validated as convo_append's batch is, and stored at seq
     * expected_length only when the thread then has exactly expected_length
     * messages; otherwise CONVO_ECONFLICT and nothing at all is written, neither
     * the messages nor the checkpoint. With nmessages > 0, log_length must be at
     * most expected_length + nmessages. Unused when nmessages is 0. ---- */
    const char *const *messages;
    const size_t *message_lengths; /* NULL = each message is NUL-terminated */
    size_t nmessages;
    int64_t expected_length;       /* the thread's length before the put; >= 0 */
    /* ---- version 3 ---- */
    int64_t expected_generation;   /* with messages: -1 = none; else CONVO_ECONFLICT (nothing
                                    * written) unless the thread's generation is this */
    /* ---- version 4: log references. NULL, or nchannels entries: a non-NULL
     * channel_items[i] is channel i's value as a list of items kept in the
     * thread's log (channels[i].value must then be NULL). The library plans the
     * put (see "Log references" below); messages must then be empty, and
     * expected_length may be -1 (the library reads the thread's length and
     * retries when another writer grew it meanwhile). */
    const struct convo_items_in *const *channel_items;
    /* ---- version 5: a list that starts with the log. NULL, or nchannels
     * entries: channel_log_prefix[i] = k > 0 says channel i's list is the log's
     * messages [0, k), in order, followed by the n items of channel_items[i]
     * (whose seqs and seqs_out cover those n only), so that a put of a grown
     * conversation passes only what is new. k must be within the log (below the
     * parent's log_length, else the thread's length is read): past it is
     * CONVO_ECONFLICT, nothing written; k needs channel_items[i]; 0 = none. */
    const int64_t *channel_log_prefix;
} convo_checkpoint_in;
#define CONVO_CHECKPOINT_IN_INIT { CONVO_CHECKPOINT_IN_VERSION, NULL, NULL, NULL, NULL, NULL, \
                                   { NULL, NULL, 0 }, NULL, 0, 0, NULL, NULL, 0, -1, -1, NULL, NULL }

/* A pending write of a task: idx >= 0 is stored once per (task_id, idx);
 * a negative idx (errors, interrupts, ...) replaces what that idx held. */
typedef struct convo_write_in {
    int64_t idx;
    const char *channel;
    convo_blob value;
} convo_write_in;

typedef struct convo_checkpoint convo_checkpoint;
typedef struct convo_checkpoint_set convo_checkpoint_set;

/* Stores a checkpoint (replacing one with the same key) and creates the thread
 * if needed. The stored key is the input's (thread_id, ns or "", checkpoint_id). */
CONVO_EXTERN int convo_checkpoint_put(convo_store *s, const convo_checkpoint_in *cp,
                                      convo_error *err);
/* CONVO_ENOTFOUND when the checkpoint does not exist (e.g. its thread was deleted). */
CONVO_EXTERN int convo_checkpoint_put_writes(convo_store *s, const char *thread_id,
                                             const char *checkpoint_ns,
                                             const char *checkpoint_id, const char *task_id,
                                             const char *task_path, const convo_write_in *writes,
                                             size_t n, convo_error *err);
/* checkpoint_id NULL = the latest of that namespace. */
CONVO_EXTERN int convo_checkpoint_get(convo_store *s, const char *thread_id,
                                      const char *checkpoint_ns, const char *checkpoint_id,
                                      convo_checkpoint **out, convo_error *err);

/* A get that may leave out the log messages the caller already holds. A binding
 * that keeps the items it revived (by thread, generation and seq) passes what it
 * holds: the texts of messages [0, known_length) as they were at generation
 * known_generation, in the thread whose message 0 was created at known_origin
 * (convo_checkpoint_generation and convo_checkpoint_log_origin of an earlier
 * checkpoint of the thread; the origin tells a thread deleted and started again
 * under the same id, whose generation is 0 again, from the one the caller read).
 * When the thread is still that one at that generation, every resolved item
 * (channel values, pending writes, inputs) with 0 <= seq < known_length comes
 * back with a NULL text and length 0, its seq set, and those messages are not
 * read (two short reads of the log instead: message 0 and the messages from
 * known_length - 1 on); otherwise every text is given. Either way
 * convo_checkpoint_generation and convo_checkpoint_log_origin tell what the
 * items were resolved at. */
#define CONVO_CHECKPOINT_GET_OPTS_VERSION 1
typedef struct convo_checkpoint_get_opts {
    unsigned int version;
    const char *thread_id;
    const char *checkpoint_ns; /* NULL = "" */
    const char *checkpoint_id; /* NULL = the latest of that namespace */
    int64_t known_generation;  /* -1 = nothing known */
    int64_t known_length;      /* 0 = nothing known; > 0 needs known_generation and known_origin */
    int64_t known_origin;      /* -1 = nothing known */
} convo_checkpoint_get_opts;
#define CONVO_CHECKPOINT_GET_OPTS_INIT { CONVO_CHECKPOINT_GET_OPTS_VERSION, NULL, NULL, NULL, -1, 0, -1 }
CONVO_EXTERN int convo_checkpoint_get_ex(convo_store *s, const convo_checkpoint_get_opts *opts,
                                         convo_checkpoint **out, convo_error *err);

#define CONVO_CHECKPOINT_LIST_OPTS_VERSION 5
typedef struct convo_checkpoint_list_opts {
    unsigned int version;
    const char *thread_id;     /* NULL = every thread */
    const char *checkpoint_ns; /* NULL = every namespace */
    /* A checkpoint id: only checkpoints put before it are listed. It names the
     * checkpoint (before_thread_id, before_ns, before); an unknown one is
     * CONVO_ENOTFOUND on every driver. */
    const char *before;
    size_t limit;              /* 0 = no limit */
    const char *filter_json;   /* metadata containment, e.g. {"source":"loop","step":3}; NULL = all */
    /* ---- version 2: `before` across threads (thread_id NULL lists every thread's
     * checkpoints put before that one; the order does not depend on the id format). */
    const char *before_thread_id; /* the thread of `before`; NULL = thread_id (then required) */
    const char *before_ns;        /* its namespace; NULL = checkpoint_ns, else "" */
    /* ---- version 3: what the caller holds of thread_id's log, as for
     * convo_checkpoint_get_ex (known_length > 0 needs thread_id). */
    int64_t known_generation; /* -1 = nothing known */
    int64_t known_length;     /* 0 = nothing known */
    int64_t known_origin;     /* -1 = nothing known */
    /* ---- version 4: 1 = a channel value that is a list of items comes back
     * without its items (convo_items n = 0; its key and rest as stored), and
     * the log is not read for it: a walk over ancestors that needs only their
     * pending writes and metadata (LangGraph's delta channel history) reads
     * none of their lists. The key and rest still tell which list a channel
     * holds; other values, pending writes and metadata are as without it. */
    int without_channel_items;
    /* ---- version 5: a channel name: each checkpoint comes back with only what
     * a walk over ancestors for that channel needs (LangGraph's delta channel
     * history): its ids, parent, log_length and created_at, that one channel
     * (its version, and its value as without_channel_items gives it: a list's
     * key and rest, no item; a plain value whole) and its pending writes to that
     * channel alone (resolved as usual); no body (type NULL), metadata "{}", no
     * other channel or write, and the log read for those writes alone. The
     * metadata filter still applies to the stored metadata. NULL = everything. */
    const char *only_channel;
} convo_checkpoint_list_opts;
#define CONVO_CHECKPOINT_LIST_OPTS_INIT { CONVO_CHECKPOINT_LIST_OPTS_VERSION, NULL, NULL, NULL, 0, \
                                          NULL, NULL, NULL, -1, 0, -1, 0, NULL }

/* Newest first (the order in which they were put). */
CONVO_EXTERN int convo_checkpoint_list(convo_store *s, const convo_checkpoint_list_opts *opts,
                                       convo_checkpoint_set **out, convo_error *err);
CONVO_EXTERN size_t convo_checkpoint_set_count(const convo_checkpoint_set *set);
CONVO_EXTERN const convo_checkpoint *convo_checkpoint_set_get(const convo_checkpoint_set *set,
                                                              size_t i);
CONVO_EXTERN void convo_checkpoint_set_free(convo_checkpoint_set *set);

/* Keeps the newest keep_last checkpoints of each namespace of the thread, and
 * every value and write they need; removes the rest. */
CONVO_EXTERN int convo_checkpoint_prune(convo_store *s, const char *thread_id, size_t keep_last,
                                        convo_error *err);
/* Removes every checkpoint convo_checkpoint_list would list with these opts
 * (opts required: a thread or all, a namespace or all, a metadata filter,
 * before, limit), with its pending writes and every channel value no remaining
 * checkpoint refers to; *removed (may be NULL) gets how many. Each thread's
 * share is removed in one atomic step; threads one after the other. LangGraph's
 * delete_for_runs is one call per run id with filter_json {"run_id": ID} and
 * thread_id NULL. Nothing matching is not an error. */
CONVO_EXTERN int convo_checkpoint_delete(convo_store *s, const convo_checkpoint_list_opts *opts,
                                         uint64_t *removed, convo_error *err);

CONVO_EXTERN void convo_checkpoint_free(convo_checkpoint *cp);
/* The getters below accept a NULL checkpoint, as the history and page getters
 * do: strings are NULL, counts and numbers 0, the body has a NULL type. */
CONVO_EXTERN const char *convo_checkpoint_thread_id(const convo_checkpoint *cp);
CONVO_EXTERN const char *convo_checkpoint_ns(const convo_checkpoint *cp);
CONVO_EXTERN const char *convo_checkpoint_id(const convo_checkpoint *cp);
CONVO_EXTERN const char *convo_checkpoint_parent_id(const convo_checkpoint *cp); /* or NULL */
CONVO_EXTERN const char *convo_checkpoint_metadata(const convo_checkpoint *cp); /* JSON object */
CONVO_EXTERN int64_t convo_checkpoint_log_length(const convo_checkpoint *cp);
CONVO_EXTERN int64_t convo_checkpoint_created_at(const convo_checkpoint *cp);
/* The thread's generation read with the log when the checkpoint's references
 * were resolved (the seqs of its items are valid for that generation: pass it
 * as expected_generation with them); -1 when it has no reference. */
CONVO_EXTERN int64_t convo_checkpoint_generation(const convo_checkpoint *cp);
/* The created_at of the thread's message 0 as read when the checkpoint's log
 * references were resolved (what convo_checkpoint_get_opts.known_origin takes);
 * -1 when message 0 was not read (no reference starts at the log's start). */
CONVO_EXTERN int64_t convo_checkpoint_log_origin(const convo_checkpoint *cp);
/* The body blob; type is NULL when the checkpoint had none. */
CONVO_EXTERN convo_blob convo_checkpoint_body(const convo_checkpoint *cp);
/* Channels of the snapshot in name order; value.type is NULL when the version has no value. */
CONVO_EXTERN size_t convo_checkpoint_channel_count(const convo_checkpoint *cp);
CONVO_EXTERN const char *convo_checkpoint_channel(const convo_checkpoint *cp, size_t i,
                                                  const char **version, convo_blob *value);
/* Pending writes in (task_id, idx) order. */
CONVO_EXTERN size_t convo_checkpoint_write_count(const convo_checkpoint *cp);
CONVO_EXTERN const char *convo_checkpoint_write(const convo_checkpoint *cp, size_t i,
                                                const char **task_path, int64_t *idx,
                                                const char **channel, convo_blob *value);

/* ---- Log references: each message stored once (docs/checkpoints.md) ----
 * A checkpoint channel value, a pending write's value or an input can be a
 * list of items kept in the thread's log: each item is a message (a JSON
 * object with a non-empty string "role", validated as convo_append's). The
 * library stores such a list as a reference (blob type "convo/items"): seq
 * ranges of the log plus, inline, the items that are not in it; get and list
 * give the items back resolved, with one load of the log per checkpoint.
 *
 * The rule for what enters the log: a put's list (with log = 1) whose items
 * before its fresh ones are exactly its parent checkpoint's list of that
 * channel appends the fresh ones to the log in the same atomic write as the
 * checkpoint; any other list keeps its fresh items inline (a branch that
 * rewrites history, a removed or replaced message). Pending writes never
 * append: their items stay inline until the put that appends them, which
 * turns the parent's pending writes and channel values holding those items
 * into references in the same atomic write (an interrupted or failed step
 * leaves nothing in the log).
 *
 * An item is known to be log seq q (and not compared) when seqs[i] == q: a
 * binding passes what get or an earlier put told it (seqs_out), and makes the
 * put conditional with expected_generation. Items without a seq are compared
 * with the parent's list by their text (one load of the log). */
typedef struct convo_items_in {
    const char *const *items;  /* n message texts; items[i] is not read (may be NULL)
                                * when seqs[i] >= 0 */
    const size_t *lengths;     /* NULL = each is NUL-terminated */
    const int64_t *seqs;       /* NULL, or n entries: the log seq item i is, or -1 */
    size_t n;
    /* The value is an object whose member `key` is the list and whose other
     * members are the blob `rest` (e.g. LangGraph's {messages: [...], ...}
     * input); key NULL = the value is the list itself. */
    const char *key;
    convo_blob rest;           /* type NULL = no other members */
    int64_t *seqs_out;         /* NULL, or n entries filled on success: the seq
                                * of each item in the log, -1 for one kept inline */
    /* 1: the list is a conversation (a message channel): in a checkpoint put,
     * its fresh items enter the log when the rule above allows; 0: its fresh
     * items stay inline until a later put appends them (an input, a write). */
    int log;
} convo_items_in;

/* A resolved list of items (valid as long as the checkpoint). */
typedef struct convo_items {
    size_t n;
    const char *const *items;  /* NUL-terminated message texts */
    const size_t *lengths;
    const int64_t *seqs;       /* the log seq of each item, -1 for one kept inline */
    const char *key;           /* as in convo_items_in */
    convo_blob rest;
} convo_items;

/* 1 and *out filled when channel i's value (or write i's) is a list of items;
 * 0 when it is a plain blob or i is out of range. */
CONVO_EXTERN int convo_checkpoint_channel_items(const convo_checkpoint *cp, size_t i,
                                                convo_items *out);
CONVO_EXTERN int convo_checkpoint_write_items(const convo_checkpoint *cp, size_t i,
                                              convo_items *out);

/* Pending writes with log references (convo_checkpoint_put_writes with items). */
#define CONVO_WRITES_IN_VERSION 1
typedef struct convo_writes_in {
    unsigned int version;
    const char *thread_id;
    const char *checkpoint_ns;   /* NULL = "" */
    const char *checkpoint_id;
    const char *task_id;
    const char *task_path;       /* NULL = "" */
    const convo_write_in *writes;
    size_t n;
    /* NULL, or n entries: a non-NULL items[i] is write i's value as a list of
     * items (writes[i].value is then ignored). */
    const convo_items_in *const *items;
} convo_writes_in;
#define CONVO_ITEMS_IN_INIT { NULL, NULL, NULL, 0, NULL, { NULL, NULL, 0 }, NULL, 0 }
#define CONVO_WRITES_IN_INIT { CONVO_WRITES_IN_VERSION, NULL, NULL, NULL, NULL, NULL, NULL, 0, NULL }
CONVO_EXTERN int convo_checkpoint_put_writes_ex(convo_store *s, const convo_writes_in *w,
                                                convo_error *err);

/* ---- Moving threads between stores: a versioned msgpack stream (docs/dump-format.md) ---- */
/* Write all len bytes or return non-zero. */
typedef int (*convo_write_fn)(void *ctx, const void *buf, size_t len);
/* Read up to len bytes: the count, 0 at end of input, negative on error. */
typedef long (*convo_read_fn)(void *ctx, void *buf, size_t len);

typedef struct convo_dump_stats {
    uint64_t threads, messages, checkpoints, writes;
    uint64_t bytes;    /* stream bytes written or read so far */
    uint64_t skipped;  /* import: messages already present (an earlier import) */
} convo_dump_stats;

#define CONVO_DUMP_OPTS_VERSION 2
typedef struct convo_dump_opts {
    unsigned int version;
    /* Called after each thread and every few thousand messages; NULL = none. */
    void (*progress)(void *ctx, const convo_dump_stats *stats);
    void *progress_ctx;
    /* ---- version 2 ---- */
    /* export: one generation per thread named (n entries, -1 = any): a thread
     * whose generation differs is CONVO_ECONFLICT before anything of it is
     * written. NULL = none. A thread rewritten while it is being exported is
     * CONVO_ECONFLICT whatever this says: a dump never mixes two generations. */
    const int64_t *expected_generations;
} convo_dump_opts;
#define CONVO_DUMP_OPTS_INIT { CONVO_DUMP_OPTS_VERSION, NULL, NULL, NULL }

/* Writes the threads named (n == 0: every thread) with their messages, extra,
 * checkpoints, channel values and pending writes. Memory use does not grow with
 * the size of a thread. */
CONVO_EXTERN int convo_export(convo_store *s, const char *const *thread_ids, size_t n,
                              convo_write_fn write, void *write_ctx, const convo_dump_opts *opts,
                              convo_dump_stats *stats, convo_error *err);
/* Reads a dump and stores it: messages keep their seq and created_at. Importing the
 * same dump twice changes nothing. A truncated or corrupt dump is CONVO_ECORRUPT with
 * the byte offset in the message; a thread the import created is removed again when
 * the error hit it. */
CONVO_EXTERN int convo_import(convo_store *s, convo_read_fn read, void *read_ctx,
                              const convo_dump_opts *opts, convo_dump_stats *stats,
                              convo_error *err);
/* export from src streamed into import to dst, in bounded memory. The error is the
 * source's when reading it failed, else the destination's. */
CONVO_EXTERN int convo_copy(convo_store *src, convo_store *dst, const char *const *thread_ids,
                            size_t n, const convo_dump_opts *opts, convo_dump_stats *stats,
                            convo_error *err);

/* Removes the threads whose ttl (the URL's ttl=S) has passed; *removed gets their
 * number. Drivers whose server expires data itself report 0. */
CONVO_EXTERN int convo_sweep(convo_store *s, uint64_t *removed, convo_error *err);

/* ---- Measuring (used by `convo bench`) ---- */
/* Runs the backend's own raw write primitive n times on payload (SQLite: a bare
 * INSERT transaction; Redis: one RPUSH; PostgreSQL: one INSERT round trip) and
 * reports the seconds taken; CONVO_ENOTSUP where no raw primitive applies. */
CONVO_EXTERN int convo_bench_raw(convo_store *s, const char *payload, size_t payload_len,
                                 size_t n, double *seconds, convo_error *err);
/* Bytes the backend uses for this store's data (see docs/performance.md). */
CONVO_EXTERN int convo_store_bytes(convo_store *s, int64_t *bytes, convo_error *err);

/* Formats microseconds since the epoch as UTC RFC 3339 with microseconds
 * ("2026-11-21T10:00:00.000123Z") into buf (at least 32 bytes). */
CONVO_EXTERN void convo_format_time(int64_t micros, char *buf, size_t size);

#ifdef __cplusplus
}
#endif
#endif
