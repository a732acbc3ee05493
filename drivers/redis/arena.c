/* arena.c — replies of one pipeline allocated from one arena: hiredis makes
 * each reply element with its own calloc and malloc, and freeReplyObject
 * frees them one by one, which was about 40% of the client's instructions in
 * a listing page's rows (some 250 elements). Used where a call reads many
 * small replies and frees them together (list.c); never freed with
 * freeReplyObject. */
#include "redis_int.h"
#include <stdlib.h>
#include <string.h>

#define BLOCK_BYTES 16384

struct rd_arena {
    struct rd_arena_block *head;
};

typedef struct rd_arena_block {
    struct rd_arena_block *next;
    size_t used, size;
    max_align_t data[];
} rd_arena_block;

static void *arena_alloc(rd_arena *a, size_t n)
{
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    rd_arena_block *b = a->head;
    if (!b || b->size - b->used < n) {
        size_t size = n > BLOCK_BYTES ? n : BLOCK_BYTES;
        if (!(b = malloc(sizeof *b + size)))
            return NULL;
        *b = (rd_arena_block){a->head, 0, size};
        a->head = b;
    }
    void *p = (char *)b->data + b->used;
    b->used += n;
    return p;
}

/* A reply of task's type, linked into its parent array as hiredis does. */
static redisReply *arena_reply(const redisReadTask *task)
{
    redisReply *r = arena_alloc(task->privdata, sizeof *r);
    if (!r)
        return NULL;
    memset(r, 0, sizeof *r);
    r->type = task->type;
    if (task->parent)
        ((redisReply *)task->parent->obj)->element[task->idx] = r;
    return r;
}

static void *arena_string(const redisReadTask *task, char *str, size_t len)
{
    char *buf = arena_alloc(task->privdata, len + 1);
    redisReply *r = buf ? arena_reply(task) : NULL;
    if (!r)
        return NULL;
    memcpy(buf, str, len);
    buf[len] = '\0';
    r->str = buf;
    r->len = len;
    return r;
}

static void *arena_array(const redisReadTask *task, int elements)
{
    redisReply **e = NULL;
    if (elements > 0 &&
        !(e = arena_alloc(task->privdata, (size_t)elements * sizeof *e)))
        return NULL;
    if (e)
        memset(e, 0, (size_t)elements * sizeof *e);
    redisReply *r = arena_reply(task);
    if (r) {
        r->elements = (size_t)(elements > 0 ? elements : 0);
        r->element = e;
    }
    return r;
}

static void *arena_integer(const redisReadTask *task, long long value)
{
    redisReply *r = arena_reply(task);
    if (r)
        r->integer = value;
    return r;
}

static void *arena_nil(const redisReadTask *task)
{
    redisReply *r = arena_reply(task);
    if (r) /* a nil bulk or array: the task says '$' or '*' */
        r->type = REDIS_REPLY_NIL;
    return r;
}

static void arena_object_free(void *obj)
{
    (void)obj; /* the arena frees everything at once */
}

static redisReplyObjectFunctions arena_fns = {arena_string, arena_array, arena_integer,
                                              arena_nil, arena_object_free};

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

/* convo__rd_pipeline() on one server, its replies in a (freed with it). */
int convo__rd_pipeline_arena(convo_backend *b, rconn *rc, cmd *cmds, size_t n,
                             redisReply **replies, rd_arena *a, convo_error *err)
{
    if (rc->nodes)
        return convo__rd_pipeline(b, rc, cmds, n, replies, err) == 0
                   ? convo__error(err, CONVO_ERROR, NULL, "redis: an arena pipeline on a cluster")
                   : CONVO_ERROR;
    redisReader *rd = rc->c->reader;
    redisReplyObjectFunctions *fn = rd->fn;
    void *priv = rd->privdata;
    rd->fn = &arena_fns;
    rd->privdata = a;
    int code = convo__rd_pipeline_plain(b, rc, cmds, n, replies, 1, err);
    rd->fn = fn;
    rd->privdata = priv;
    return code;
}
