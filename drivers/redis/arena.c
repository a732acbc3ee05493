/* arena.c — the replies of one pipeline on one server in one block: hiredis
 * makes each reply element with its own calloc and malloc, and its reader
 * calls back for each element, which were about half of the client's
 * instructions in a listing page's rows (some 200 elements). Here the
 * replies are read off the socket into one buffer, checked whole, then made
 * in place: their strings point into the buffer (a '\0' over each '\r'),
 * their nodes follow it, and the arena frees it all at once. Used where a
 * call reads many small replies and frees them together (list.c); never
 * freed with freeReplyObject. */
#include "redis_int.h"
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct rd_arena {
    struct rd_arena_block *head;
};

typedef struct rd_arena_block {
    struct rd_arena_block *next;
    size_t used, size;
    max_align_t data[];
} rd_arena_block;

rd_arena *convo__rd_arena_new(void)
{
    return calloc(1, sizeof(rd_arena));
}

void convo__rd_arena_free(rd_arena *a)
{
    while (a && a->head) {
        rd_arena_block *b = a->head;
        a->head = b->next;
        free(b);
    }
    free(a);
}

/* ---- reading the replies ---- */

#define READ_ROOM 16384 /* the first read's room; later ones have a quarter of it at least */
#define MAX_DEPTH 8     /* nested arrays: an EXEC of range replies is 2 */

/* A RESP header at p[at..len): its type byte, then a decimal number (an
 * optional '-', at most 18 digits) up to "\r\n". 1 with the number and where
 * the next line starts, 0 when it has not all arrived, -1 when it is not
 * RESP. */
static inline int header(const char *p, size_t len, size_t at, long long *v, size_t *next)
{
    size_t i = at + 1, d;
    int neg = i < len && p[i] == '-';
    long long x = 0;
    i += (size_t)neg;
    for (d = i; i < len && (unsigned char)(p[i] - '0') < 10; i++)
        if (i - d < 18) /* more digits are refused below, and would overflow x */
            x = x * 10 + (p[i] - '0');
    if (i + 1 >= len)
        return i - d > 18 ? -1 : 0;
    if (p[i] != '\r' || p[i + 1] != '\n' || i == d || i - d > 18)
        return -1;
    *v = neg ? -x : x;
    *next = i + 2;
    return 1;
}

/* The end of a status or error line at p[at..len) ("\r\n" excluded): 1, 0
 * when it has not all arrived. */
static inline int line_end(const char *p, size_t len, size_t at, size_t *end)
{
    for (size_t i = at + 1; i + 1 < len; i++)
        if (p[i] == '\r') {
            *end = i;
            return p[i + 1] == '\n' ? 1 : -1;
        }
    return 0;
}

typedef struct scan_count {
    size_t nodes, slots; /* replies and array elements, for reply_make */
} scan_count;

/* Moves *at past one whole reply of p[0..len), counting it in *k: 1, or 0
 * when it has not all arrived, or -1 when it is not RESP. */
static int reply_end(const char *p, size_t len, size_t *at, int depth, scan_count *k)
{
    if (*at >= len)
        return 0;
    long long v = 0;
    size_t next = 0;
    int r;
    k->nodes++;
    switch (p[*at]) {
    case '+':
    case '-':
        if ((r = line_end(p, len, *at, &next)) == 1)
            *at = next + 2;
        return r;
    case ':':
        if ((r = header(p, len, *at, &v, &next)) == 1)
            *at = next;
        return r;
    case '$':
        if ((r = header(p, len, *at, &v, &next)) != 1)
            return r;
        if (v < -1)
            return -1;
        if (v == -1) {
            *at = next;
            return 1;
        }
        if ((unsigned long long)v + 2 > len - next)
            return 0;
        if (p[next + (size_t)v] != '\r' || p[next + (size_t)v + 1] != '\n')
            return -1;
        *at = next + (size_t)v + 2;
        return 1;
    case '*':
        if ((r = header(p, len, *at, &v, &next)) != 1)
            return r;
        if (v < -1 || depth >= MAX_DEPTH)
            return -1;
        *at = next;
        for (long long i = 0; i < v; i++)
            if ((r = reply_end(p, len, at, depth + 1, k)) != 1)
                return r;
        k->slots += v > 0 ? (size_t)v : 0;
        return 1;
    default:
        return -1;
    }
}

typedef struct make_pool {
    redisReply *node;
    redisReply **slot;
} make_pool;

/* The number of the header at p + *at, which reply_end() checked; *at moves
 * to the next line. */
static long long number_at(const char *p, size_t *at)
{
    const char *q = p + *at + 1;
    int neg = *q == '-';
    long long x = 0;
    for (q += neg; *q != '\r'; q++)
        x = x * 10 + (*q - '0');
    *at = (size_t)(q + 2 - p);
    return neg ? -x : x;
}

/* The reply at p + *at, which reply_end() found whole, as hiredis would make
 * it, from the pool reply_end() counted; its strings end with a '\0' written
 * over their '\r'. */
static redisReply *reply_make(char *p, size_t *at, make_pool *m)
{
    redisReply *r = m->node++;
    char kind = p[*at];
    memset(r, 0, sizeof *r);
    if (kind == '+' || kind == '-') {
        r->type = kind == '+' ? REDIS_REPLY_STATUS : REDIS_REPLY_ERROR;
        r->str = p + *at + 1;
        char *end = r->str;
        while (*end != '\r')
            end++;
        r->len = (size_t)(end - r->str);
        *end = '\0';
        *at = (size_t)(end + 2 - p);
        return r;
    }
    long long v = number_at(p, at);
    if (kind == ':') {
        r->type = REDIS_REPLY_INTEGER;
        r->integer = v;
    } else if (v < 0) {
        r->type = REDIS_REPLY_NIL; /* a nil bulk or array */
    } else if (kind == '$') {
        r->type = REDIS_REPLY_STRING;
        r->str = p + *at;
        r->len = (size_t)v;
        r->str[v] = '\0';
        *at += (size_t)v + 2;
    } else {
        r->type = REDIS_REPLY_ARRAY;
        r->elements = (size_t)v;
        r->element = v > 0 ? m->slot : NULL;
        m->slot += r->elements;
        for (size_t i = 0; i < r->elements; i++)
            r->element[i] = reply_make(p, at, m);
    }
    return r;
}

/* A read buffer that becomes an arena block once the replies are in it, with
 * room for need more bytes (and the '\0' after them). */
static rd_arena_block *block_grow(rd_arena_block *b, size_t need)
{
    size_t used = b ? b->used : 0, size = b ? b->size : 0;
    if (b && size - used > need)
        return b;
    while (size <= used + need)
        size = size ? 2 * size : READ_ROOM;
    rd_arena_block *g = realloc(b, sizeof *g + size);
    if (!g)
        return NULL;
    g->used = used;
    g->size = size;
    return g;
}

/* Reads until the n replies are whole; *out is the block holding them. */
static int read_replies(convo_backend *be, rconn *rc, size_t n, rd_arena_block **out,
                        scan_count *count, convo_error *err)
{
    rd_arena_block *b = NULL;
    size_t done = 0, at = 0; /* replies whole so far, and where they end */
    for (;;) {
        int r = 1;
        while (done < n) {
            size_t end = at;
            scan_count k = *count;
            if ((r = reply_end(b ? (const char *)b->data : NULL, b ? b->used : 0, &end, 0, &k)) != 1)
                break;
            done++;
            at = end;
            *count = k;
        }
        if (done == n) {
            *out = b;
            return 0;
        }
        if (r < 0) {
            free(b);
            rc->broken = 1;
            return convo__error(err, CONVO_EIO, NULL, "redis: a reply that is not RESP (%s)",
                                be->redacted);
        }
        rd_arena_block *g = block_grow(b, READ_ROOM / 4);
        if (!g) {
            free(b);
            rc->broken = 1; /* the rest of the replies is still to come */
            return convo__rd_oom(err);
        }
        b = g;
        ssize_t got;
        do
            got = read(rc->c->fd, (char *)b->data + b->used, b->size - b->used - 1);
        while (got < 0 && errno == EINTR);
        if (got <= 0) {
            int e = got < 0 ? errno : 0;
            free(b);
            return convo__rd_read_failed(be, rc, e, err);
        }
        b->used += (size_t)got; /* an incomplete reply is scanned again from its start */
    }
}

/* convo__rd_pipeline() on one server, its replies in a (freed with it). */
int convo__rd_pipeline_arena(convo_backend *b, rconn *rc, cmd *cmds, size_t n,
                             redisReply **replies, rd_arena *a, convo_error *err)
{
    if (rc->nodes)
        return convo__rd_pipeline(b, rc, cmds, n, replies, err) == 0
                   ? convo__error(err, CONVO_ERROR, NULL, "redis: an arena pipeline on a cluster")
                   : CONVO_ERROR;
    int code = convo__rd_send(b, rc, cmds, n, err);
    return code ? code : convo__rd_replies_arena(b, rc, n, replies, a, err);
}

/* Reads the n replies of a pipeline sent on one server into a. */
int convo__rd_replies_arena(convo_backend *b, rconn *rc, size_t n, redisReply **replies,
                            rd_arena *a, convo_error *err)
{
    redisReader *rd = rc->c->reader;
    if (rd->len != rd->pos) /* hiredis holds part of a reply: never after a whole pipeline */
        return convo__rd_read_failed(b, rc, EPROTO, err);
    rd_arena_block *blk = NULL;
    scan_count k = {0, 0};
    int code = read_replies(b, rc, n, &blk, &k, err);
    if (code != 0)
        return code;
    blk->next = a->head; /* the arena frees it */
    a->head = blk;
    /* the replies' nodes after the bytes they point into, in the same block
     * when they fit (no realloc: a copy of the bytes), else in one more */
    size_t at = (blk->used + sizeof(max_align_t)) / sizeof(max_align_t) * sizeof(max_align_t);
    size_t pool = k.nodes * sizeof(redisReply) + k.slots * sizeof(redisReply *);
    char *nodes = (char *)blk->data + at;
    if (at + pool > blk->size) {
        rd_arena_block *more = malloc(sizeof *more + pool);
        if (!more)
            return convo__rd_oom(err);
        *more = (rd_arena_block){a->head, pool, pool};
        a->head = more;
        nodes = (char *)more->data;
    }
    make_pool m = {(redisReply *)nodes, NULL};
    m.slot = (redisReply **)(m.node + k.nodes);
    at = 0;
    for (size_t i = 0; i < n; i++)
        replies[i] = reply_make((char *)blk->data, &at, &m);
    return 0;
}
