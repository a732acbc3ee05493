/* redis_threads.c — the thread index P:threads on one server: ghost entries
 * and lost ones repaired (by listing, by a store's next write, by sweep), and
 * appends, saves and deletes racing on the same ids. Part of
 * tests/redis_extra (redis_extra.h). */
#include "redis_extra.h"
#include <check.h>
#include <convo.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_index_repair)
{
    char prefix[80], index_key[120];
    snprintf(prefix, sizeof prefix, "%s-index", run_id);
    snprintf(index_key, sizeof index_key, "%s:threads", prefix);
    convo_store *s = open_prefix(base_url, prefix, NULL);
    redisContext *c = plain_connect(base_url);
    append_ok(s, "b", NULL);
    /* a crash between the index update and the thread script leaves a ghost */
    freeReplyObject(cmd(c, "ZADD %s 0 a 0 c 0 d", index_key));
    convo_thread_page *p;
    convo_error err;
    ck_assert_int_eq(convo_thread_list(s, NULL, 1, &p, &err), 0);
    ck_assert_int_eq(convo_thread_page_count(p), 1);
    ck_assert_str_eq(convo_thread_page_id(p, 0), "b");
    ck_assert_ptr_null(convo_thread_page_next(p)); /* c and d are gone too */
    convo_thread_page_free(p);
    ck_assert_int_eq(cmd_int(c, "ZCARD %s", index_key), 1);
    /* an entry lost on the way (a client died between a removal and its
     * re-add) comes back with the next write of a store that has not written
     * the thread lately; a store that has skips the index (docs/redis.md) */
    freeReplyObject(cmd(c, "ZREM %s b", index_key));
    extra_ok(s, "b", "{}");
    ck_assert_int_eq(cmd_int(c, "ZCARD %s", index_key), 0);
    convo_store *fresh = open_prefix(base_url, prefix, NULL);
    append_ok(fresh, "b", NULL);
    ck_assert_int_eq(cmd_int(c, "ZCARD %s", index_key), 1);
    convo_close(fresh);
    /* and with convo_sweep, which also drops what is gone */
    freeReplyObject(cmd(c, "ZREM %s b", index_key));
    freeReplyObject(cmd(c, "ZADD %s 0 ghost", index_key));
    uint64_t removed = 0;
    ck_assert_int_eq(convo_sweep(s, &removed, &err), 0);
    ck_assert_int_eq(removed, 1);
    ck_assert_int_eq(cmd_int(c, "ZCARD %s", index_key), 1);
    ck_assert_int_eq(cmd_int(c, "ZRANK %s b", index_key), 0);
    /* a thread made by a checkpoint is indexed like any other */
    checkpoint_ok(s, "e{x}", "");
    ck_assert_int_eq(cmd_int(c, "ZCARD %s", index_key), 2);
    freeReplyObject(cmd(c, "ZREM %s e{x}", index_key));
    ck_assert_int_eq(convo_sweep(s, &removed, &err), 0);
    ck_assert_int_eq(cmd_int(c, "ZCARD %s", index_key), 2);
    ck_assert_int_eq(length_of(s, "e{x}"), 0);
    ck_assert_int_eq(convo_thread_delete(s, "e{x}", &err), 0);
    ck_assert_int_eq(convo_thread_delete(s, "b", &err), 0);
    ck_assert_int_eq(cmd_int(c, "EXISTS %s", index_key), 0);
    redisFree(c);
    convo_close(s);
}
END_TEST

typedef struct racer {
    convo_store *s;
    int deleter;
    double until;
} racer;

static const char *const race_ids[] = {"r0", "r1", "r2"};

static void *race(void *arg)
{
    racer *r = arg;
    for (unsigned i = 0; now_s() < r->until; i++) {
        const char *id = race_ids[i % 3];
        if (r->deleter)
            convo_thread_delete(r->s, id, NULL);
        else if (i % 2)
            convo_append(r->s, id, two, NULL, 1, NULL, NULL, NULL);
        else
            convo_save_extra(r->s, id, "{\"k\":1}", NULL);
    }
    return NULL;
}

/* Appends, saves and deletes racing on the same ids: afterwards every thread
 * that exists is in the index (and listed). A stress check only: one server
 * runs a client's pipelined commands back to back, so the interleavings the
 * index protocol guards against (docs/redis.md) are rare here. */
START_TEST(test_index_race)
{
    char prefix[80], index_key[120];
    snprintf(prefix, sizeof prefix, "%s-race", run_id);
    snprintf(index_key, sizeof index_key, "%s:threads", prefix);
    convo_store *s = open_prefix(base_url, prefix, "pool=6");
    racer r[6];
    pthread_t t[6];
    for (int i = 0; i < 6; i++) {
        r[i] = (racer){s, i % 2, now_s() + 1.5};
        pthread_create(&t[i], NULL, race, &r[i]);
    }
    for (int i = 0; i < 6; i++)
        pthread_join(t[i], NULL);
    redisContext *c = plain_connect(base_url);
    size_t live = 0;
    for (int i = 0; i < 3; i++) {
        if (length_of(s, race_ids[i]) < 0)
            continue;
        live++;
        redisReply *z = cmd(c, "ZSCORE %s %s", index_key, race_ids[i]);
        ck_assert_msg(z->type == REDIS_REPLY_STRING, "%s exists but is not indexed", race_ids[i]);
        freeReplyObject(z);
    }
    convo_thread_page *p;
    convo_error err;
    ck_assert_int_eq(convo_thread_list(s, NULL, 10, &p, &err), 0);
    ck_assert_int_eq(convo_thread_page_count(p), live);
    convo_thread_page_free(p);
    for (int i = 0; i < 3; i++)
        convo_thread_delete(s, race_ids[i], NULL);
    redisFree(c);
    convo_close(s);
}
END_TEST

void redis_add_thread_tests(TCase *tc)
{
    tcase_add_test(tc, test_index_repair);
    tcase_add_test(tc, test_index_race);
}
