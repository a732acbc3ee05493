/* index.h — the memory driver's thread index: per declared extra key, the
 * threads holding each scalar value, kept in (updated_at, id) order, so that a
 * page filtered on that key reads only the matching threads. */
#ifndef CONVO_MEMORY_INDEX_H
#define CONVO_MEMORY_INDEX_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

typedef struct mem_index mem_index;
typedef struct mem_index_slot mem_index_slot; /* a thread's place, one per key */

typedef struct mem_index_item {
    int64_t at;     /* the thread's updated_at */
    const char *id; /* the thread's id (owned by the thread) */
    void *thread;
} mem_index_item;

/* keys: NULL-terminated (NULL or none: *out = NULL, which every call accepts). */
int mem_index_new(mem_index **out, char *const *keys);
void mem_index_free(mem_index *ix);
/* After a write that set the thread's updated_at: moves it to its place.
 * changed: NULL when its extra kept its values, else an object whose top-level
 * keys are its new values (a save_extra's patch; the whole extra of a new
 * thread), the keys absent keeping theirs. A failure (out of memory) leaves the
 * index unused from then on: pages scan, still correct. */
void mem_index_touch(mem_index *ix, mem_index_slot **slots, void *thread, const char *id,
                     json_t *changed, int64_t updated_at);
/* Leaves the index unused from then on (a thread could not be indexed). */
void mem_index_break(mem_index *ix);
/* Before the thread is freed. */
void mem_index_remove(mem_index *ix, mem_index_slot **slots, const char *id);
/* The threads that may match where (an object), oldest updated_at first, when
 * the index can narrow it: 1 and *items, *n (valid until the next write), *exact
 * (every one matches); 0 when it cannot (scan every thread). */
int mem_index_lookup(const mem_index *ix, json_t *where, const mem_index_item **items, size_t *n,
                     int *exact);

#endif
