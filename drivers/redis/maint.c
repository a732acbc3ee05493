/* maint.c — maintenance, never on a call's path: scanning the keyspace,
 * restoring a dump, the layout 1 -> 2 migration on open, and what convo bench
 * measures (the raw primitive, the bytes stored). */
#include "redis_int.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>

/* ---- scanning the keyspace (maintenance only, never on a call's path) ---- */

/* "P" with the glob characters escaped, then tail: a SCAN pattern. */
static char *scan_pattern(const char *prefix, const char *tail)
{
    char *p = malloc(2 * strlen(prefix) + strlen(tail) + 1), *o = p;
    if (!p)
        return NULL;
    for (; *prefix; prefix++) {
        if (strchr("*?[]\\", *prefix))
            *o++ = '\\';
        *o++ = *prefix;
    }
    strcpy(o, tail);
    return p;
}

/* Runs fn on each batch of keys SCAN finds for the pattern prefix + tail. */

static int scan_node(convo_backend *b, rconn *c, const char *tail, scan_fn fn, void *ctx,
                     convo_error *err)
{
    char *pattern = scan_pattern(b->prefix, tail);
    char cursor[32] = "0";
    if (!pattern) /* convo__rd_cmd_str() below would strlen() it */
        return convo__rd_oom(err);
    int rc;
    do {
        cmd scan = {0};
        redisReply *r = NULL;
        const char *words[] = {"SCAN", cursor, "MATCH", pattern, "COUNT", "1000"};
        for (int i = 0; i < 6; i++)
            convo__rd_cmd_str(&scan, words[i]);
        rc = convo__rd_pipeline(b, c, &scan, 1, &r, err);
        convo__rd_cmd_free(&scan);
        if (rc != 0)
            break;
        if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
            r->element[0]->type != REDIS_REPLY_STRING || r->element[1]->type != REDIS_REPLY_ARRAY)
            rc = r->type == REDIS_REPLY_ERROR
                     ? convo__rd_reply_error(r, err)
                     : convo__error(err, CONVO_EIO, NULL, "redis: bad SCAN reply");
        else {
            snprintf(cursor, sizeof cursor, "%.*s", (int)r->element[0]->len, r->element[0]->str);
            rc = r->element[1]->elements ? fn(b, c, r->element[1], ctx, err) : 0;
        }
        freeReplyObject(r);
    } while (rc == 0 && strcmp(cursor, "0") != 0);
    free(pattern);
    return rc;
}

/* In a cluster, SCAN runs on each master in turn (keys move with resharding:
 * what uses it must bear a key seen twice or not at all). */
int convo__rd_scan_each(convo_backend *b, rconn *c, const char *tail, scan_fn fn, void *ctx,
                        convo_error *err)
{
    if (!b->cluster)
        return scan_node(b, c, tail, fn, ctx, err);
    int nodes[64], rc = 0, n = convo__rcl_masters(b->cluster, nodes, 64);
    for (int i = 0; i < n && rc == 0; i++) {
        convo__rcl_pin(c->nodes, nodes[i]);
        rc = scan_node(b, c, tail, fn, ctx, err);
    }
    convo__rcl_pin(c->nodes, -1);
    return rc;
}

/* ---- restoring a dump ---- */

static int import_send(convo_backend *b, rconn *c, const char *id, const thread_keys *tk,
                       int64_t first, const convo_message_in *msgs, const int64_t *created_at,
                       size_t n, int *skipped, convo_error *err)
{
    packbuf pb = {0};
    cmd cmds[3] = {{0}};
    int rc = convo__rd_pack_records(msgs, n, created_at, 0, &pb);
    if (rc != 0) {
        rc = convo__rd_pack_error(rc, err);
        goto done;
    }
    convo__rd_cmd_index(&cmds[0], b, "ZADD", id);
    convo__rd_cmd_script_head(&cmds[1], tk);
    convo__rd_cmd_num(&cmds[1], b->ttl_ms);
    convo__rd_cmd_num(&cmds[1], first);
    for (size_t i = 0; i < n; i++)
        convo__rd_cmd_part(&cmds[1], &pb, i);
    convo__rd_cmd_index(&cmds[2], b, "ZADD", id);
    redisReply *replies[3] = {NULL};
    if ((rc = convo__rd_pipeline_script(b, c, cmds, 3, 1, S_IMPORT, replies, err)) == 0) {
        if (replies[1]->type == REDIS_REPLY_ERROR)
            rc = convo__rd_reply_error(replies[1], err);
        else if (replies[1]->type != REDIS_REPLY_INTEGER)
            rc = convo__error(err, CONVO_EIO, NULL, "redis: unexpected reply to an import");
        else
            *skipped = replies[1]->integer == 1;
    }
    convo__rd_replies_free(replies, 3);
done:
    for (int i = 0; i < 3; i++)
        convo__rd_cmd_free(&cmds[i]);
    convo__rd_packbuf_free(&pb);
    return rc;
}

int convo__rd_thread_import(convo_backend *b, const char *thread_id, int64_t first_seq,
                            const convo_message_in *msgs, const int64_t *created_at, size_t n,
                            int64_t generation, int *skipped, convo_error *err)
{
    thread_keys tk;
    *skipped = 0;
    if (convo__rd_keys_make(b, thread_id, &tk) != 0)
        return convo__rd_oom(err);
    rconn *c;
    int rc = convo__rd_acquire(b, &c, err);
    if (rc == 0) {
        rc = import_send(b, c, thread_id, &tk, first_seq, msgs, created_at, n, skipped, err);
        convo__rd_release(b, c);
    }
    free(tk.buf);
    return rc;
}

/* ---- layout 1 -> 2 (docs/redis.md, "Put order") ---- */

/* Runs the migration script on each thread of an index page, pipelined. It
 * is idempotent, so on NOSCRIPT the whole page is sent again with EVAL. */
static int migrate_page(convo_backend *b, rconn *c, const redisReply *ids, convo_error *err)
{
    size_t n = ids->elements;
    if (n == 0)
        return 0;
    thread_keys *tk = calloc(n, sizeof *tk);
    cmd *cmds = calloc(n, sizeof *cmds);
    redisReply **r = calloc(n, sizeof *r);
    int rc = tk && cmds && r ? 0 : convo__rd_oom(err);
    for (size_t i = 0; i < n && rc == 0; i++) {
        const redisReply *e = ids->element[i];
        if (e->type != REDIS_REPLY_STRING || memchr(e->str, '\0', e->len))
            rc = convo__error(err, CONVO_ECORRUPT, NULL, "redis: bad thread index entry");
        else if (convo__rd_keys_make(b, e->str, &tk[i]) != 0)
            rc = convo__rd_oom(err);
        else
            convo__rd_cmd_cp_head(&cmds[i], b, &tk[i]);
        if (rc == 0 && cmds[i].failed)
            rc = convo__rd_oom(err);
    }
    for (int eval = 0; rc == 0 && eval < 2; eval++) {
        for (size_t i = 0; i < n; i++) {
            cmds[i].argv[0] = eval ? "EVAL" : "EVALSHA";
            cmds[i].lens[0] = eval ? 4 : 7;
            cmds[i].argv[1] = eval ? convo__rd_scripts[S_CP_MIGRATE] : b->sha[S_CP_MIGRATE];
            cmds[i].lens[1] = strlen(cmds[i].argv[1]);
        }
        if ((rc = convo__rd_pipeline(b, c, cmds, n, r, err)) != 0)
            break;
        int lost = 0;
        for (size_t i = 0; i < n && rc == 0; i++) {
            lost |= convo__rd_is_noscript(r[i]);
            if (r[i]->type == REDIS_REPLY_ERROR && !convo__rd_is_noscript(r[i]))
                rc = convo__rd_reply_error(r[i], err);
        }
        convo__rd_replies_free(r, n);
        if (!lost)
            break;
    }
    for (size_t i = 0; tk && cmds && i < n; i++) {
        free(tk[i].buf);
        convo__rd_cmd_free(&cmds[i]);
    }
    free(tk);
    free(cmds);
    free(r);
    return rc;
}

/* HGET P:store v, or (with value) HSET P:store v value; *is2 = it said "2". */
static int store_version(convo_backend *b, rconn *c, const char *value, int *is2,
                         convo_error *err)
{
    cmd q = {0};
    redisReply *r = NULL;
    convo__rd_cmd_str(&q, value ? "HSET" : "HGET");
    convo__rd_cmd_str(&q, b->store_key);
    convo__rd_cmd_add(&q, "v", 1);
    if (value)
        convo__rd_cmd_str(&q, value);
    int rc = q.failed ? convo__rd_oom(err) : convo__rd_pipeline(b, c, &q, 1, &r, err);
    if (rc == 0 && r->type == REDIS_REPLY_ERROR)
        rc = convo__rd_reply_error(r, err);
    if (rc == 0 && is2)
        *is2 = r->type == REDIS_REPLY_STRING && r->len == 1 && r->str[0] == '2';
    freeReplyObject(r);
    convo__rd_cmd_free(&q);
    return rc;
}

/* Stores of layout 1 numbered checkpoints per thread; layout 2 orders them
 * store-wide. P:store's v = 2 says every thread is migrated; until then each
 * open migrates the threads of the index, 100 per round trip, then sets it.
 * A thread written meanwhile (or not in the index) is migrated by its next
 * checkpoint write: every script that writes a checkpoint migrates first. */
int convo__rd_layout_migrate(convo_backend *b, rconn *c, convo_error *err)
{
    convo_error mine = {0};
    int done = 0, rc = store_version(b, c, NULL, &done, &mine);
    char *after = NULL;
    while (rc == 0 && !done) {
        redisReply *r;
        if ((rc = convo__rd_index_range(b, c, after, 100, &r, &mine)) != 0)
            break;
        /* a store without threads has nothing to migrate: a read-only open of a
         * new prefix writes nothing; a later open that finds threads sets v */
        int empty = !after && r->elements == 0;
        rc = migrate_page(b, c, r, &mine);
        done = r->elements < 100;
        free(after);
        after = rc == 0 && !done ? strdup(r->element[r->elements - 1]->str) : NULL;
        if (rc == 0 && !done && !after)
            rc = convo__rd_oom(&mine);
        freeReplyObject(r);
        if (rc == 0 && done && !empty)
            rc = store_version(b, c, "2", NULL, &mine);
    }
    free(after);
    /* ?wait=N with too few replicas: written on the master, and a later open
     * migrates again (it changes nothing twice); the store works meanwhile */
    if (rc == CONVO_ETIMEOUT && strcmp(mine.backend_code, "WAIT") == 0)
        return 0;
    if (rc != 0 && err)
        *err = mine;
    return rc;
}

/* ---- measuring (convo bench) ---- */

static double now_seconds(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

/* The raw primitive: one RPUSH round trip per message, on a scratch key. */
static int bench_run(convo_backend *b, rconn *c, const char *payload, size_t len, size_t n,
                     double *seconds, convo_error *err)
{
    char key[MAX_PREFIX_BYTES + 64];
    snprintf(key, sizeof key, "%s:bench:{%llu-%p}", b->prefix,
             (unsigned long long)convo__now_micros(), (void *)c);
    cmd push = {0}, del = {0};
    convo__rd_cmd_str(&push, "RPUSH");
    convo__rd_cmd_str(&push, key);
    convo__rd_cmd_add(&push, payload, len);
    convo__rd_cmd_str(&del, "DEL");
    convo__rd_cmd_str(&del, key);
    int rc = 0;
    double t0 = now_seconds();
    for (size_t i = 0; i < n && rc == 0; i++) {
        redisReply *r = NULL;
        rc = convo__rd_pipeline(b, c, &push, 1, &r, err);
        if (rc == 0 && r->type == REDIS_REPLY_ERROR)
            rc = convo__rd_reply_error(r, err);
        freeReplyObject(r);
    }
    *seconds = now_seconds() - t0;
    redisReply *r = NULL;
    if (rc == 0 && (rc = convo__rd_pipeline(b, c, &del, 1, &r, err)) == 0)
        freeReplyObject(r);
    convo__rd_cmd_free(&push);
    convo__rd_cmd_free(&del);
    return rc;
}

int convo__rd_bench_raw(convo_backend *b, const char *payload, size_t payload_len, size_t n,
                        double *seconds, convo_error *err)
{
    rconn *c;
    int rc = convo__rd_acquire(b, &c, err);
    if (rc == 0) {
        rc = bench_run(b, c, payload, payload_len, n, seconds, err);
        convo__rd_release(b, c);
    }
    return rc;
}

/* MEMORY USAGE of every key of one SCAN batch, in one round trip. */
static int usage_batch(convo_backend *b, rconn *c, const redisReply *keys, void *ctx,
                       convo_error *err)
{
    int64_t *total = ctx;
    size_t n = keys->elements;
    cmd *cmds = calloc(n, sizeof *cmds);
    redisReply **replies = calloc(n, sizeof *replies);
    int rc = cmds && replies ? 0 : convo__rd_oom(err);
    for (size_t i = 0; i < n && rc == 0; i++) {
        convo__rd_cmd_str(&cmds[i], "MEMORY");
        convo__rd_cmd_str(&cmds[i], "USAGE");
        convo__rd_cmd_add(&cmds[i], keys->element[i]->str, keys->element[i]->len);
        convo__rd_cmd_str(&cmds[i], "SAMPLES"); /* 0: every element, not an estimate from 5 */
        convo__rd_cmd_str(&cmds[i], "0");
    }
    if (rc == 0)
        rc = convo__rd_pipeline(b, c, cmds, n, replies, err);
    for (size_t i = 0; rc == 0 && i < n; i++)
        if (replies[i]->type == REDIS_REPLY_INTEGER)
            *total += replies[i]->integer;
    for (size_t i = 0; cmds && i < n; i++)
        convo__rd_cmd_free(&cmds[i]);
    if (replies)
        convo__rd_replies_free(replies, n);
    free(cmds);
    free(replies);
    return rc;
}

/* Memory of this store's keys (every key under the prefix, the index
 * included), by MEMORY USAGE: this store's data, not the server's. */
int convo__rd_stored_bytes(convo_backend *b, int64_t *bytes, convo_error *err)
{
    rconn *c;
    *bytes = 0;
    int rc = convo__rd_acquire(b, &c, err);
    if (rc == 0) {
        rc = convo__rd_scan_each(b, c, ":*", usage_batch, bytes, err);
        convo__rd_release(b, c);
    }
    return rc;
}
