/* rows.c — a listing page's rows on one server: their request written in
 * RESP at once (building a cmd and four keys per row, then formatting them,
 * was a sixth of a page's client instructions), and the guess of a batch's
 * candidates: the ids the same batch (the same set, direction, position and
 * count) found last time in this store, whose rows are sent in the round trip
 * that reads the candidates, so that a page read again whose candidates are
 * the same costs one round trip instead of two (docs/redis.md, "The thread
 * index", *The guess*). A guess is only ever used for rows read after the
 * candidates; list.c takes a guessed row only for a candidate it read. And
 * the times and last record of a row's replies, read in place. */
#include "redis_int.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

/* ---- the rows' request ---- */

typedef struct resp_out {
    char *p;
    size_t len;
} resp_out;

static void put(resp_out *q, const char *s, size_t n)
{
    memcpy(q->p + q->len, s, n);
    q->len += n;
}

#define PUT(q, lit) put(q, lit, sizeof lit - 1)

/* A key argument: "$LEN\r\n" head suffix "\r\n". */
static void put_key(resp_out *q, const char *head, size_t hlen, int kind)
{
    const char *suffix = convo__rd_key_suffix(kind);
    size_t slen = strlen(suffix);
    q->p[q->len++] = '$';
    q->len += convo__rd_fmt_num(q->p + q->len, (long long)(hlen + slen));
    PUT(q, "\r\n");
    put(q, head, hlen);
    put(q, suffix, slen);
    PUT(q, "\r\n");
}

/* The room a row's commands need, its keys starting with a head of hlen. */
static size_t row_room(size_t hlen)
{
    return 3 * (hlen + 32) + 96;
}

/* A row's commands, written at q (which has row_room()): HGETALL extra,
 * which holds the thread's c, u and p too (layout 8), LLEN msgs and, when
 * last is set, LINDEX msgs -1. */
static size_t row_resp(const char *head, size_t hlen, int last, resp_out *q, size_t *at)
{
    size_t n = 0;
    at[R_META] = n++;
    PUT(q, "*2\r\n$7\r\nHGETALL\r\n");
    put_key(q, head, hlen, K_EXTRA);
    at[R_LEN] = n++;
    PUT(q, "*2\r\n$4\r\nLLEN\r\n");
    put_key(q, head, hlen, K_MSGS);
    at[R_EXTRA] = at[R_LAST] = SIZE_MAX;
    if (last) {
        at[R_LAST] = n++;
        PUT(q, "*3\r\n$6\r\nLINDEX\r\n");
        put_key(q, head, hlen, K_MSGS);
        PUT(q, "$2\r\n-1\r\n");
    }
    return n;
}

int convo__rd_rows_resp(const convo_backend *b, const char *const *ids, size_t n, int last,
                        rd_rows_req *out)
{
    size_t room = 0, hmax = 0, plen = strlen(b->prefix);
    for (size_t i = 0; i < n; i++) { /* a tag is at most 3 bytes a byte of the id */
        size_t h = plen + 3 * strlen(ids[i]) + 4;
        room += row_room(h);
        hmax = h > hmax ? h : hmax;
    }
    resp_out q = {malloc(room + hmax + 1), 0};
    if (!q.p)
        return CONVO_ENOMEM;
    char *head = q.p + room; /* each row's "P:{tag}:", after the request's room */
    size_t nc = 0;
    for (size_t i = 0; i < n; i++) {
        size_t hlen = convo__rd_key_head(b, ids[i], head), first = nc;
        nc += row_resp(head, hlen, last, &q, &out->at[i * R_PER]);
        for (size_t j = 0; j < R_PER; j++)
            out->at[i * R_PER + j] += out->at[i * R_PER + j] == SIZE_MAX ? 0 : first;
    }
    out->buf = q.p;
    out->len = q.len;
    out->ncmds = nc;
    return 0;
}

/* ---- a row's replies read in place ---- */

/* The length of the msgpack header at p[0..n) of a str or bin (kinds 1 and
 * 2: which are allowed) and its payload's length; 0 when it is neither. */
static size_t blob_head(const unsigned char *p, size_t n, int kinds, size_t *len)
{
    size_t w;
    if (n >= 1 && (kinds & 1) && p[0] >= 0xa0 && p[0] <= 0xbf) {
        *len = p[0] & 0x1f;
        return 1;
    }
    if (n >= 1 && (kinds & 1) && p[0] >= 0xd9 && p[0] <= 0xdb)
        w = (size_t)1 << (p[0] - 0xd9);
    else if (n >= 1 && (kinds & 2) && p[0] >= 0xc4 && p[0] <= 0xc6)
        w = (size_t)1 << (p[0] - 0xc4);
    else
        return 0;
    if (n < 1 + w)
        return 0;
    size_t v = 0;
    for (size_t i = 0; i < w; i++)
        v = v << 8 | p[1 + i];
    *len = v;
    return 1 + w;
}

/* The bytes of a message record [created_at, role, bytes], read from its
 * msgpack headers in place (msgpack_unpack_next() made a zone, a malloc, for
 * each row's last message). */
int convo__rd_record_bytes(const redisReply *rec, const char **bytes, size_t *len)
{
    static const unsigned char width[8] = {1, 2, 4, 8, 1, 2, 4, 8}; /* 0xcc .. 0xd3 */
    const unsigned char *p = (const unsigned char *)rec->str;
    size_t n = rec->type == REDIS_REPLY_STRING ? rec->len : 0, at = 2, h, l;
    if (n < 2 || p[0] != 0x93)
        return CONVO_ECORRUPT;
    if (p[1] >= 0xcc && p[1] <= 0xd3)
        at += width[p[1] - 0xcc];
    else if (p[1] >= 0x80 && p[1] < 0xe0) /* not a fixint */
        return CONVO_ECORRUPT;
    if (at > n || !(h = blob_head(p + at, n - at, 1, &l)) || l > n - at - h)
        return CONVO_ECORRUPT;
    at += h + l;
    if (!(h = blob_head(p + at, n - at, 3, &l)) || l > n - at - h)
        return CONVO_ECORRUPT;
    *bytes = (const char *)p + at + h;
    *len = l;
    return 0;
}

/* A time as the scripts write it: decimal digits, at most 18 (µs until the
 * year 33658), an optional '-' first. */
int convo__rd_parse_time(const redisReply *r, long long *out)
{
    if (r->type != REDIS_REPLY_STRING || r->len == 0 || r->len > 19)
        return -1;
    size_t i = r->str[0] == '-';
    if (i == r->len || r->len - i > 18)
        return -1;
    long long v = 0;
    for (; i < r->len; i++) {
        if (r->str[i] < '0' || r->str[i] > '9')
            return -1;
        v = v * 10 + (r->str[i] - '0');
    }
    *out = r->str[0] == '-' ? -v : v;
    return 0;
}

/* created_at of a message record [created_at, role, bytes] from its first
 * bytes (a fixarray of 3, then an integer >= 0 as msgpack-c packs it), or 0. */
long long convo__rd_record_time(const redisReply *rec)
{
    static const unsigned char width[4] = {1, 2, 4, 8}; /* 0xcc .. 0xcf */
    const unsigned char *p = (const unsigned char *)rec->str;
    if (rec->type != REDIS_REPLY_STRING || rec->len < 2 || p[0] != 0x93)
        return 0;
    if (p[1] < 0x80)
        return p[1];
    if (p[1] < 0xcc || p[1] > 0xcf || rec->len < 2u + width[p[1] - 0xcc])
        return 0;
    unsigned long long v = 0;
    for (unsigned i = 0; i < width[p[1] - 0xcc]; i++)
        v = v << 8 | p[2 + i];
    return v > INT64_MAX ? 0 : (long long)v;
}

/* ---- the guess ---- */

#define GUESS_SLOTS 32 /* batches remembered, the least recently used replaced */
#define GUESS_IDS 64   /* a batch of more candidates is not remembered */

typedef struct guess_slot {
    char *key;  /* the batch: NULL for a free slot */
    size_t klen;
    char *ids;  /* its candidates' ids, each ending with '\0' */
    size_t len, n;
    unsigned long long used;
} guess_slot;

struct rd_guess {
    pthread_mutex_t mu;
    unsigned long long clock;
    guess_slot s[GUESS_SLOTS];
};

rd_guess *convo__rd_guess_new(void)
{
    rd_guess *g = calloc(1, sizeof *g);
    if (g && pthread_mutex_init(&g->mu, NULL) != 0) {
        free(g);
        return NULL;
    }
    return g;
}

void convo__rd_guess_free(rd_guess *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < GUESS_SLOTS; i++) {
        free(g->s[i].key);
        free(g->s[i].ids);
    }
    pthread_mutex_destroy(&g->mu);
    free(g);
}

static guess_slot *slot_of(rd_guess *g, const char *key, size_t klen)
{
    for (size_t i = 0; i < GUESS_SLOTS; i++)
        if (g->s[i].key && g->s[i].klen == klen && memcmp(g->s[i].key, key, klen) == 0)
            return &g->s[i];
    return NULL;
}

int convo__rd_guess_get(rd_guess *g, const char *key, size_t klen, char **ids, size_t *n)
{
    *ids = NULL;
    *n = 0;
    if (!g)
        return 0;
    int rc = 0;
    pthread_mutex_lock(&g->mu);
    guess_slot *s = slot_of(g, key, klen);
    /* + 1: a guess of no candidates has len 0, and malloc(0) may return NULL */
    if (s && (*ids = malloc(s->len + 1)) != NULL) {
        memcpy(*ids, s->ids, s->len);
        *n = s->n;
        s->used = ++g->clock;
    } else if (s) {
        rc = CONVO_ENOMEM;
    }
    pthread_mutex_unlock(&g->mu);
    return rc;
}

void convo__rd_guess_put(rd_guess *g, const char *key, size_t klen, const char *const *ids,
                         size_t n)
{
    if (!g || n > GUESS_IDS)
        return;
    size_t len = 0;
    for (size_t i = 0; i < n; i++)
        len += strlen(ids[i]) + 1;
    char *k = malloc(klen), *v = malloc(len + 1);
    if (!k || !v) { /* not remembered: the next read takes two round trips */
        free(k);
        free(v);
        return;
    }
    memcpy(k, key, klen);
    for (size_t i = 0, at = 0; i < n; i++) {
        size_t l = strlen(ids[i]) + 1;
        memcpy(v + at, ids[i], l);
        at += l;
    }
    pthread_mutex_lock(&g->mu);
    guess_slot *s = slot_of(g, key, klen);
    if (!s) { /* a free slot, else the least recently used */
        s = &g->s[0];
        for (size_t i = 0; i < GUESS_SLOTS; i++) {
            if (!g->s[i].key) {
                s = &g->s[i];
                break;
            }
            if (g->s[i].used < s->used)
                s = &g->s[i];
        }
    }
    free(s->key);
    free(s->ids);
    *s = (guess_slot){k, klen, v, len, n, ++g->clock};
    pthread_mutex_unlock(&g->mu);
}
