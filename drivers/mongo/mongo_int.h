/* mongo_int.h — what the files of the MongoDB driver share: the backend, a call
 * (a pooled client and its collections), the documents' C forms, and each file's
 * functions used by the others, prefixed convo__mg_ (every name libconvo.a
 * defines starts with convo). Private to drivers/mongo; the core never includes it.
 * docs/mongo.md describes the layout. */
#ifndef CONVO_MONGO_INT_H
#define CONVO_MONGO_INT_H

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
#define SCHEMA_VERSION 6
#define ATTEMPTS 1000                         /* tries after losing a race to another writer */
#define LOAD_ATTEMPTS 32 /* tries when a delete, or collecting after a rewrite, cut a load short */
#define TTL_MARGIN_MS ((int64_t)60000)        /* batches outlive their thread doc by this */
#define FORK_STALE_MS ((int64_t)600000)       /* a fork placeholder this old was abandoned */
#define MAX_DEPTH 95                          /* MongoDB nests documents at most 100 deep */
#define COPY_FLUSH_BYTES ((size_t)8 * 1024 * 1024)
#define GC_ROUNDS 16

/* Collections whose documents belong to one generation of a thread ({t, g, ...}). */
enum { BATCHES, CHECKPOINTS, VALUES, WRITES, KINDS };
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
    char **index_keys; /* the extra keys recorded in <prefix>_meta (NULL-terminated) or NULL */
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
    bool indexed;      /* it carries ua and ca: the thread index lists it */
    int64_t ua, ca, ln, sl; /* updated_at, created_at (micros), length as the index has them,
                             * and the slot of the batch they were read from */
    bson_t extra;      /* as stored (escaped keys); empty when not read */
} thread_doc;

/* The head of a <prefix>_batches document: its slot s in the chain, messages
 * [e - n, e) (s == e - n unless a rewrite came before it), the thread's
 * rewrite count r from it on, and pb, the slot of the batch holding message
 * e - n - 1 (NO_BELOW when not stored: then that batch ends at e - n); a fence
 * has n == 0. */
typedef struct batch_head {
    bool found, fence;
    int64_t s, e, n, r, pb, at;
} batch_head;

#define NO_BELOW INT64_MIN

/* A walk down a chain by slot (see Load in docs/mongo.md): lim, where the
 * messages of the batches taken so far start; want, the slot of the next batch
 * to take (NO_BELOW: the next one must end exactly at lim). */
typedef struct chain_walk {
    int64_t lim, want;
    bool started;
} chain_walk;

enum { STEP_SKIP, STEP_TAKE, STEP_GAP };

/* Where a new batch goes: its slot, the seq of its first message, the rewrite
 * count it carries, and its pb (NO_BELOW: not stored). */
typedef struct batch_pos {
    int64_t slot, start, r, pb;
} batch_pos;

/* Batch documents collected while walking down a thread, highest first, each
 * with hi: its messages from there on were replaced by a rewrite. */
typedef struct walk {
    bson_t **docs;
    int64_t *hi;
    size_t count, cap;
} walk;

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

/* mongo.c: the driver table, open and close, the URL */
char *convo__mg_join(const char *a, const char *b);

/* conn.c: calls (a pooled client), errors, small queries, generation ids */
int64_t convo__mg_now_ms(void);
int convo__mg_fail(call *c, const bson_error_t *e, const char *what);
int convo__mg_corrupt(call *c, const char *what);
int convo__mg_no_memory(call *c);
int convo__mg_contention(call *c);
/* Runs attempt(c, arg, &again) until it fails or does not ask to go again,
 * backing off after lost races; past ATTEMPTS, convo__mg_contention. */
int convo__mg_retry(call *c, int (*attempt)(call *c, const void *arg, bool *again),
                    const void *arg);
bool convo__mg_is_duplicate(const bson_error_t *e);
void convo__mg_backoff(int attempt);
void convo__mg_call_begin(call *c, convo_backend *b, convo_error *err);
mongoc_collection_t *convo__mg_kind(call *c, int k);
void convo__mg_call_end(call *c);
int convo__mg_find_one(call *c, mongoc_collection_t *coll, const bson_t *filter, const bson_t *opts,
                       bson_t *out, bool *found, const char *what);
int convo__mg_insert_doc(call *c, mongoc_collection_t *coll, const bson_t *doc, bool *dup,
                         const char *what);
int convo__mg_update_one(call *c, mongoc_collection_t *coll, const bson_t *filter,
                         const bson_t *update, int64_t *matched, const char *what);
int convo__mg_update_one_unacked(call *c, mongoc_collection_t *coll, const bson_t *filter,
                                 const bson_t *update, const char *what);
int convo__mg_update_many(call *c, mongoc_collection_t *coll, const bson_t *filter,
                          const bson_t *update, const char *what);
int convo__mg_delete_docs(call *c, mongoc_collection_t *coll, const bson_t *filter, bool many,
                          int64_t *deleted, const char *what);
int64_t convo__mg_get_int(const bson_t *doc, const char *key, int64_t def);
bool convo__mg_get_bool(const bson_t *doc, const char *key);
int64_t convo__mg_get_date(const bson_t *doc, const char *key);
bson_t *convo__mg_generation_filter(const bson_oid_t *g);
void convo__mg_new_generation(const char *id, bson_oid_t *g);
void convo__mg_generation_range(const char *id, bson_oid_t *low, bson_oid_t *high);

/* json.c: extra: JSON <-> BSON with reversible key escaping */
char *convo__mg_key_escape(const char *k);
int convo__mg_put_json(call *c, bson_t *doc, const char *key, json_t *v, int depth);
int convo__mg_extra_to_json(call *c, const bson_t *extra, char **out);

/* generations.c: thread documents, batches, retiring generations, garbage */
int convo__mg_parse_thread(call *c, const bson_t *doc, thread_doc *t);
int convo__mg_read_thread(call *c, const char *id, bool with_extra, thread_doc *t);
void convo__mg_thread_free(thread_doc *t);
bool convo__mg_expired(const thread_doc *t, int64_t now);
bool convo__mg_build_thread(const convo_backend *b, const char *id, const bson_oid_t *g, bool live,
                            bool forking, int64_t v, const bson_t *extra, int64_t now, bson_t *doc);
void convo__mg_parse_head(const bson_t *doc, batch_head *h);
int convo__mg_top_batch(call *c, const bson_oid_t *g, batch_head *h);
void convo__mg_next_pos(const batch_head *top, batch_pos *p);
int convo__mg_walk_step(chain_walk *w, const batch_head *h, int64_t *hi);
int convo__mg_insert_batch(call *c, const bson_t *doc, bool *dup, const char *what);
int convo__mg_insert_fence(call *c, const bson_oid_t *g, const batch_head *top, bool *dup);
int convo__mg_retire(call *c, const char *id, const bson_oid_t *g);
int convo__mg_delete_generation(call *c, const bson_oid_t *g, const char *what);
int convo__mg_mark_dying(call *c, const char *id, const bson_oid_t *g, bool only_first,
                         int64_t *matched);
int convo__mg_finish_delete(call *c, const char *id, const bson_oid_t *g, bool marked);
int convo__mg_abort_fork(call *c, const char *id, const bson_oid_t *g);
int convo__mg_generation_named(call *c, const bson_oid_t *g, bool *named);
int convo__mg_collect_garbage(call *c, const char *id);
int convo__mg_refresh_batches(call *c, const thread_doc *t, int64_t now, bool *refreshed);
void convo__mg_expiry_fields(const convo_backend *b, bson_t *max, int64_t now, bool refreshed);
void convo__mg_append_expiry(const convo_backend *b, bson_t *update, int64_t now, bool refreshed);
int convo__mg_clear_way(call *c, const char *id, bool create, thread_doc *t, bool *created,
                        bool *again);
int convo__mg_writable_thread(call *c, const char *id, bool with_extra, bool create, thread_doc *t,
                              bool *again);

/* threads.c: append, load, save_extra, delete, list */
bool convo__mg_add_message(bson_t *arr, uint32_t i, const convo_message_in *msg, bool own_at,
                           int64_t at, size_t limit);
int convo__mg_build_messages(call *c, const convo_message_in *msgs, size_t n, bson_t *arr);
int convo__mg_batch_messages(call *c, const convo_message_in *msgs, size_t n, const char *key,
                             const char *too_large, bson_t *arr);
bool convo__mg_build_batch(const convo_backend *b, const bson_oid_t *g, const batch_pos *p,
                           size_t n, const char *key, int64_t at, int64_t now, const bson_t *m,
                           bson_t *doc);
bool convo__mg_first_of(const bson_t *doc, const char *name, bson_t *out);
void convo__mg_lookup(bson_t *stages, const char *pos, const char *from, const bson_t *match,
                      const bson_t *rest, const char *as);
void convo__mg_lookup_batches(call *c, bson_t *stages, const char *pos, const bson_t *match,
                              const bson_t *rest, const char *as);
int convo__mg_read_for_append(call *c, const char *id, const char *key, thread_doc *t,
                              batch_head *top, bool *replayed, convo_append_result *res);
int convo__mg_extend_expiry(call *c, const char *id, const thread_doc *t, int64_t now, bool *again);
int convo__mg_mark_live(call *c, const char *id, const bson_oid_t *g, int64_t *matched);
int convo__mg_append(convo_backend *b, const char *id, const convo_message_in *msgs, size_t n,
                     const convo_append_opts *opts, convo_append_result *res, convo_error *err);
void convo__mg_walk_free(walk *w);
int convo__mg_walk_keep(walk *w, const bson_t *doc);
int convo__mg_load(convo_backend *b, const char *id, const convo_load_opts *opts,
                   convo_history **out, convo_error *err);
int convo__mg_save_extra(convo_backend *b, const char *id, const char *patch, void *patch_obj,
                         convo_error *err);
int convo__mg_not_found(call *c);
int convo__mg_drop_placeholder(call *c, const char *id, const bson_oid_t *g, bool *again);
int convo__mg_thread_delete(convo_backend *b, const char *id, convo_error *err);
int convo__mg_visible(call *c, const thread_doc *t, int64_t now, bool *yes);
int convo__mg_thread_list(convo_backend *b, const char *after, size_t limit,
                          convo_thread_page **out, convo_error *err);

/* rewrite.c: the tail rewrite, and what a reader does for it */
int convo__mg_replace_tail(convo_backend *b, const char *id, int64_t keep,
                           const convo_message_in *msgs, size_t n, const convo_rewrite_opts *opts,
                           convo_rewrite_result *res, convo_error *err);
int convo__mg_settle_drop(call *c, const bson_oid_t *g, const bson_t *batch, bool wait);
int convo__mg_generation_conflict(call *c, int64_t length, int64_t generation,
                                  int64_t expected_generation);

/* fork.c: thread fork */
int convo__mg_thread_fork(convo_backend *b, const char *src, const char *dst, int64_t upto,
                          int64_t expected_generation, convo_error *err);

/* checkpoints.c: checkpoint put, put with messages, settling, put_writes */
bson_t *convo__mg_ns_filter(const bson_oid_t *g, const char *ns);
const char *convo__mg_get_utf8(const bson_t *doc, const char *key);
const uint8_t *convo__mg_get_binary(const bson_t *doc, const char *key, uint32_t *len);
int convo__mg_checkpoint_put(convo_backend *b, const convo_checkpoint_in *cp, convo_error *err);
int convo__mg_settle_found(call *c, const bson_oid_t *g, const bson_t *doc);
int convo__mg_unmark(call *c, const bson_oid_t *g, const bson_t *batch);
void convo__mg_lookup_pending(call *c, bson_t *stages, const char *pos);
int convo__mg_read_settled(call *c, const char *id, thread_doc *t, bool *yes);
int convo__mg_read_visible(call *c, const char *id, thread_doc *t);
int convo__mg_checkpoint_put_log(convo_backend *b, const convo_checkpoint_in *cp,
                                 const convo_message_in *msgs, convo_error *err);
/* refs.c */
int convo__mg_checkpoint_put_refs(convo_backend *b, const convo_checkpoint_in *cp,
                                  const convo_message_in *msgs, size_t nmsgs,
                                  const convo_swap *swaps, size_t nswaps, convo_error *err);
int convo__mg_checkpoint_put_writes(convo_backend *b, const char *id, const char *ns,
                                    const char *cpid, const char *task, const char *path,
                                    const convo_write_in *writes, size_t n, convo_error *err);

/* checkpoint_reads.c: checkpoint get, list and prune */
int convo__mg_checkpoint_get(convo_backend *b, const char *id, const char *ns, const char *cpid,
                             convo_checkpoint **out, convo_error *err);
int convo__mg_checkpoint_list(convo_backend *b, const convo_checkpoint_list_opts *o, void *filter,
                              convo_checkpoint_set **out, convo_error *err);
int convo__mg_checkpoint_prune(convo_backend *b, const char *id, size_t keep_last,
                               convo_error *err);
int convo__mg_checkpoint_delete(convo_backend *b, const char *id, const char *const *ns,
                                const char *const *ids, size_t n, uint64_t *removed,
                                convo_error *err);
/* checkpoints.c: the next number of the store-wide checkpoint counter */
int convo__mg_next_order(call *c, int64_t *order);
/* the next k numbers at once: *last is the highest (the first is *last - k + 1) */
int convo__mg_take_orders(call *c, int64_t k, int64_t *last);
/* copy.c: the checkpoints of src's generation gs within its first length
 * messages, with their writes and values, into generation gd (a fork's
 * placeholder, not committed yet) */
int convo__mg_copy_checkpoints(call *c, const char *src, const bson_oid_t *gs,
                               const bson_oid_t *gd, int64_t length);
int convo__mg_thread_copy(convo_backend *b, const char *src, const char *dst, int64_t upto,
                          int64_t expected_generation, convo_error *err);

/* import.c: thread import (convo import / copy) */
int convo__mg_thread_import(convo_backend *b, const char *id, int64_t first_seq,
                            const convo_message_in *msgs, const int64_t *created_at, size_t n,
                            int64_t generation, int *skipped, convo_error *err);

/* index.c: the thread index: times and length on the thread doc, declared keys, listing */
bool convo__mg_listable(const char *id);
int convo__mg_index_after_write(call *c, const char *id, const bson_oid_t *g, int64_t slot,
                                 int64_t length, int64_t at);
int convo__mg_index_after_batch(call *c, const char *id, const bson_oid_t *g, int64_t slot,
                                int64_t length, int64_t at);
int convo__mg_index_touch(call *c, const char *id, const bson_oid_t *g, int64_t *matched);
void convo__mg_index_times(const char *id, bson_t *max, bson_t *min, int64_t now_us);
bool convo__mg_index_behind(const thread_doc *t, const batch_head *top);
int convo__mg_index_repair(call *c, const char *id, const thread_doc *t, const batch_head *top);
int convo__mg_index_keys(call *c);
int convo__mg_index_backfill(call *c);
void convo__mg_index_keys_free(convo_backend *b);
int convo__mg_thread_list_ex(convo_backend *b, const convo_thread_list_opts *opts, void *where,
                             const convo_thread_cursor *after, convo_thread_page **out,
                             convo_error *err);

/* maint.c: the layout (indexes, schema version, migrations) and measuring */
mongoc_collection_t *convo__mg_meta_collection(call *c);
int convo__mg_create_indexes(call *c, mongoc_collection_t *coll, const bson_t *indexes);
int convo__mg_ensure_schema(call *c);
int convo__mg_stored_bytes(convo_backend *b, int64_t *bytes, convo_error *err);
int convo__mg_bench_raw(convo_backend *b, const char *payload, size_t payload_len, size_t n,
                        double *seconds, convo_error *err);

#endif
