/* index.c — the thread index (a sorted set per store, per slot in a cluster)
 * and the protocol every write that may create a thread follows; listing
 * threads, and the sweep that removes entries of threads that are gone.
 * See docs/redis.md, "The thread index". */
#include "redis_int.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- writes that may create a thread ---- */

/* Which threads this store wrote lately, by a 64-bit hash of the id: a
 * direct-mapped table, lock-free. It only decides whether a write first
 * re-asserts the thread's index entry, and whether an append first tries
 * the thread's message list without a script; a wrong answer costs a round
 * trip, never correctness (see convo__rd_run_writer). A slot holds the hash
 * with bit 1 cleared until this store appended to the thread (the thread had
 * a message list then: save_extra creates threads without one). */
#define MSGS_BIT 2u

uint64_t convo__rd_id_hash(const char *id)
{
    uint64_t h = 0xcbf29ce484222325u; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)id; *p; p++)
        h = (h ^ *p) * 0x100000001b3u;
    return h | 1 | MSGS_BIT; /* 0 marks an empty slot */
}

/* FNV-1a's bits above the lowest move little with the last bytes of an id
 * ("t1", "t2"), so the slot comes from the hash mixed again. */
static atomic_uint_fast64_t *recent_slot(convo_backend *b, uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdu;
    h ^= h >> 33;
    return &b->recent[h & (RECENT_SLOTS - 1)];
}

int convo__rd_recent_has(convo_backend *b, uint64_t h)
{
    return (atomic_load_explicit(recent_slot(b, h), memory_order_relaxed) | MSGS_BIT) == h;
}

/* This store appended to the thread since it remembered it. */
int convo__rd_recent_has_messages(convo_backend *b, uint64_t h)
{
    return atomic_load_explicit(recent_slot(b, h), memory_order_relaxed) == h;
}

static void recent_set(convo_backend *b, uint64_t h)
{
    atomic_store_explicit(recent_slot(b, h), h & ~(uint64_t)MSGS_BIT, memory_order_relaxed);
}

/* After an append: the thread has a message list (unless someone removes it). */
void convo__rd_recent_set_messages(convo_backend *b, uint64_t h)
{
    atomic_store_explicit(recent_slot(b, h), h, memory_order_relaxed);
}

/* Forgets h (unless another thread took its slot meanwhile). */
void convo__rd_recent_forget(convo_backend *b, uint64_t h)
{
    atomic_store_explicit(&b->moved[recent_slot(b, h) - b->recent], 0, memory_order_relaxed);
    uint_fast64_t expect = h;
    if (!atomic_compare_exchange_strong(recent_slot(b, h), &expect, 0)) {
        expect = h & ~(uint64_t)MSGS_BIT;
        atomic_compare_exchange_strong(recent_slot(b, h), &expect, 0);
    }
}

/* The activity times this store set (one server, layout 6): per slot of the
 * table above, (at - moved_epoch) / 1024 µs in the upper 40 bits (35 years)
 * and 24 bits of the hash, in one word, so a reader never pairs one thread's
 * time with another's hash. Rounded down, so the window it promises is never
 * longer than the true one; a stale or wrong answer can only cost a script
 * that moves the thread again, except where another writer set the time back
 * (a clock behind ours): docs/redis.md, "The activity window". */
#define MOVED_TAG(h) ((h) >> 40)

void convo__rd_recent_moved(convo_backend *b, uint64_t h, int64_t at)
{
    if (at < b->moved_epoch)
        return;
    uint64_t v = ((uint64_t)(at - b->moved_epoch) >> 10) << 24 | MOVED_TAG(h);
    atomic_store_explicit(&b->moved[recent_slot(b, h) - b->recent], v, memory_order_relaxed);
}

/* This store set the thread's activity time less than a window before now. */
int convo__rd_recent_in_window(convo_backend *b, uint64_t h, int64_t now)
{
    uint64_t v = atomic_load_explicit(&b->moved[recent_slot(b, h) - b->recent],
                                      memory_order_relaxed);
    if (v == 0 || (v & 0xffffff) != MOVED_TAG(h))
        return 0;
    int64_t at = b->moved_epoch + (int64_t)((v >> 24) << 10);
    return now >= at && now < at + WINDOW_US;
}

/* NOW, the clock value at the head of tk's index argument. */
int64_t convo__rd_spec_now(const thread_keys *tk)
{
    int64_t v = 0;
    for (size_t i = 0; i < tk->spec_len && tk->spec[i] >= '0' && tk->spec[i] <= '9'; i++)
        v = v * 10 + (tk->spec[i] - '0');
    return v;
}

static int is_create(const redisReply *r)
{
    return r->type == REDIS_REPLY_STATUS && r->len == 12 && memcmp(r->str, "CONVO_CREATE", 12) == 0;
}

static int is_written(const redisReply *r)
{
    return r->type != REDIS_REPLY_ERROR && !is_create(r) && !convo__rd_is_migrate(r) &&
           !(r->type == REDIS_REPLY_STATUS && r->len > 6 && memcmp(r->str, "CONVO_", 6) == 0);
}

/* Sends cmds[0..n) (cmds[at] the script) and, on a cluster, the reads of the
 * thread's index values after them on its node (ix != NULL): ix[0..2) get
 * their replies. */
static int send_writer(convo_backend *b, rconn *c, const thread_keys *tk, cmd *cmds, size_t n,
                       size_t at, int script, redisReply **replies, redisReply **ix,
                       convo_error *err)
{
    if (!ix)
        return convo__rd_pipeline_script(b, c, cmds, n, at, script, replies, err);
    convo__rd_ix_read_cmds(b, tk, &cmds[n]);
    int rc = convo__rd_pipeline_script(b, c, cmds, n + 2, at, script, replies, err);
    if (rc == 0) {
        ix[0] = replies[n];
        ix[1] = replies[n + 1];
        replies[n] = replies[n + 1] = NULL;
    }
    convo__rd_cmd_free(&cmds[n]);
    convo__rd_cmd_free(&cmds[n + 1]);
    cmds[n] = cmds[n + 1] = (cmd){0};
    return rc;
}

/* The :r entries moved beside a known thread's script (beside.c): their
 * keys as remembered, the call's time, the ZADDs' replies; done = they did
 * all the index write after the script would have. */
typedef struct beside_run {
    char *keys;
    size_t len, count;
    const char *now;
    size_t now_len;
    redisReply **zr;
    int sent, protocol, done; /* protocol: the script answered CONVO_CREATE */
} beside_run;

/* The known thread's script alone (with bs, its ZADDs beside it, after it in
 * the pipeline, the reads last). */
static int writer_known(convo_backend *b, rconn *c, const thread_keys *tk, build_fn build,
                        void *ctx, redisReply **r0, redisReply **ix, beside_run *bs,
                        convo_error *err)
{
    size_t nz = bs ? bs->count : 0;
    cmd *one = calloc(3 + nz, sizeof *one);
    redisReply **r = calloc(3 + nz, sizeof *r);
    int rc = one && r ? 0 : convo__rd_oom(err);
    int s = rc == 0 ? build(ctx, &one[0], 0) : 0;
    if (rc == 0 && s < 0)
        rc = convo__rd_oom(err);
    if (rc == 0 && nz)
        convo__rd_beside_zadds(bs->keys, nz, tk->id, bs->now, bs->now_len, &one[1]);
    for (size_t i = 1; i <= nz && rc == 0; i++)
        if (one[i].failed)
            rc = convo__rd_oom(err);
    if (rc == 0)
        rc = send_writer(b, c, tk, one, 1 + nz, 0, s, r, ix, err);
    if (rc == 0) {
        *r0 = r[0];
        for (size_t i = 0; i < nz; i++)
            bs->zr[i] = r[1 + i];
        if (bs)
            bs->sent = nz > 0;
    }
    for (size_t i = 0; one && i < 3 + nz; i++)
        convo__rd_cmd_free(&one[i]);
    free(one);
    free(r);
    return rc;
}

/* Runs a writing script that may create the thread. A thread this store wrote lately is indexed already, so its script runs
 * alone, without leave to create: it answers CONVO_CREATE, having written
 * nothing, when the thread is missing. Then, as for every other thread, the
 * index protocol runs: ZADD, the script allowed to create, ZADD, pipelined
 * (docs/redis.md, "The thread index"). So only a call inside the protocol
 * ever creates a thread. */
static int writer_run(convo_backend *b, rconn *c, const thread_keys *tk, int known,
                      build_fn build, void *ctx, redisReply **reply, redisReply **ix,
                      beside_run *bs, convo_error *err)
{
    uint64_t h = convo__rd_id_hash(tk->id);
    int rc;
    if (known) {
        redisReply *r0 = NULL;
        rc = writer_known(b, c, tk, build, ctx, &r0, ix, bs, err);
        if (rc != 0 || !is_create(r0)) {
            *reply = r0;
            return rc;
        }
        freeReplyObject(r0);
        if (bs)
            bs->protocol = 1;
        if (ix) {
            freeReplyObject(ix[0]);
            freeReplyObject(ix[1]);
            ix[0] = ix[1] = NULL;
        }
    }
    cmd cmds[5] = {{0}};
    redisReply *replies[5] = {NULL};
    convo__rd_cmd_index(&cmds[0], b, "ZADD", tk->id);
    int s = build(ctx, &cmds[1], 1);
    rc = s < 0 ? convo__rd_oom(err) : 0;
    convo__rd_cmd_index(&cmds[2], b, "ZADD", tk->id);
    if (rc == 0)
        rc = send_writer(b, c, tk, cmds, 3, 1, s, replies, ix, err);
    if (rc == 0 && replies[0]->type == REDIS_REPLY_INTEGER &&
        replies[1]->type != REDIS_REPLY_ERROR && replies[2]->type == REDIS_REPLY_INTEGER)
        recent_set(b, h);
    if (rc == 0) {
        *reply = replies[1];
        replies[1] = NULL;
    }
    convo__rd_replies_free(replies, 3);
    for (int i = 0; i < 3; i++)
        convo__rd_cmd_free(&cmds[i]);
    return rc;
}

/* Runs a writing script that may create the thread; *reply gets its reply.
 * On a cluster the thread's index values are read in the same round trip,
 * after the script, and its index entries written after it (ix.c) — unless
 * the entries moved beside the script (now given: the clock the script
 * writes to meta's u; a known thread whose :r keys the store remembers) did it all, as those reads show. Entries moved
 * beside a script that wrote nothing are set back from the same reads. */
static int run_writer(convo_backend *b, rconn *c, const char *id, int known, const char *now,
                      size_t now_len, build_fn build, void *ctx, redisReply **reply,
                      convo_error *err)
{
    thread_keys tk = {0};
    tk.id = id; /* one server: the id is all writer_run needs */
    if (b->cluster && convo__rd_keys_make(b, id, &tk) != 0)
        return convo__rd_oom(err);
    redisReply *ix[2] = {NULL};
    beside_run bs = {0};
    int use = b->cluster && known && now &&
              convo__rd_beside_get(b, id, &bs.keys, &bs.len, &bs.count) &&
              (bs.zr = calloc(bs.count, sizeof *bs.zr)) != NULL;
    bs.now = now;
    bs.now_len = now_len;
    int rc = writer_run(b, c, &tk, known, build, ctx, reply, b->cluster ? ix : NULL,
                        use ? &bs : NULL, err);
    if (rc == 0 && bs.sent && !bs.protocol)
        bs.done = is_written(*reply) && convo__rd_beside_done(b, id, bs.keys, bs.len, bs.now,
                                                              bs.now_len, bs.zr, bs.count,
                                                              ix[0], ix[1]);
    if (rc == 0 && b->cluster && !bs.done && (is_written(*reply) || bs.sent)) {
        (void)convo__rd_ix_write(b, c, id, ix[0], ix[1], NULL);
        convo__rd_beside_learn(b, id, ix[0], ix[1]);
    }
    convo__rd_replies_free(bs.zr, bs.zr ? bs.count : 0);
    free(bs.zr);
    free(bs.keys);
    freeReplyObject(ix[0]);
    freeReplyObject(ix[1]);
    free(tk.buf);
    return rc;
}

int convo__rd_run_writer_as(convo_backend *b, rconn *c, const char *id, int known, build_fn build,
                            void *ctx, redisReply **reply, convo_error *err)
{
    return run_writer(b, c, id, known, NULL, 0, build, ctx, reply, err);
}

int convo__rd_run_writer_beside(convo_backend *b, rconn *c, const char *id, int known,
                                const char *now, size_t now_len, build_fn build, void *ctx,
                                redisReply **reply, convo_error *err)
{
    return run_writer(b, c, id, known, now, now_len, build, ctx, reply, err);
}

int convo__rd_run_writer(convo_backend *b, rconn *c, const char *id, build_fn build, void *ctx,
                         redisReply **reply, convo_error *err)
{
    return convo__rd_run_writer_as(b, c, id, convo__rd_recent_has(b, convo__rd_id_hash(id)), build,
                                   ctx, reply, err);
}

/* ---- the thread index ---- */

/* After removing index entries, put back those whose thread exists after all:
 * a writer may have created it between our check and our ZREM. */
int convo__rd_index_remove(convo_backend *b, rconn *c, const char *const *ids, size_t n,
                           size_t *readded, convo_error *err)
{
    if (n == 0)
        return 0;
    cmd *cmds = calloc(2 * n, sizeof *cmds);
    redisReply **replies = calloc(2 * n, sizeof *replies);
    thread_keys *tk = calloc(n, sizeof *tk);
    int rc = cmds && replies && tk ? 0 : convo__rd_oom(err);
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (convo__rd_keys_make(b, ids[i], &tk[i]) != 0) {
            rc = convo__rd_oom(err);
            break;
        }
        convo__rd_cmd_index(&cmds[2 * i], b, "ZREM", ids[i]);
        convo__rd_cmd_str(&cmds[2 * i + 1], "EXISTS");
        convo__rd_cmd_add(&cmds[2 * i + 1], tk[i].k[K_META], tk[i].len[K_META]);
    }
    if (rc == 0)
        rc = convo__rd_pipeline(b, c, cmds, 2 * n, replies, err);
    for (size_t i = 0; i < n && rc == 0; i++) {
        const redisReply *e = replies[2 * i + 1];
        if (e->type == REDIS_REPLY_INTEGER && e->integer == 1) {
            if (readded)
                (*readded)++;
            cmd again = {0};
            redisReply *r = NULL;
            convo__rd_cmd_index(&again, b, "ZADD", ids[i]);
            rc = convo__rd_pipeline(b, c, &again, 1, &r, err);
            freeReplyObject(r);
            convo__rd_cmd_free(&again);
        }
    }
    for (size_t i = 0; cmds && i < 2 * n; i++)
        convo__rd_cmd_free(&cmds[i]);
    if (replies)
        convo__rd_replies_free(replies, 2 * n);
    for (size_t i = 0; tk && i < n; i++)
        free(tk[i].buf);
    free(cmds);
    free(replies);
    free(tk);
    return rc;
}

/* EXISTS of each candidate's meta key, in one round trip; exists[i] set to 0/1. */
static int check_exist(convo_backend *b, rconn *c, const redisReply *ids, char *exists,
                       convo_error *err)
{
    size_t n = ids->elements;
    for (size_t i = 0; i < n; i++)
        if (ids->element[i]->type != REDIS_REPLY_STRING ||
            memchr(ids->element[i]->str, '\0', ids->element[i]->len))
            return convo__error(err, CONVO_ECORRUPT, NULL, "redis: bad thread index entry");
    if (n == 0)
        return 0;
    cmd *cmds = calloc(n, sizeof *cmds);
    redisReply **replies = calloc(n, sizeof *replies);
    thread_keys *tk = calloc(n, sizeof *tk);
    int rc = cmds && replies && tk ? 0 : convo__rd_oom(err);
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (convo__rd_keys_make(b, ids->element[i]->str, &tk[i]) != 0)
            rc = convo__rd_oom(err);
        convo__rd_cmd_str(&cmds[i], "EXISTS");
        convo__rd_cmd_add(&cmds[i], tk[i].k[K_META], tk[i].len[K_META]);
    }
    if (rc == 0)
        rc = convo__rd_pipeline(b, c, cmds, n, replies, err);
    for (size_t i = 0; i < n && rc == 0; i++)
        exists[i] = replies[i]->type == REDIS_REPLY_INTEGER && replies[i]->integer == 1;
    for (size_t i = 0; cmds && i < n; i++)
        convo__rd_cmd_free(&cmds[i]);
    if (replies)
        convo__rd_replies_free(replies, n);
    for (size_t i = 0; tk && i < n; i++)
        free(tk[i].buf);
    free(cmds);
    free(replies);
    free(tk);
    return rc;
}

/* ZRANGEBYLEX index "(cursor" + LIMIT 0 count: the next candidates after cursor. */
int convo__rd_index_range(convo_backend *b, rconn *c, const char *cursor, size_t count,
                          redisReply **out, convo_error *err)
{
    cmd q = {0};
    char *from = NULL;
    if (cursor && (from = malloc(strlen(cursor) + 2)))
        sprintf(from, "(%s", cursor);
    if (cursor && !from)
        return convo__rd_oom(err);
    if (b->cluster) {
        int code = convo__rcl_index_range(b->cluster, c->nodes, from ? from : "-", count, out, err);
        free(from);
        return code;
    }
    convo__rd_cmd_str(&q, "ZRANGEBYLEX");
    convo__rd_cmd_str(&q, b->index_key);
    convo__rd_cmd_str(&q, from ? from : "-");
    convo__rd_cmd_add(&q, "+", 1);
    convo__rd_cmd_str(&q, "LIMIT");
    convo__rd_cmd_num(&q, 0);
    convo__rd_cmd_num(&q, (long long)count);
    int rc = convo__rd_pipeline(b, c, &q, 1, out, err);
    convo__rd_cmd_free(&q);
    free(from);
    if (rc == 0 && (*out)->type != REDIS_REPLY_ARRAY) {
        rc = (*out)->type == REDIS_REPLY_ERROR
                 ? convo__rd_reply_error(*out, err)
                 : convo__error(err, CONVO_EIO, NULL, "redis: unexpected ZRANGEBYLEX reply");
        freeReplyObject(*out);
    }
    return rc;
}

typedef struct id_list {
    char **ids;
    size_t n, cap;
} id_list;

static int id_push(id_list *l, const char *s, size_t len)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 32;
        char **g = realloc(l->ids, cap * sizeof *g);
        if (!g)
            return CONVO_ENOMEM;
        l->ids = g;
        l->cap = cap;
    }
    if (!(l->ids[l->n] = malloc(len + 1)))
        return CONVO_ENOMEM;
    memcpy(l->ids[l->n], s, len);
    l->ids[l->n++][len] = '\0';
    return 0;
}

static void id_list_free(id_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->ids[i]);
    free(l->ids);
}

/* Sorts one batch of index candidates into live (up to want) and stale ids;
 * *looked = how many were sorted (the last of them is the next cursor). */
static int classify(const redisReply *r, const char *exists, size_t want, id_list *live,
                    id_list *stale, size_t *looked)
{
    size_t i = 0;
    for (; i < r->elements && live->n < want; i++) {
        const redisReply *e = r->element[i];
        if (id_push(exists[i] ? live : stale, e->str, e->len) != 0)
            return CONVO_ENOMEM;
    }
    *looked = i;
    return 0;
}

/* Collects up to `want` ids of existing threads after `after`, pruning index
 * entries of threads that are gone (deleted mid-way, expired, or a crash). */
static int list_collect(convo_backend *b, rconn *c, const char *after, size_t want, id_list *live,
                        convo_error *err)
{
    char *cursor = after ? strdup(after) : NULL;
    int rc = after && !cursor ? convo__rd_oom(err) : 0;
    while (rc == 0 && live->n < want) {
        size_t ask = want - live->n < 16 ? 16 : want - live->n;
        redisReply *r;
        if ((rc = convo__rd_index_range(b, c, cursor, ask, &r, err)) != 0)
            break;
        char *exists = calloc(r->elements + 1, 1);
        id_list stale = {0};
        size_t looked = 0;
        rc = exists ? check_exist(b, c, r, exists, err) : convo__rd_oom(err);
        if (rc == 0 && classify(r, exists, want, live, &stale, &looked) != 0)
            rc = convo__rd_oom(err);
        if (rc == 0)
            rc = convo__rd_index_remove(b, c, (const char *const *)stale.ids, stale.n, NULL, err);
        int done = r->elements < ask;
        if (rc == 0 && looked > 0) {
            free(cursor);
            const redisReply *last = r->element[looked - 1];
            if ((cursor = malloc(last->len + 1))) {
                memcpy(cursor, last->str, last->len);
                cursor[last->len] = '\0';
            } else {
                rc = convo__rd_oom(err);
            }
        }
        id_list_free(&stale);
        free(exists);
        freeReplyObject(r);
        if (done)
            break;
    }
    free(cursor);
    return rc;
}

int convo__rd_thread_list(convo_backend *b, const char *after, size_t limit,
                          convo_thread_page **out, convo_error *err)
{
    convo_thread_page *p = convo__thread_page_new();
    if (!p)
        return convo__rd_oom(err);
    id_list live = {0};
    rconn *c;
    int rc = convo__rd_acquire(b, &c, err);
    if (rc == 0) {
        /* one more than asked for tells whether a next page exists */
        rc = list_collect(b, c, after, limit + 1, &live, err);
        convo__rd_release(b, c);
    }
    for (size_t i = 0; rc == 0 && i < live.n && i < limit; i++)
        if (convo__thread_page_add(p, live.ids[i], strlen(live.ids[i])) != 0)
            rc = convo__rd_oom(err);
    if (rc == 0 && live.n > limit && convo__thread_page_set_next(p, live.ids[limit - 1]) != 0)
        rc = convo__rd_oom(err);
    id_list_free(&live);
    if (rc != 0) {
        convo_thread_page_free(p);
        return rc;
    }
    *out = p;
    return 0;
}

/* Goes through the whole index and removes the entries of threads that are
 * gone (expired with ttl, or left by a crash); *removed counts them. */
static int sweep_run(convo_backend *b, rconn *c, uint64_t *removed, convo_error *err)
{
    char *cursor = NULL;
    int rc = 0, done = 0;
    while (rc == 0 && !done) {
        redisReply *r;
        if ((rc = convo__rd_index_range(b, c, cursor, 500, &r, err)) != 0)
            break;
        char *exists = calloc(r->elements + 1, 1);
        id_list live = {0}, stale = {0};
        size_t looked = 0, readded = 0;
        rc = exists ? check_exist(b, c, r, exists, err) : convo__rd_oom(err);
        if (rc == 0 && classify(r, exists, SIZE_MAX, &live, &stale, &looked) != 0)
            rc = convo__rd_oom(err);
        if (rc == 0)
            rc = convo__rd_index_remove(b, c, (const char *const *)stale.ids, stale.n, &readded, err);
        *removed += stale.n - readded;
        done = r->elements < 500;
        if (rc == 0 && !done) {
            free(cursor);
            const redisReply *last = r->element[r->elements - 1];
            if ((cursor = malloc(last->len + 1))) {
                memcpy(cursor, last->str, last->len);
                cursor[last->len] = '\0';
            } else {
                rc = convo__rd_oom(err);
            }
        }
        id_list_free(&live);
        id_list_free(&stale);
        free(exists);
        freeReplyObject(r);
    }
    free(cursor);
    return rc;
}

static int hex_digit(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The thread id of "P:{TAG}:meta" (the tag percent-decoded), or NULL. */
static char *id_of_meta_key(const convo_backend *b, const redisReply *k)
{
    size_t plen = strlen(b->prefix);
    if (k->type != REDIS_REPLY_STRING || k->len < plen + 9 || memcmp(k->str, b->prefix, plen) ||
        memcmp(k->str + plen, ":{", 2) || memcmp(k->str + k->len - 6, "}:meta", 6))
        return NULL;
    const char *tag = k->str + plen + 2;
    size_t tlen = k->len - plen - 8, n = 0;
    char *id = malloc(tlen + 1);
    for (size_t i = 0; id && i < tlen; i++) {
        int hi = i + 2 < tlen ? hex_digit(tag[i + 1]) : -1;
        int lo = i + 2 < tlen ? hex_digit(tag[i + 2]) : -1;
        if (tag[i] != '%') {
            id[n++] = tag[i];
        } else if (hi >= 0 && lo >= 0 && (hi || lo)) {
            id[n++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            free(id);
            return NULL;
        }
    }
    if (id)
        id[n] = '\0';
    return id;
}

/* ZADD NX of the thread of each meta key of a SCAN batch: puts back index
 * entries that a client lost by dying between a removal and its re-add. */
static int repair_batch(convo_backend *b, rconn *c, const redisReply *keys, void *ctx,
                        convo_error *err)
{
    (void)ctx;
    size_t n = keys->elements, m = 0;
    cmd *cmds = calloc(n, sizeof *cmds);
    char **ids = calloc(n, sizeof *ids);
    redisReply **replies = calloc(n, sizeof *replies);
    int rc = cmds && ids && replies ? 0 : convo__rd_oom(err);
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (!(ids[m] = id_of_meta_key(b, keys->element[i])))
            continue;
        convo__rd_cmd_str(&cmds[m], "ZADD");
        convo__rd_cmd_index_key(&cmds[m], b, ids[m]);
        convo__rd_cmd_str(&cmds[m], "NX");
        convo__rd_cmd_str(&cmds[m], "0");
        convo__rd_cmd_str(&cmds[m], ids[m]);
        m++;
    }
    if (rc == 0 && m > 0)
        rc = convo__rd_pipeline(b, c, cmds, m, replies, err);
    /* layout 4: every entry of each thread written again (index.lua, ix.c) */
    if (rc == 0 && m > 0)
        rc = convo__rd_ix_reindex(b, c, (const char *const *)ids, m, err);
    for (size_t i = 0; cmds && ids && i < m; i++) {
        convo__rd_cmd_free(&cmds[i]);
        free(ids[i]);
    }
    if (replies && rc == 0)
        convo__rd_replies_free(replies, m);
    free(cmds);
    free(ids);
    free(replies);
    return rc;
}

int convo__rd_sweep(convo_backend *b, uint64_t *removed, convo_error *err)
{
    rconn *c;
    *removed = 0;
    int rc = convo__rd_acquire(b, &c, err);
    if (rc == 0) {
        rc = sweep_run(b, c, removed, err);
        if (rc == 0)
            rc = convo__rd_ix_sweep(b, c, err);
        if (rc == 0)
            rc = convo__rd_scan_each(b, c, ":{*}:meta", repair_batch, NULL, err);
        convo__rd_release(b, c);
    }
    return rc;
}
