/* redis_layout.h — what the files of tests/redis_layout share
 * (tests/redis-layout.c; the nodes and stores are tests/redis_test.h's): a
 * thread's keys by kind, snapshots of everything a write could change,
 * checkpoint puts and rewrites that must succeed. */
#ifndef CONVO_TESTS_REDIS_LAYOUT_H
#define CONVO_TESTS_REDIS_LAYOUT_H

#include "redis_test.h"
#include <stdint.h>

/* two messages, a user's and an assistant's */
extern const char *const msgs[2];

/* P:{id}:SUFFIX, kind indexing msgs, idem, meta, extra, cp, cpidx, blobs, writes. */
void key_of(char *out, size_t size, const char *prefix, const char *id, int kind);

/* A growable byte string. */
typedef struct bytes {
    char *p;
    size_t len;
} bytes;
/* Everything a write to thread id could change: each key's DUMP and
 * PEXPIRETIME, its index entry, and the store's own key P:store. */
bytes snapshot(const char *prefix, const char *id);
/* Fails the test (naming `what`) when the snapshot of id is not `a`. */
void same_snapshot(const bytes *a, const char *prefix, const char *id, const char *what);

/* A checkpoint with one channel value, and (n > 0) n messages appended at
 * seq `expected` in the same put. */
int put(convo_store *s, const char *id, const char *ns, const char *cp_id, size_t n,
        int64_t expected, convo_error *err);
void put_ok(convo_store *s, const char *id, const char *ns, const char *cp_id);
void delete_ok(convo_store *s, const char *id);
/* Deletes P:store (the store's layout and last put order). */
void drop_store_key(const char *prefix);
/* The number of "l" members (checkpoints indexed by log length) of a thread. */
long long loglen_members(const char *prefix, const char *id);
int64_t generation_of(convo_store *s, const char *id);
/* Keeps `keep` messages and appends msgs[0]; drop: drop the checkpoints past keep. */
int rewrite(convo_store *s, const char *id, int64_t keep, int drop, convo_error *err);
/* HEXISTS on a thread's hash of `kind`. */
int hexists(const char *prefix, const char *id, int kind, const char *field, size_t len);

/* Each file's cases, added to the one test case ("server" or "cluster") in this order. */
void redis_layout_add_put_tests(TCase *tc);     /* tests/redis_layout_put.c */
void redis_layout_add_old_tests(TCase *tc);     /* tests/redis_layout_old.c */
void redis_layout_add_rewrite_tests(TCase *tc); /* tests/redis_layout_rewrite.c */

#endif
