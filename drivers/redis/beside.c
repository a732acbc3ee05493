/* beside.c — on a cluster, the activity entries of a thread this store wrote
 * lately are written beside its append, in the same round trip (docs/redis.md,
 * "Redis Cluster", *The index beside the append*): the store remembers the
 * :r keys of each such thread; the reads after the script check them. */
#include "redis_int.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* 4,096 threads in sets of 4 ways: a chat app appends to many threads in
 * turn, and a direct-mapped table by the id's low hash bits (its two lowest
 * always set: convo__rd_id_hash) made a third of 1,000 such threads evict
 * each other at every append (docs/performance.md, rc25b) */
#define BESIDE_WAYS 4
#define BESIDE_SETS (RECENT_SLOTS / BESIDE_WAYS)

typedef struct beside_slot {
    uint64_t h;    /* the id's hash; 0 = free */
    uint64_t used; /* the table's clock when last learnt or read: the oldest goes */
    char *keys;    /* its :r keys, each ending with '\0' */
    size_t len, count;
} beside_slot;

struct rd_beside {
    pthread_mutex_t mu;
    uint64_t clock;
    beside_slot s[BESIDE_SETS][BESIDE_WAYS];
};

rd_beside *convo__rd_beside_new(void)
{
    rd_beside *t = calloc(1, sizeof *t);
    if (t && pthread_mutex_init(&t->mu, NULL) != 0) {
        free(t);
        return NULL;
    }
    return t;
}

void convo__rd_beside_free(rd_beside *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < BESIDE_SETS; i++)
        for (size_t w = 0; w < BESIDE_WAYS; w++)
            free(t->s[i][w].keys);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

/* The set of hash h: its bits mixed (FNV-1a's low bits follow the id's last
 * bytes, its high ones hardly move with them). */
static beside_slot *set_of(rd_beside *t, uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdu;
    h ^= h >> 33;
    return t->s[h % BESIDE_SETS];
}

/* h's slot in its set, or NULL (with *victim: a free one, else the oldest). */
static beside_slot *find(rd_beside *t, uint64_t h, beside_slot **victim)
{
    beside_slot *set = set_of(t, h), *old = &set[0];
    for (size_t w = 0; w < BESIDE_WAYS; w++) {
        if (set[w].h == h)
            return &set[w];
        if (old->h && (!set[w].h || set[w].used < old->used))
            old = &set[w];
    }
    if (victim)
        *victim = old;
    return NULL;
}

static int put(char **buf, size_t *len, size_t *cap, const char *a, size_t alen, const char *b,
               size_t blen)
{
    if (*len + alen + blen + 1 > *cap) {
        size_t cap2 = (*cap ? *cap * 2 : 128) + alen + blen + 1;
        char *g = realloc(*buf, cap2);
        if (!g)
            return -1;
        *buf = g;
        *cap = cap2;
    }
    memcpy(*buf + *len, a, alen);
    memcpy(*buf + *len + alen, b, blen);
    (*buf)[*len + alen + blen] = '\0';
    *len += alen + blen + 1;
    return 0;
}

/* The :r keys of thread id from its extra's read (x: HMGET extra of the
 * declared fields), as convo__rd_ix_write writes them: its shard's, then each
 * indexed value's. NULL when out of memory. */
static char *rkeys_of(const convo_backend *b, const char *id, const redisReply *x, size_t *len,
                      size_t *count)
{
    char *buf = NULL;
    size_t cap = 0;
    int at = convo__rd_ix_shard(b, id);
    const char *shard = b->ix_shard[at];
    *len = *count = 0;
    if (put(&buf, len, &cap, shard, strlen(shard), "r", 1) != 0)
        return NULL;
    ++*count;
    for (size_t i = 0; b->ix_nkeys && x && x->type == REDIS_REPLY_ARRAY && i < x->elements; i++) {
        const redisReply *v = x->element[i];
        const char *sp = v->type == REDIS_REPLY_STRING ? memchr(v->str, ' ', v->len) : NULL;
        if (!sp || i >= b->ix_nkeys)
            continue;
        char *kv = convo__rd_ix_kv(b, at, b->ix_field[i], sp + 1,
                                   v->len - (size_t)(sp + 1 - v->str));
        if (!kv)
            continue; /* not an indexed value (as convo__rd_ix_write has it) */
        int bad = put(&buf, len, &cap, kv, strlen(kv), "r", 1);
        free(kv);
        if (bad) {
            free(buf);
            return NULL;
        }
        ++*count;
    }
    return buf;
}

static int meta_valid(const redisReply *m)
{
    return m && m->type == REDIS_REPLY_ARRAY && m->elements == 2 &&
           m->element[0]->type == REDIS_REPLY_STRING && m->element[1]->type == REDIS_REPLY_STRING;
}

void convo__rd_beside_learn(convo_backend *b, const char *id, const redisReply *m,
                            const redisReply *x)
{
    rd_beside *t = b->beside;
    if (!t)
        return;
    uint64_t h = convo__rd_id_hash(id);
    size_t len = 0, count = 0;
    char *keys = meta_valid(m) ? rkeys_of(b, id, x, &len, &count) : NULL;
    pthread_mutex_lock(&t->mu);
    beside_slot *victim = NULL, *s = find(t, h, &victim);
    if (!s)
        s = victim;
    if (s->h == h || keys) { /* a thread it fails to learn forgets only itself */
        free(s->keys);
        *s = keys ? (beside_slot){h, ++t->clock, keys, len, count} : (beside_slot){0};
    }
    pthread_mutex_unlock(&t->mu);
}

int convo__rd_beside_has(convo_backend *b, uint64_t h)
{
    rd_beside *t = b->beside;
    if (!t)
        return 0;
    pthread_mutex_lock(&t->mu);
    const beside_slot *s = find(t, h, NULL);
    int has = s && s->keys;
    pthread_mutex_unlock(&t->mu);
    return has;
}

void convo__rd_beside_forget(convo_backend *b, uint64_t h)
{
    rd_beside *t = b->beside;
    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    beside_slot *s = find(t, h, NULL);
    if (s) {
        free(s->keys);
        *s = (beside_slot){0};
    }
    pthread_mutex_unlock(&t->mu);
}

int convo__rd_beside_get(convo_backend *b, const char *id, char **keys, size_t *len,
                         size_t *count)
{
    rd_beside *t = b->beside;
    *keys = NULL;
    *len = *count = 0;
    if (!t)
        return 0;
    uint64_t h = convo__rd_id_hash(id);
    pthread_mutex_lock(&t->mu);
    beside_slot *s = find(t, h, NULL);
    if (s && s->keys && (*keys = malloc(s->len)) != NULL) {
        memcpy(*keys, s->keys, s->len);
        *len = s->len;
        *count = s->count;
        s->used = ++t->clock;
    }
    pthread_mutex_unlock(&t->mu);
    return *keys != NULL;
}

void convo__rd_beside_zadds(const char *keys, size_t count, const char *id, const char *now,
                            size_t now_len, cmd *out)
{
    const char *k = keys;
    for (size_t i = 0; i < count; i++, k += strlen(k) + 1) {
        /* XX: only an entry that is there moves (a thread never appears by
         * it); CH: 1 tells it moved, so 0 sends the whole write after */
        convo__rd_cmd_str(&out[i], "ZADD");
        convo__rd_cmd_str(&out[i], k);
        convo__rd_cmd_str(&out[i], "XX");
        convo__rd_cmd_str(&out[i], "CH");
        convo__rd_cmd_add(&out[i], now, now_len);
        convo__rd_cmd_str(&out[i], id);
    }
}

int convo__rd_beside_done(const convo_backend *b, const char *id, const char *keys, size_t len,
                          const char *now, size_t now_len, redisReply *const *zr, size_t count,
                          const redisReply *m, const redisReply *x)
{
    for (size_t i = 0; i < count; i++)
        if (!zr[i] || zr[i]->type != REDIS_REPLY_INTEGER || zr[i]->integer != 1)
            return 0; /* an entry missing (or at that time already): all of them again */
    if (!meta_valid(m) || m->element[1]->len != now_len ||
        memcmp(m->element[1]->str, now, now_len) != 0)
        return 0; /* another write came between, or the script set another time */
    size_t got_len, got_count;
    char *got = rkeys_of(b, id, b->ix_nkeys ? x : NULL, &got_len, &got_count);
    int same = got && got_count == count && got_len == len && memcmp(got, keys, len) == 0;
    free(got);
    return same; /* else its values changed since the store learnt them */
}
