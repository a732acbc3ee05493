/* maint.c — maintenance, never on a call's path: scanning the keyspace,
 * restoring a dump, and what convo bench measures (the raw primitive, the
 * bytes stored). The layout migrations are in layout.c. */
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
                       size_t n, int64_t generation, int *skipped, convo_error *err)
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
    convo__rd_cmd_spec(&cmds[1], tk);
    convo__rd_cmd_num(&cmds[1], b->ttl_ms);
    convo__rd_cmd_num(&cmds[1], first);
    convo__rd_cmd_num(&cmds[1], generation);
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
        if (rc == 0 && !*skipped)
            convo__rd_ix_after(b, c, id);
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
        rc = import_send(b, c, thread_id, &tk, first_seq, msgs, created_at, n, generation,
                         skipped, err);
        convo__rd_release(b, c);
    }
    free(tk.buf);
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
