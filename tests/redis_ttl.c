/* redis_ttl.c — ?ttl=S on Redis: every key of a thread, checkpoint keys
 * included, expires at one deadline; a write without ttl (an append, a tail
 * rewrite) makes them permanent again. Part of tests/redis_extra
 * (redis_extra.h). */
#include "redis_extra.h"
#include <check.h>
#include <convo.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The keys of one thread (by its tag) with their absolute expiry times. */
static size_t thread_keys_expiry(redisContext *c, const char *prefix, const char *tag,
                                 long long *at, size_t max)
{
    char pat[300];
    glob_escape(pat, sizeof pat, prefix);
    size_t n = strlen(pat);
    snprintf(pat + n, sizeof pat - n, ":{%s}:*", tag);
    keyset ks = scan_keys(c, pat);
    for (size_t i = 0; i < ks.n && i < max; i++)
        at[i] = cmd_int(c, "PEXPIRETIME %s", ks.k[i]);
    size_t count = ks.n;
    keys_free(&ks);
    return count;
}

START_TEST(test_ttl_expiry)
{
    char prefix[80];
    snprintf(prefix, sizeof prefix, "%s-ttl", run_id);
    /* 3 s: the setup below must not outlive the ttl on a loaded machine */
    convo_store *s = open_prefix(base_url, prefix, "ttl=3");
    convo_store *forever = open_prefix(base_url, prefix, NULL);
    append_ok(s, "a", "key-1");
    extra_ok(s, "a", "{\"x\":null}");
    checkpoint_ok(s, "a", "");
    append_ok(s, "a", "key-2");
    convo_error err;
    ck_assert_int_eq(convo_thread_fork(s, "a", "b", -1, &err), 0);
    append_ok(s, "c", "key-1");
    extra_ok(forever, "c", "{\"kept\":true}"); /* a store without ttl makes c permanent */
    /* so does a plain append (the short script) by a store that wrote d before */
    ck_assert_int_eq(convo_append(forever, "d", two, NULL, 1, NULL, NULL, &err), 0);
    ck_assert_int_eq(convo_append(forever, "d", two, NULL, 1, NULL, NULL, &err), 0);
    checkpoint_ok(s, "d", "");
    redisContext *c = plain_connect(base_url);
    long long at[8];
    /* seven: its extra hash holds its c and u (layout 8) */
    ck_assert_int_eq(thread_keys_expiry(c, prefix, "d", at, 8), 7);
    ck_assert_msg(at[0] > 0, "d should expire");
    ck_assert_int_eq(convo_append(forever, "d", two, NULL, 1, NULL, NULL, &err), 0);
    ck_assert_int_eq(thread_keys_expiry(c, prefix, "d", at, 8), 7);
    for (int i = 0; i < 7; i++)
        ck_assert_msg(at[i] == -1, "d should be permanent (%lld)", at[i]);
    /* a: every key, checkpoint keys included, with one deadline */
    ck_assert_int_eq(thread_keys_expiry(c, prefix, "a", at, 8), 8);
    for (int i = 0; i < 8; i++)
        ck_assert_msg(at[i] > 0 && at[i] == at[0], "keys of a expire apart: %lld vs %lld", at[i],
                      at[0]);
    ck_assert_int_eq(thread_keys_expiry(c, prefix, "b", at, 8), 3);
    ck_assert_msg(at[0] > 0 && at[1] == at[0] && at[2] == at[0], "keys of b expire apart");
    ck_assert_int_eq(thread_keys_expiry(c, prefix, "c", at, 8), 4);
    for (int i = 0; i < 4; i++)
        ck_assert_msg(at[i] == -1, "c should be permanent (%lld)", at[i]);
    ck_assert_int_eq(convo_thread_delete(forever, "d", &err), 0);
    sleep_ms(4300);
    ck_assert_int_eq(thread_keys_expiry(c, prefix, "a", at, 8), 0);
    ck_assert_int_eq(thread_keys_expiry(c, prefix, "b", at, 8), 0);
    ck_assert_int_eq(length_of(s, "a"), -1);
    convo_checkpoint *cp;
    ck_assert_int_eq(convo_checkpoint_get(s, "a", "", NULL, &cp, &err), CONVO_ENOTFOUND);
    char index_key[120];
    snprintf(index_key, sizeof index_key, "%s:threads", prefix);
    ck_assert_int_eq(cmd_int(c, "ZCARD %s", index_key), 3);
    uint64_t removed = 0;
    ck_assert_int_eq(convo_sweep(s, &removed, &err), 0); /* prunes the index entries of a, b */
    ck_assert_int_eq(removed, 2);
    ck_assert_int_eq(cmd_int(c, "ZCARD %s", index_key), 1);
    convo_thread_page *p;
    ck_assert_int_eq(convo_thread_list(s, NULL, 10, &p, &err), 0);
    ck_assert_int_eq(convo_thread_page_count(p), 1);
    ck_assert_str_eq(convo_thread_page_id(p, 0), "c");
    convo_thread_page_free(p);
    ck_assert_int_eq(convo_thread_delete(s, "c", &err), 0);
    redisFree(c);
    convo_close(s);
    convo_close(forever);
}
END_TEST

/* A store without ttl that appends to a thread a store with ttl wrote makes
 * every key of it permanent again, also when it wrote the thread lately (the
 * append script answers CONVO_CREATE and runs again with every key). */
START_TEST(test_append_removes_deadline)
{
    char prefix[80];
    snprintf(prefix, sizeof prefix, "%s-persist", run_id);
    convo_store *s = open_prefix(base_url, prefix, NULL);
    append_ok(s, "t", NULL);
    char with_ttl[300];
    snprintf(with_ttl, sizeof with_ttl, "%s?prefix=%s&ttl=600", base_url, prefix);
    convo_store *t = open_url(with_ttl);
    append_ok(t, "t", NULL); /* every key of the thread gets a deadline */
    convo_close(t);
    redisContext *c = plain_connect(base_url);
    ck_assert_int_gt(cmd_int(c, "PTTL %s:{t}:msgs", prefix), 0);
    append_ok(s, "t", NULL);
    ck_assert_int_eq(length_of(s, "t"), 6);
    ck_assert_int_eq(cmd_int(c, "PTTL %s:{t}:msgs", prefix), -1);
    ck_assert_int_eq(cmd_int(c, "PTTL %s:{t}:meta", prefix), -1);
    convo_error err;
    ck_assert_int_eq(convo_thread_delete(s, "t", &err), 0);
    convo_close(s);
    redisFree(c);
}
END_TEST

/* The same for a tail rewrite: the common one (rewrite_quick.lua) sees the
 * deadline and leaves the call to the full script, which persists every key;
 * a pop on a thread without a deadline stays permanent and moves nothing else. */
START_TEST(test_rewrite_removes_deadline)
{
    char prefix[80];
    snprintf(prefix, sizeof prefix, "%s-persist-rw", run_id);
    convo_store *s = open_prefix(base_url, prefix, NULL);
    append_ok(s, "t", NULL);
    char with_ttl[300];
    snprintf(with_ttl, sizeof with_ttl, "%s?prefix=%s&ttl=600", base_url, prefix);
    convo_store *t = open_url(with_ttl);
    append_ok(t, "t", NULL);
    convo_close(t);
    redisContext *c = plain_connect(base_url);
    ck_assert_int_gt(cmd_int(c, "PTTL %s:{t}:meta", prefix), 0);
    convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
    o.expected_length = 4;
    convo_rewrite_result res;
    convo_error err;
    ck_assert_int_eq(convo_replace_tail(s, "t", 3, NULL, NULL, 0, &o, &res, &err), 0);
    ck_assert_int_eq(res.removed, 1);
    ck_assert_int_eq(cmd_int(c, "PTTL %s:{t}:msgs", prefix), -1);
    ck_assert_int_eq(cmd_int(c, "PTTL %s:{t}:meta", prefix), -1);
    o.expected_length = 3;
    ck_assert_int_eq(convo_replace_tail(s, "t", 2, NULL, NULL, 0, &o, &res, &err), 0);
    ck_assert_int_eq(res.generation, 2);
    ck_assert_int_eq(length_of(s, "t"), 2);
    ck_assert_int_eq(cmd_int(c, "PTTL %s:{t}:meta", prefix), -1);
    ck_assert_int_eq(convo_thread_delete(s, "t", &err), 0);
    convo_close(s);
    redisFree(c);
}
END_TEST

void redis_add_ttl_tests(TCase *tc)
{
    tcase_add_test(tc, test_ttl_expiry);
    tcase_add_test(tc, test_append_removes_deadline);
    tcase_add_test(tc, test_rewrite_removes_deadline);
}
