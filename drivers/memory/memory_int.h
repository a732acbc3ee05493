/* memory_int.h — what the memory driver's files share: the layout of a store
 * (threads, their messages, checkpoints, values and writes) and the helpers
 * memory.c offers to checkpoints.c. Everything is read and written under the
 * store's mutex (b->lock). */
#ifndef CONVO_MEMORY_INT_H
#define CONVO_MEMORY_INT_H

#include "config.h"
#include "index.h"
#include <convo/driver.h>
#include <jansson.h>
#include <pthread.h>

typedef struct mem_msg {
    char *bytes; /* message bytes, NUL, role, NUL */
    size_t len;
    int64_t created_at;
} mem_msg;

typedef struct mem_blob {
    char *ns, *channel, *version, *type; /* type NULL: no value */
    void *bytes;
    size_t len;
} mem_blob;

typedef struct mem_write {
    char *task_id, *task_path, *channel, *type;
    int64_t idx;
    void *bytes;
    size_t len;
} mem_write;

typedef struct mem_checkpoint {
    char *ns, *id, *parent_id, *metadata, *body_type;
    void *body;
    size_t body_len;
    int64_t log_length, created_at;
    uint64_t put_seq;            /* store-wide put order (list's `before`) */
    char **channels, **versions; /* the snapshot's channel versions */
    size_t nchannels;
    mem_write *writes;
    size_t nwrites;
} mem_checkpoint;

/* Positions (+1; 0 = empty) in open addressing: lookup.c. */
typedef struct mem_table {
    size_t *slots;
    size_t cap, n;
} mem_table;

typedef struct mem_thread {
    char *id;
    mem_checkpoint *cps; /* in the order they were first put */
    size_t ncps;
    mem_blob *blobs;
    size_t nblobs;
    mem_msg *msgs;
    size_t count, cap;
    char *extra;       /* compact JSON object or NULL */
    json_t *idem;      /* idempotency key -> [first_seq, count] */
    int64_t generation; /* tail rewrites so far */
    int64_t created_at, updated_at; /* first and last write */
    mem_index_slot *index_slots;    /* its places in the index (index.h) */
    mem_table cp_table, blob_table; /* cps by (ns, id), blobs by (ns, channel, version) */
    int lookup_ok;                  /* 0: the tables are stale (lookup.c) */
} mem_thread;

struct convo_backend {
    pthread_mutex_t lock;
    mem_thread **threads; /* sorted by id (strcmp, i.e. byte order) */
    size_t count, cap;
    uint64_t put_seq; /* the last checkpoint put's number, across threads */
    convo_limits limits;
    mem_index *index; /* NULL without indexed keys */
};

/* memory.c */
mem_thread *convo__mem_lookup(convo_backend *b, const char *id);
void convo__mem_remove_thread(convo_backend *b, const char *id);
void convo__mem_checkpoint_clear(mem_checkpoint *c);
void convo__mem_blob_clear(mem_blob *b);
/* lookup.c */
mem_checkpoint *convo__mem_find_cp(mem_thread *t, const char *ns, const char *id);
mem_blob *convo__mem_find_blob(mem_thread *t, const char *ns, const char *channel,
                               const char *version);
/* after t->cps (blobs 0) or t->blobs (blobs 1) grew by one at the end */
void convo__mem_lookup_added(mem_thread *t, int blobs);
/* after entries of either array moved or went */
void convo__mem_lookup_stale(mem_thread *t);
void convo__mem_lookup_free(mem_thread *t);
/* strdup / a copy of len bytes, setting *failed when out of memory (s NULL: NULL) */
char *convo__mem_xdup(const char *s, int *failed);
void *convo__mem_xdupb(const void *b, size_t len, int *failed);
/* thread_fork under the lock: creates dst with src's messages [0, upto) and extra */
int convo__mem_fork_locked(convo_backend *b, const char *src, const char *dst, int64_t upto,
                           int64_t expected_generation, convo_error *err);

/* checkpoints.c: prune, delete and the copy of a thread with its checkpoints */
int convo__mem_checkpoint_prune(convo_backend *b, const char *thread_id, size_t keep_last,
                                convo_error *err);
int convo__mem_checkpoint_delete(convo_backend *b, const char *thread_id,
                                 const char *const *ns, const char *const *ids, size_t n,
                                 uint64_t *removed, convo_error *err);
int convo__mem_thread_copy(convo_backend *b, const char *src, const char *dst, int64_t upto,
                           int64_t expected_generation, convo_error *err);

#endif
