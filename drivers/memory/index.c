/* index.c — the memory driver's per-key thread index (index.h). A key's values
 * are hashed to lists of the threads holding them; a list is kept sorted by
 * (updated_at, id), the activity order, as every write moves its thread to the
 * end. Only scalar values are indexed: a filter on an object or array value scans. */
#include "index.h"
#include <stdlib.h>
#include <string.h>

typedef struct value_list {
    char *value; /* the canonical text of a scalar (value_text) */
    size_t len;
    uint64_t hash;
    struct value_list *next; /* in its bucket */
    mem_index_item *items;   /* ascending (at, id) */
    size_t n, cap;
} value_list;

typedef struct key_index {
    char *key;
    value_list **buckets;
    size_t nbuckets, nlists;
} key_index;

struct mem_index {
    key_index *keys;
    size_t nkeys;
    int broken; /* a failed update: not used any more */
};

struct mem_index_slot {
    value_list *list; /* NULL: the thread has no scalar value for this key */
    int64_t at;       /* its place in list */
};

/* "s<bytes>", "n<%.17g>", "t", "f", "z" (null); NULL for objects and arrays.
 * Numbers by value, as the filter compares them (3 and 3.0 are equal). */
static char *value_text(json_t *v, size_t *len)
{
    char *out = NULL;
    if (json_is_string(v)) {
        *len = json_string_length(v) + 1;
        if ((out = malloc(*len + 1))) {
            out[0] = 's';
            memcpy(out + 1, json_string_value(v), *len - 1);
            out[*len] = '\0';
        }
    } else if (json_is_number(v) || json_is_boolean(v) || json_is_null(v)) {
        char buf[40];
        int n = json_is_number(v) ? snprintf(buf, sizeof buf, "n%.17g", json_number_value(v))
                                  : snprintf(buf, sizeof buf, "%s",
                                             json_is_true(v) ? "t" : json_is_false(v) ? "f" : "z");
        *len = (size_t)n;
        out = strdup(buf);
    }
    return out;
}

static uint64_t hash_of(const char *s, size_t len)
{
    uint64_t h = 1469598103934665603ULL; /* FNV-1a */
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return h;
}

int mem_index_new(mem_index **out, char *const *keys)
{
    *out = NULL;
    size_t n = 0;
    while (keys && keys[n])
        n++;
    if (n == 0)
        return 0;
    mem_index *ix = calloc(1, sizeof *ix);
    if (!ix || !(ix->keys = calloc(n, sizeof *ix->keys))) {
        free(ix);
        return -1;
    }
    ix->nkeys = n;
    for (size_t i = 0; i < n; i++)
        if (!(ix->keys[i].key = strdup(keys[i]))) {
            mem_index_free(ix);
            return -1;
        }
    *out = ix;
    return 0;
}

void mem_index_free(mem_index *ix)
{
    if (!ix)
        return;
    for (size_t k = 0; k < ix->nkeys; k++) {
        key_index *ki = &ix->keys[k];
        for (size_t b = 0; b < ki->nbuckets; b++)
            for (value_list *l = ki->buckets[b], *next; l; l = next) {
                next = l->next;
                free(l->value);
                free(l->items);
                free(l);
            }
        free(ki->buckets);
        free(ki->key);
    }
    free(ix->keys);
    free(ix);
}

static value_list *find_list(const key_index *ki, const char *value, size_t len, uint64_t h)
{
    if (!ki->nbuckets)
        return NULL;
    for (value_list *l = ki->buckets[h % ki->nbuckets]; l; l = l->next)
        if (l->hash == h && l->len == len && memcmp(l->value, value, len) == 0)
            return l;
    return NULL;
}

static int grow_buckets(key_index *ki)
{
    size_t n = ki->nbuckets ? ki->nbuckets * 2 : 64;
    value_list **b = calloc(n, sizeof *b);
    if (!b)
        return -1;
    for (size_t i = 0; i < ki->nbuckets; i++)
        for (value_list *l = ki->buckets[i], *next; l; l = next) {
            next = l->next;
            l->next = b[l->hash % n];
            b[l->hash % n] = l;
        }
    free(ki->buckets);
    ki->buckets = b;
    ki->nbuckets = n;
    return 0;
}

/* The list of value (taking it), made when new; NULL when out of memory. */
static value_list *list_for(key_index *ki, char *value, size_t len)
{
    uint64_t h = hash_of(value, len);
    value_list *l = find_list(ki, value, len, h);
    if (l) {
        free(value);
        return l;
    }
    if ((ki->nlists >= ki->nbuckets && grow_buckets(ki) != 0) || !(l = calloc(1, sizeof *l))) {
        free(value);
        return NULL;
    }
    l->value = value;
    l->len = len;
    l->hash = h;
    l->next = ki->buckets[h % ki->nbuckets];
    ki->buckets[h % ki->nbuckets] = l;
    ki->nlists++;
    return l;
}

static void drop_list(key_index *ki, value_list *l)
{
    value_list **p = &ki->buckets[l->hash % ki->nbuckets];
    while (*p != l)
        p = &(*p)->next;
    *p = l->next;
    ki->nlists--;
    free(l->value);
    free(l->items);
    free(l);
}

static int item_cmp(int64_t at, const char *id, const mem_index_item *it)
{
    return at < it->at ? -1 : at > it->at ? 1 : strcmp(id, it->id);
}

/* Where (at, id) is or would go in l (searched from the end: writes move a
 * thread to the newest place, so most searches stop at once). */
static size_t place(const value_list *l, int64_t at, const char *id)
{
    size_t lo = 0, hi = l->n;
    if (hi > 0 && item_cmp(at, id, &l->items[hi - 1]) > 0)
        return hi;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (item_cmp(at, id, &l->items[mid]) > 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int list_insert(value_list *l, int64_t at, const char *id, void *thread)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 4;
        mem_index_item *items = realloc(l->items, cap * sizeof *items);
        if (!items)
            return -1;
        l->items = items;
        l->cap = cap;
    }
    size_t at_pos = place(l, at, id);
    memmove(&l->items[at_pos + 1], &l->items[at_pos], (l->n - at_pos) * sizeof *l->items);
    l->items[at_pos] = (mem_index_item){at, id, thread};
    l->n++;
    return 0;
}

static void list_take(value_list *l, int64_t at, const char *id)
{
    size_t i = place(l, at, id);
    if (i < l->n && l->items[i].at == at && strcmp(l->items[i].id, id) == 0) {
        memmove(&l->items[i], &l->items[i + 1], (l->n - i - 1) * sizeof *l->items);
        l->n--;
    }
}

static void list_remove(key_index *ki, value_list *l, int64_t at, const char *id)
{
    list_take(l, at, id);
    if (l->n == 0)
        drop_list(ki, l);
}

/* The thread's item in its list moved from time s->at to at. */
static int list_move(mem_index_slot *s, void *thread, const char *id, int64_t at)
{
    if (s->at == at)
        return 0;
    list_take(s->list, s->at, id); /* leaves room for the insert: it cannot fail */
    s->at = at;
    return list_insert(s->list, at, id, thread);
}

/* The thread's slot for key k moved to the list of value (NULL: none). */
static int move_to(key_index *ki, mem_index_slot *slot, char *value, size_t len, void *thread,
                   const char *id, int64_t at)
{
    if (slot->list)
        list_remove(ki, slot->list, slot->at, id);
    slot->list = NULL;
    if (!value)
        return 0;
    value_list *l = list_for(ki, value, len);
    if (!l || list_insert(l, at, id, thread) != 0)
        return -1;
    slot->list = l;
    slot->at = at;
    return 0;
}

static int touch(mem_index *ix, mem_index_slot **slots, void *thread, const char *id,
                 json_t *changed, int64_t at)
{
    if (changed && !*slots && !(*slots = calloc(ix->nkeys, sizeof **slots)))
        return -1;
    int rc = 0;
    for (size_t k = 0; *slots && k < ix->nkeys && rc == 0; k++) {
        mem_index_slot *s = &(*slots)[k];
        json_t *v = changed ? json_object_get(changed, ix->keys[k].key) : NULL;
        if (!v) { /* the same value: only the time moves */
            if (s->list)
                rc = list_move(s, thread, id, at);
            continue;
        }
        size_t len = 0;
        char *value = value_text(v, &len);
        if (value && s->list && s->list->len == len && memcmp(s->list->value, value, len) == 0) {
            free(value);
            rc = list_move(s, thread, id, at);
        } else {
            rc = move_to(&ix->keys[k], s, value, len, thread, id, at);
        }
    }
    return rc;
}

void mem_index_touch(mem_index *ix, mem_index_slot **slots, void *thread, const char *id,
                     json_t *changed, int64_t updated_at)
{
    if (ix && !ix->broken && touch(ix, slots, thread, id, changed, updated_at) != 0)
        ix->broken = 1;
}

void mem_index_break(mem_index *ix)
{
    if (ix)
        ix->broken = 1;
}

void mem_index_remove(mem_index *ix, mem_index_slot **slots, const char *id)
{
    for (size_t k = 0; ix && *slots && k < ix->nkeys; k++)
        if ((*slots)[k].list)
            list_remove(&ix->keys[k], (*slots)[k].list, (*slots)[k].at, id);
    free(*slots);
    *slots = NULL;
}

int mem_index_lookup(const mem_index *ix, json_t *where, const mem_index_item **items, size_t *n,
                     int *exact)
{
    if (!ix || ix->broken)
        return 0;
    for (size_t k = 0; k < ix->nkeys; k++) {
        size_t len;
        json_t *w = json_object_get(where, ix->keys[k].key);
        char *value = w ? value_text(w, &len) : NULL;
        if (!value)
            continue;
        const value_list *l = find_list(&ix->keys[k], value, len, hash_of(value, len));
        free(value);
        *items = l ? l->items : NULL;
        *n = l ? l->n : 0;
        *exact = json_object_size(where) == 1;
        return 1;
    }
    return 0;
}
