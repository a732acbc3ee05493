/* lookup.c — a thread's checkpoints by (namespace, id) and its values by
 * (namespace, channel, version) in hash tables of positions, so that a put,
 * a get and a pending write cost the same at the 3,000th checkpoint as at the
 * 3rd. The tables hold positions into t->cps and t->blobs: an append adds one
 * (convo__mem_lookup_added), anything that moves or removes entries marks them
 * stale (convo__mem_lookup_stale) and the next lookup rebuilds them. */
#include "memory_int.h"
#include <stdlib.h>
#include <string.h>

static uint64_t mix(uint64_t h, const char *s)
{
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return (h ^ 0xff) * 1099511628211ULL; /* the end of a part: "a","bc" != "ab","c" */
}

static uint64_t cp_hash(const char *ns, const char *id)
{
    return mix(mix(14695981039346656037ULL, ns), id);
}

static uint64_t blob_hash(const char *ns, const char *channel, const char *version)
{
    return mix(mix(mix(14695981039346656037ULL, ns), channel), version);
}

static uint64_t hash_at(const mem_thread *t, int blobs, size_t i)
{
    if (blobs)
        return blob_hash(t->blobs[i].ns, t->blobs[i].channel, t->blobs[i].version);
    return cp_hash(t->cps[i].ns, t->cps[i].id);
}

/* Puts position i into the table (which has room). */
static void place(mem_table *m, uint64_t h, size_t i)
{
    size_t mask = m->cap - 1, k = (size_t)h & mask;
    while (m->slots[k])
        k = (k + 1) & mask;
    m->slots[k] = i + 1;
}

/* The table for n entries, rebuilt from the thread's array; 0, or -1 out of memory. */
static int rebuild(mem_thread *t, int blobs, mem_table *m, size_t n)
{
    size_t cap = 16;
    while (cap < 2 * n + 2)
        cap *= 2;
    size_t *slots = calloc(cap, sizeof *slots);
    if (!slots)
        return -1;
    free(m->slots);
    m->slots = slots;
    m->cap = cap;
    for (size_t i = 0; i < n; i++)
        place(m, hash_at(t, blobs, i), i);
    m->n = n;
    return 0;
}

static int ready(mem_thread *t)
{
    if (t->lookup_ok)
        return 1;
    if (rebuild(t, 0, &t->cp_table, t->ncps) != 0 || rebuild(t, 1, &t->blob_table, t->nblobs) != 0)
        return 0;
    t->lookup_ok = 1;
    return 1;
}

void convo__mem_lookup_stale(mem_thread *t)
{
    if (t)
        t->lookup_ok = 0;
}

void convo__mem_lookup_added(mem_thread *t, int blobs)
{
    if (!t->lookup_ok)
        return;
    mem_table *m = blobs ? &t->blob_table : &t->cp_table;
    size_t n = blobs ? t->nblobs : t->ncps;
    if (2 * n + 2 > m->cap) {
        if (rebuild(t, blobs, m, n) != 0)
            t->lookup_ok = 0; /* the next lookup tries again, or scans */
        return;
    }
    place(m, hash_at(t, blobs, n - 1), n - 1);
    m->n = n;
}

void convo__mem_lookup_free(mem_thread *t)
{
    free(t->cp_table.slots);
    free(t->blob_table.slots);
}

mem_checkpoint *convo__mem_find_cp(mem_thread *t, const char *ns, const char *id)
{
    if (!t)
        return NULL;
    if (!id) { /* the latest: the last of that namespace in the order of first put */
        for (size_t i = t->ncps; i-- > 0;)
            if (strcmp(t->cps[i].ns, ns) == 0)
                return &t->cps[i];
        return NULL;
    }
    if (!ready(t)) { /* out of memory for the table: scan */
        for (size_t i = 0; i < t->ncps; i++)
            if (strcmp(t->cps[i].ns, ns) == 0 && strcmp(t->cps[i].id, id) == 0)
                return &t->cps[i];
        return NULL;
    }
    const mem_table *m = &t->cp_table;
    size_t mask = m->cap - 1;
    for (size_t k = (size_t)cp_hash(ns, id) & mask; m->slots[k]; k = (k + 1) & mask) {
        mem_checkpoint *c = &t->cps[m->slots[k] - 1];
        if (strcmp(c->id, id) == 0 && strcmp(c->ns, ns) == 0)
            return c;
    }
    return NULL;
}

mem_blob *convo__mem_find_blob(mem_thread *t, const char *ns, const char *channel,
                               const char *version)
{
    if (!t)
        return NULL;
    if (!ready(t)) {
        for (size_t i = 0; i < t->nblobs; i++) {
            mem_blob *b = &t->blobs[i];
            if (!strcmp(b->channel, channel) && !strcmp(b->version, version) &&
                !strcmp(b->ns, ns))
                return b;
        }
        return NULL;
    }
    const mem_table *m = &t->blob_table;
    size_t mask = m->cap - 1;
    for (size_t k = (size_t)blob_hash(ns, channel, version) & mask; m->slots[k];
         k = (k + 1) & mask) {
        mem_blob *b = &t->blobs[m->slots[k] - 1];
        if (!strcmp(b->channel, channel) && !strcmp(b->version, version) && !strcmp(b->ns, ns))
            return b;
    }
    return NULL;
}
