/* redis_urls.c — the Redis driver's URLs: what is refused before or at the
 * connection (prefixes, parameters, cluster seeds), and ?wait= on a server
 * without replicas. Part of tests/redis_extra (redis_extra.h). */
#include "redis_extra.h"
#include <check.h>
#include <convo.h>
#include <hiredis/hiredis.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

START_TEST(test_urls)
{
    static const struct {
        const char *params;
        int code;
    } bad[] = {{"prefix=a%7Bb", CONVO_EINVAL}, {"prefix=a}", CONVO_EINVAL},
               {"prefix=a%01", CONVO_EINVAL},  {"prefix=", CONVO_EINVAL},
               {"bogus=1", CONVO_EINVAL},       {"ttl=-1", CONVO_EINVAL},
               {"pool=0", CONVO_EINVAL},        {"timeout=abc", CONVO_EINVAL},
               {"wait=-1", CONVO_EINVAL},       {"wait=65", CONVO_EINVAL},
               {"wait=1&wait_timeout=0", CONVO_EINVAL},
               {"wait=1&wait_timeout=5000&timeout=5000", CONVO_EINVAL}};
    convo_store *s = NULL;
    convo_error err;
    char url[512];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        url_with(url, sizeof url, base_url, bad[i].params);
        int rc = convo_open(&s, url, &err);
        ck_assert_msg(rc == bad[i].code, "%s: %d %s", url, rc, err.message);
    }
    ck_assert_int_eq(convo_open(&s, "rediss://127.0.0.1:1", &err), CONVO_ENOTSUP);
    ck_assert_int_eq(convo_open(&s, "redis://127.0.0.1:1/2?db=2", &err), CONVO_EINVAL);
    ck_assert_int_eq(convo_open(&s, "redis+unix://host/x", &err), CONVO_EINVAL);
    ck_assert_int_eq(convo_open(&s, "redis://127.0.0.1:1?connect_timeout=500", &err), CONVO_EIO);
    /* cluster URLs: seeds, database 0 only */
    static const char *const bad_cluster[] = {
        "redis+cluster://127.0.0.1:1/3", "redis+cluster://127.0.0.1:1/?db=2",
        "redis+cluster://127.0.0.1:1,/", "redis+cluster://127.0.0.1:1,127.0.0.1:x/",
        "redis+cluster://127.0.0.1:1,127.0.0.1:70000/", "redis+cluster://,127.0.0.1:1/"};
    for (size_t i = 0; i < sizeof bad_cluster / sizeof bad_cluster[0]; i++) {
        int rc = convo_open(&s, bad_cluster[i], &err);
        ck_assert_msg(rc == CONVO_EINVAL, "%s: %d %s", bad_cluster[i], rc, err.message);
    }
    /* no node answers: open fails within the timeout instead of hanging */
    int rc = convo_open(&s, "redis+cluster://127.0.0.1:1,127.0.0.1:2/?timeout=300", &err);
    ck_assert_msg(rc == CONVO_EIO || rc == CONVO_ETIMEOUT, "%d %s", rc, err.message);
    /* a single server is no cluster: CLUSTER SLOTS is refused */
    const char *hp = strstr(base_url, "://");
    if (hp && strncmp(base_url, "redis://", 8) == 0) {
        snprintf(url, sizeof url, "redis+cluster://%.*s/?timeout=300", (int)strcspn(hp + 3, "/?"),
                 hp + 3);
        rc = convo_open(&s, url, &err);
        ck_assert_msg(rc == CONVO_EIO || rc == CONVO_ETIMEOUT, "%s: %d %s", url, rc, err.message);
    }
}
END_TEST

/* ?wait=1 on a server without replicas: the write is done, WAIT says 0 of 1. */
START_TEST(test_wait_no_replica)
{
    char prefix[80], more[] = "wait=1&wait_timeout=50";
    snprintf(prefix, sizeof prefix, "%s-wait", run_id);
    convo_store *s = open_prefix(base_url, prefix, more);
    convo_error err;
    const char *m[] = {"{\"role\":\"user\"}"};
    size_t len[] = {strlen(m[0])};
    ck_assert_int_eq(convo_append(s, "w", m, len, 1, NULL, NULL, &err), CONVO_ETIMEOUT);
    ck_assert_str_eq(err.backend_code, "WAIT");
    ck_assert_ptr_nonnull(strstr(err.message, "0 of 1"));
    convo_history *h; /* reads do not wait, and the write stayed on the master */
    ck_assert_int_eq(convo_load(s, "w", NULL, &h, &err), 0);
    ck_assert_int_eq(convo_history_count(h), 1);
    convo_history_free(h);
    convo_close(s);
    s = open_prefix(base_url, prefix, NULL);
    ck_assert_int_eq(convo_thread_delete(s, "w", &err), 0);
    convo_close(s);
}
END_TEST

void redis_add_url_tests(TCase *tc)
{
    tcase_add_test(tc, test_urls);
    tcase_add_test(tc, test_wait_no_replica);
}
