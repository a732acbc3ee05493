/* redis_layout_rewrite.c — the tail rewrite on Redis: a refused rewrite
 * writes nothing and one that runs sets one deadline on every key; dropping
 * checkpoints removes the values only they listed; forks racing rewrites
 * never mix generations; what a rewrite costs next to an append. Part of
 * tests/redis_layout (redis_layout.h). */
#include "redis_layout.h"
#include <check.h>
#include <convo.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <time.h>

/* A rewrite refused (checkpoint, length, generation, keep) leaves every key as
 * it was; one that runs sets one deadline on every key. */
START_TEST(test_rewrite_conflict_writes_nothing)
{
    char prefix[256];
    convo_store *s = open_store("rw", "ttl=3600", NULL, prefix, sizeof prefix);
    const char *t = "rw";
    convo_error err;
    ck_assert_int_eq(convo_append(s, t, msgs, NULL, 2, NULL, NULL, &err), 0);
    ck_assert_int_eq(put(s, t, "", "c1", 1, 2, &err), 0); /* length 3, log_length 3 */
    bytes before = snapshot(prefix, t);
    ck_assert_int_eq(rewrite(s, t, 1, 0, &err), CONVO_ECONFLICT);
    same_snapshot(&before, prefix, t, "rewrite refused by a checkpoint");
    ck_assert_int_eq(rewrite(s, t, 4, 1, &err), CONVO_EINVAL);
    same_snapshot(&before, prefix, t, "rewrite past the end");
    convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
    o.expected_generation = 1;
    o.drop_checkpoints = 1;
    convo_rewrite_result res;
    ck_assert_int_eq(convo_replace_tail(s, t, 1, NULL, NULL, 0, &o, &res, &err), CONVO_ECONFLICT);
    ck_assert_ptr_nonnull(strstr(err.message, "3 messages at generation 0"));
    same_snapshot(&before, prefix, t, "rewrite at another generation");
    o.expected_generation = 0;
    o.expected_length = 2;
    ck_assert_int_eq(convo_replace_tail(s, t, 1, NULL, NULL, 0, &o, &res, &err), CONVO_ECONFLICT);
    same_snapshot(&before, prefix, t, "rewrite at another length");
    /* the idempotency hash, checkpoints and all: one deadline, renewed */
    char key[512];
    for (int k = 0; k < 8; k++) {
        key_of(key, sizeof key, prefix, t, k);
        freeReplyObject(on_key(key, "PEXPIRE %s 100000", key));
    }
    o.expected_length = 3;
    o.idempotency_key = "k";
    ck_assert_int_eq(convo_replace_tail(s, t, 1, msgs, NULL, 1, &o, &res, &err), 0);
    ck_assert_int_eq(res.removed, 2);
    ck_assert_int_eq(res.generation, 1);
    long long at = -1;
    for (int k = 0; k < 8; k++) {
        key_of(key, sizeof key, prefix, t, k);
        redisReply *r = on_key(key, "PEXPIRETIME %s", key);
        if (r->integer != -2) { /* keys emptied by the drop are gone */
            ck_assert_int_gt(r->integer, 0);
            ck_assert_msg(at < 0 || at == r->integer, "two deadlines: %lld, %lld", at,
                          r->integer);
            at = r->integer;
        }
        freeReplyObject(r);
        r = on_key(key, "PTTL %s", key);
        ck_assert(r->integer == -2 || r->integer > 3590 * 1000LL);
        freeReplyObject(r);
    }
    free(before.p);
    delete_ok(s, t);
    drop_store_key(prefix);
    convo_close(s);
}
END_TEST

/* A checkpoint whose channel c is at version v with value `value`. */
static void put_value(convo_store *s, const char *id, const char *cp_id, const char *v,
                      const char *value, int64_t log_length)
{
    convo_blob b = {"json", value, strlen(value)};
    convo_channel_in ch[] = {{"c", v, &b}};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = id;
    cp.checkpoint_id = cp_id;
    cp.channels = ch;
    cp.nchannels = 1;
    cp.log_length = log_length;
    convo_error err;
    int rc = convo_checkpoint_put(s, &cp, &err);
    ck_assert_msg(rc == 0, "put %s: %d %s", cp_id, rc, err.message);
    convo_write_in w = {0, "c", {"json", "1", 1}};
    rc = convo_checkpoint_put_writes(s, id, "", cp_id, "task", "", &w, 1, &err);
    ck_assert_msg(rc == 0, "put_writes %s: %d %s", cp_id, rc, err.message);
}

/* Dropping checkpoints removes the values only they listed: a version put
 * again afterwards (LangGraph.js numbers versions 1, 2, 3...) stores its new
 * value instead of finding the dropped one (values are written once). */
START_TEST(test_rewrite_drop_values)
{
    char prefix[256];
    convo_store *s = open_store("vals", NULL, NULL, prefix, sizeof prefix);
    const char *t = "vals";
    convo_error err;
    ck_assert_int_eq(convo_append(s, t, msgs, NULL, 2, NULL, NULL, &err), 0);
    put_value(s, t, "a", "1", "\"one\"", 1);
    put_value(s, t, "b", "1", "\"one\"", 2); /* shares version 1 with a */
    put_value(s, t, "c", "2", "\"two\"", 2);
    put_value(s, t, "d", "2", "\"two\"", 2);
    ck_assert_int_eq(rewrite(s, t, 1, 1, &err), 0); /* drops b, c, d */
    ck_assert_int_eq(hexists(prefix, t, 4, "\0a", 2), 1);
    ck_assert_int_eq(hexists(prefix, t, 4, "\0b", 2), 0);
    ck_assert_int_eq(hexists(prefix, t, 6, "\0c\0" "1", 4), 1);
    ck_assert_int_eq(hexists(prefix, t, 6, "\0c\0" "2", 4), 0);
    ck_assert_int_eq(hexists(prefix, t, 7, "\0b\0task\0" "0", 9), 0);
    ck_assert_int_eq(hexists(prefix, t, 7, "\0a\0task\0" "0", 9), 1);
    ck_assert_int_eq(loglen_members(prefix, t), 1);
    put_value(s, t, "e", "2", "\"TWO\"", 2);
    convo_checkpoint *cp;
    ck_assert_int_eq(convo_checkpoint_get(s, t, "", "e", &cp, &err), 0);
    const char *version;
    convo_blob v;
    ck_assert_str_eq(convo_checkpoint_channel(cp, 0, &version, &v), "c");
    ck_assert_msg(v.type && v.len == 5 && memcmp(v.bytes, "\"TWO\"", 5) == 0, "value %.*s",
                  (int)v.len, (const char *)v.bytes);
    convo_checkpoint_free(cp);
    delete_ok(s, t);
    drop_store_key(prefix);
    convo_close(s);
}
END_TEST

/* A fork racing rewrites: the source's messages and generation are read in
 * one snapshot, so every fork holds the messages of exactly the generation it
 * got (here each rewrite writes its generation into its messages), never a
 * mix. On a cluster source and copies live in other slots (two steps). */
typedef struct fork_race {
    convo_store *s;
    const char *src;
    int rounds;
    volatile int done;
} fork_race;

static void *rewriter(void *arg)
{
    fork_race *f = arg;
    for (int g = 1; g <= f->rounds; g++) {
        char m[3][64];
        const char *mp[3];
        for (int i = 0; i < 3; i++) {
            snprintf(m[i], sizeof m[i], "{\"role\":\"assistant\",\"content\":\"g%d\"}", g);
            mp[i] = m[i];
        }
        convo_error err;
        int rc = convo_replace_tail(f->s, f->src, 1, mp, NULL, 3, NULL, NULL, &err);
        ck_assert_msg(rc == 0, "rewrite: %d %s", rc, err.message);
    }
    f->done = 1;
    return NULL;
}

START_TEST(test_fork_races_rewrites)
{
    char prefix[256];
    convo_store *s = open_store("fork", NULL, NULL, prefix, sizeof prefix);
    convo_store *s2 = open_store("fork", NULL, NULL, prefix, sizeof prefix);
    const char *first[] = {"{\"role\":\"user\",\"content\":\"q\"}",
                           "{\"role\":\"assistant\",\"content\":\"g0\"}",
                           "{\"role\":\"assistant\",\"content\":\"g0\"}",
                           "{\"role\":\"assistant\",\"content\":\"g0\"}"};
    convo_error err;
    ck_assert_int_eq(convo_append(s, "fork-src", first, NULL, 4, NULL, NULL, &err), 0);
    fork_race f = {s2, "fork-src", 150, 0};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, rewriter, &f), 0);
    int forks = 0, generations_seen = 0, joined = 0;
    int64_t last = -1;
    for (;;) {
        if (f.done && forks >= 10 && !joined) { /* one more after the last rewrite */
            pthread_join(th, NULL);
            joined = 1;
        } else if (joined) {
            break;
        }
        char dst[32];
        snprintf(dst, sizeof dst, "fork-dst-%d", forks++);
        ck_assert_int_eq(convo_thread_fork(s, "fork-src", dst, -1, &err), 0);
        convo_history *h;
        ck_assert_int_eq(convo_load(s, dst, NULL, &h, &err), 0);
        int64_t g = convo_history_generation(h);
        char want[64];
        snprintf(want, sizeof want, "{\"role\":\"assistant\",\"content\":\"g%lld\"}", (long long)g);
        ck_assert_uint_eq(convo_history_count(h), 4);
        for (size_t i = 1; i < 4; i++) {
            size_t len;
            const char *got = convo_history_message(h, i, &len);
            ck_assert_msg(len == strlen(want) && memcmp(got, want, len) == 0,
                          "fork %s at generation %lld holds %.*s", dst, (long long)g, (int)len,
                          got);
        }
        generations_seen += g != last;
        last = g;
        convo_history_free(h);
        ck_assert_int_eq(convo_thread_delete(s, dst, NULL), 0);
    }
    ck_assert_int_eq(last, 150);
    ck_assert_msg(generations_seen > 2, "only %d generations seen in %d forks", generations_seen,
                  forks);
    delete_ok(s, "fork-src");
    drop_store_key(prefix);
    convo_close(s2);
    convo_close(s);
}
END_TEST

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* What regenerating the last answer (keep length - 1, one message) costs
 * against a one-message append, each the median of 1,000 taken in turns (a
 * shared machine's load changes all the time), on a thread without
 * checkpoints and on one with 2,000 (a rewrite reads only those past keep).
 * Prints the ratios; fails above 3. */
static double rewrite_cost(convo_store *s, const char *t, const char *a, int64_t keep,
                           double *append_us, double *rewrite_us)
{
    enum { N = 1000 };
    static double ta[N], tr[N];
    convo_rewrite_result res;
    convo_error err;
    for (int i = 0; i < 2 * N; i++) { /* either first in turn: what comes after a
                                          * script waits on its after-work */
        double t0 = seconds_now();
        if (i % 2 == i / N) {
            ck_assert_int_eq(convo_append(s, a, &msgs[1], NULL, 1, NULL, NULL, &err), 0);
            ta[i / 2] = seconds_now() - t0;
        } else {
            int rc = convo_replace_tail(s, t, keep, &msgs[1], NULL, 1, NULL, &res, &err);
            ck_assert_msg(rc == 0, "rewrite: %d %s", rc, err.message);
            tr[i / 2] = seconds_now() - t0;
        }
    }
    qsort(ta, N, sizeof ta[0], by_value);
    qsort(tr, N, sizeof tr[0], by_value);
    *append_us = ta[N / 2] * 1e6;
    *rewrite_us = tr[N / 2] * 1e6;
    return tr[N / 2] / ta[N / 2];
}

START_TEST(test_rewrite_cost)
{
    char prefix[256];
    convo_store *s = open_store("cost", NULL, NULL, prefix, sizeof prefix);
    const char *t = "cost-rw", *a = "cost-app";
    convo_error err;
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(convo_append(s, t, msgs, NULL, 2, NULL, NULL, &err), 0);
    ck_assert_int_eq(convo_append(s, a, msgs, NULL, 1, NULL, NULL, &err), 0);
    double au, ru, plain = rewrite_cost(s, t, a, 9, &au, &ru);
    printf("redis-layout (%s): a rewrite of the last answer costs %.2f appends (medians %.1f us "
           "and %.1f us)", cluster ? "cluster" : "server", plain, ru, au);
    for (int i = 0; i < 2000; i++) {
        char id[32];
        snprintf(id, sizeof id, "cp-%04d", i);
        convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
        cp.thread_id = t;
        cp.checkpoint_id = id;
        cp.log_length = i % 10;
        ck_assert_int_eq(convo_checkpoint_put(s, &cp, &err), 0);
    }
    double with = rewrite_cost(s, t, a, 9, &au, &ru);
    printf(", %.2f with 2,000 checkpoints (%.1f us and %.1f us)\n", with, ru, au);
    ck_assert_int_eq(generation_of(s, t), 2000);
    ck_assert_msg(plain < 3 && with < 3, "a rewrite costs %.2f / %.2f appends", plain, with);
    delete_ok(s, t);
    delete_ok(s, a);
    drop_store_key(prefix);
    convo_close(s);
}
END_TEST

void redis_layout_add_rewrite_tests(TCase *tc)
{
    tcase_add_test(tc, test_rewrite_conflict_writes_nothing);
    tcase_add_test(tc, test_rewrite_drop_values);
    tcase_add_test(tc, test_fork_races_rewrites);
    tcase_add_test(tc, test_rewrite_cost);
}
