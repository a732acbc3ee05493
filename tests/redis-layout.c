/* redis-layout.c — tests/redis_layout: the Redis driver's layouts and its
 * tail rewrite, seen by a plain hiredis client, on one server or on a Redis
 * Cluster. This file holds what the others share (redis_layout.h: snapshots of
 * a thread's keys; the nodes and stores are tests/redis_test.c's) and main; the
 * checks are in one file per concern: puts that conflict and puts with log
 * references (redis_layout_put.c), stores of layouts 1 and 2 migrated
 * (redis_layout_old.c), the tail rewrite and what it costs
 * (redis_layout_rewrite.c).
 * Usage: tests/redis_layout URL PREFIX. URL is redis://HOST:PORT or
 * redis+cluster://... (the nodes from $CONVO_TEST_REDIS_CLUSTER_PORTS); every
 * key it writes starts with PREFIX and is deleted when the checks pass. */
#include "redis_layout.h"
#include <check.h>
#include <convo.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const suffixes[] = {"msgs", "idem", "meta", "extra",
                                       "cp",   "cpidx", "blobs", "writes"};

/* ------------------------------------------------------------ helpers */

void key_of(char *out, size_t size, const char *prefix, const char *id, int kind)
{
    snprintf(out, size, "%s:{%s}:%s", prefix, id, suffixes[kind]);
}

/* The thread index key holding id (plain ids: the tag is the id): P:threads,
 * or on a cluster P:threads:{N}, N the smallest number hashing to id's slot. */
static void index_key_of(char *out, size_t size, const char *prefix, const char *id)
{
    if (!cluster) {
        snprintf(out, size, "%s:threads", prefix);
        return;
    }
    unsigned slot = crc16(id, strlen(id)) & 16383;
    char n[16];
    for (unsigned i = 0;; i++) {
        snprintf(n, sizeof n, "%u", i);
        if ((crc16(n, strlen(n)) & 16383) == slot)
            break;
    }
    snprintf(out, size, "%s:threads:{%s}", prefix, n);
}

static void bytes_add(bytes *b, const char *s, size_t n)
{
    b->p = realloc(b->p, b->len + n + 1);
    ck_assert_ptr_nonnull(b->p);
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '|';
}

static void bytes_reply(bytes *b, const redisReply *r)
{
    char num[32];
    if (r->type == REDIS_REPLY_STRING) {
        bytes_add(b, r->str, r->len);
    } else if (r->type == REDIS_REPLY_INTEGER) {
        snprintf(num, sizeof num, "%lld", r->integer);
        bytes_add(b, num, strlen(num));
    } else {
        bytes_add(b, "(nil)", 5);
    }
    bytes_add(b, "|", 1);
}

/* Everything a write to thread id could change: each key's DUMP and
 * PEXPIRETIME, its index entry, and the store's own key P:store. */
bytes snapshot(const char *prefix, const char *id)
{
    bytes b = {NULL, 0};
    char key[512];
    for (int k = 0; k < 8; k++) {
        key_of(key, sizeof key, prefix, id, k);
        redisReply *r = on_key(key, "DUMP %s", key);
        bytes_reply(&b, r);
        freeReplyObject(r);
        r = on_key(key, "PEXPIRETIME %s", key);
        bytes_reply(&b, r);
        freeReplyObject(r);
    }
    index_key_of(key, sizeof key, prefix, id);
    redisReply *r = on_key(key, "ZSCORE %s %s", key, id);
    bytes_reply(&b, r);
    freeReplyObject(r);
    snprintf(key, sizeof key, "%s:store", prefix);
    r = on_key(key, "DUMP %s", key);
    bytes_reply(&b, r);
    freeReplyObject(r);
    return b;
}

void same_snapshot(const bytes *a, const char *prefix, const char *id, const char *what)
{
    bytes now = snapshot(prefix, id);
    ck_assert_msg(now.len == a->len && memcmp(now.p, a->p, a->len) == 0,
                  "%s: thread %s changed", what, id);
    free(now.p);
}

const char *const msgs[2] = {"{\"role\":\"user\",\"content\":\"one\"}",
                                   "{\"role\":\"assistant\",\"content\":\"two\"}"};

/* A checkpoint with one channel value, and (n > 0) n messages appended at
 * seq `expected` in the same put. */
int put(convo_store *s, const char *id, const char *ns, const char *cp_id, size_t n,
               int64_t expected, convo_error *err)
{
    convo_blob v = {"json", "7", 1};
    convo_channel_in ch[] = {{"c", "1", &v}};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = id;
    cp.checkpoint_ns = ns;
    cp.checkpoint_id = cp_id;
    cp.channels = ch;
    cp.nchannels = 1;
    cp.messages = msgs;
    cp.nmessages = n;
    cp.expected_length = expected;
    cp.log_length = n ? expected + (int64_t)n : 0;
    return convo_checkpoint_put(s, &cp, err);
}

void put_ok(convo_store *s, const char *id, const char *ns, const char *cp_id)
{
    convo_error err;
    int rc = put(s, id, ns, cp_id, 0, 0, &err);
    ck_assert_msg(rc == 0, "put %s %s: %d %s", id, cp_id, rc, err.message);
}

void delete_ok(convo_store *s, const char *id)
{
    convo_error err;
    int rc = convo_thread_delete(s, id, &err);
    ck_assert_msg(rc == 0, "delete %s: %d %s", id, rc, err.message);
}

void drop_store_key(const char *prefix)
{
    char key[512];
    snprintf(key, sizeof key, "%s:store", prefix);
    freeReplyObject(on_key(key, "DEL %s", key));
}

/* The number of "l" members (checkpoints indexed by log length) of a thread. */
long long loglen_members(const char *prefix, const char *id)
{
    char key[512];
    key_of(key, sizeof key, prefix, id, 5);
    redisReply *r = on_key(key, "ZLEXCOUNT %s %b %b", key, "[l\0", (size_t)3, "(l\1", (size_t)3);
    long long n = r->integer;
    freeReplyObject(r);
    return n;
}

int64_t generation_of(convo_store *s, const char *id)
{
    convo_history *h;
    convo_error err;
    int rc = convo_load(s, id, NULL, &h, &err);
    ck_assert_msg(rc == 0, "load %s: %d %s", id, rc, err.message);
    int64_t g = convo_history_generation(h);
    convo_history_free(h);
    return g;
}

int rewrite(convo_store *s, const char *id, int64_t keep, int drop, convo_error *err)
{
    convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
    o.drop_checkpoints = drop;
    convo_rewrite_result r;
    return convo_replace_tail(s, id, keep, msgs, NULL, 1, &o, &r, err);
}

int hexists(const char *prefix, const char *id, int kind, const char *field, size_t len)
{
    char key[512];
    key_of(key, sizeof key, prefix, id, kind);
    redisReply *r = on_key(key, "HEXISTS %s %b", key, field, len);
    int n = (int)r->integer;
    freeReplyObject(r);
    return n;
}

int main(int argc, char **argv)
{
    int status = redis_test_args(argc, argv, "redis-layout", NULL);
    if (status >= 0)
        return status;
    Suite *su = suite_create("redis-layout");
    TCase *tc = tcase_create(cluster ? "cluster" : "server");
    tcase_set_timeout(tc, 60);
    tcase_add_checked_fixture(tc, connect_nodes, disconnect_nodes);
    redis_layout_add_put_tests(tc);
    redis_layout_add_old_tests(tc);
    redis_layout_add_rewrite_tests(tc);
    suite_add_tcase(su, tc);
    return redis_test_run(su);
}
