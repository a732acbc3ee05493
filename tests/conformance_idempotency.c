/* conformance_idempotency.c — appends with an idempotency key (a retried
 * call applies once and answers what the first did, per thread, surviving a
 * reopen, checked before the expected length) and with an expected length
 * (compare-and-swap on the thread's length). */
#include "conformance.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* -------------------------------------------------------------- idempotency */

int conf_append_opts(convo_store *s, const char *t, const char *const *m, size_t n,
                     const char *key, int64_t expected, convo_append_result *res,
                     convo_error *err)
{
    convo_append_opts o = CONVO_APPEND_OPTS_INIT;
    o.idempotency_key = key;
    o.expected_length = expected;
    res->first_seq = -1;
    res->count = 0;
    res->replayed = -1;
    return convo_append(s, t, m, NULL, n, &o, res, err);
}

void conf_assert_result(const convo_append_result *r, int64_t first, size_t count, int replayed)
{
    ck_assert_msg(r->first_seq == first && r->count == count && r->replayed == replayed,
                  "append result {first %lld, count %zu, replayed %d}, expected {%lld, %zu, %d}",
                  (long long)r->first_seq, r->count, r->replayed, (long long)first, count,
                  replayed);
}

const char *const conf_three[] = {"{\"role\":\"user\",\"n\":1}", "{\"role\":\"assistant\",\"n\":2}",
                                 "{\"role\":\"tool\",\"n\":3}"};

START_TEST(test_idempotent_retry)
{
    char t[256];
    TID(t, "retry");
    convo_append_result r;
    convo_error err;
    ASSERT_OK(conf_append_opts(conf_store, t, conf_three, 3, "k1", -1, &r, &err), err);
    conf_assert_result(&r, 0, 3, 0);
    ASSERT_OK(conf_append_opts(conf_store, t, conf_three, 3, "k1", -1, &r, &err), err);
    conf_assert_result(&r, 0, 3, 1);
    ck_assert_int_eq(conf_length(conf_store, t), 3);
    ck_assert_int_eq(conf_append(conf_store, t, conf_three, 2), 3);
    ASSERT_OK(conf_append_opts(conf_store, t, conf_three, 3, "k1", -1, &r, &err), err);
    conf_assert_result(&r, 0, 3, 1);
    ASSERT_OK(conf_append_opts(conf_store, t, conf_three + 2, 1, "k2", -1, &r, &err), err);
    conf_assert_result(&r, 5, 1, 0);
    ASSERT_OK(conf_append_opts(conf_store, t, conf_three + 2, 1, "k2", -1, &r, &err), err);
    conf_assert_result(&r, 5, 1, 1);
    convo_history *h = conf_load(conf_store, t, NULL);
    ck_assert_int_eq(convo_history_count(h), 6);
    const size_t src[] = {0, 1, 2, 0, 1, 2};
    const char *roles[] = {"user", "assistant", "tool", "user", "assistant", "tool"};
    for (size_t i = 0; i < 6; i++)
        conf_assert_message(h, i, conf_three[src[i]], strlen(conf_three[src[i]]), roles[i], (int64_t)i);
    convo_history_free(h);
}
END_TEST

/* A used key with another batch is refused (it returned the first result and
 * dropped the batch): more messages, fewer, or the same count with other bytes. */
START_TEST(test_idempotency_key_other_batch)
{
    char t[256];
    TID(t, "other-batch");
    convo_append_result r;
    convo_error err;
    ASSERT_OK(conf_append_opts(conf_store, t, conf_three, 2, "k", -1, &r, &err), err);
    conf_assert_result(&r, 0, 2, 0);
    ASSERT_FAILS(conf_append_opts(conf_store, t, conf_three, 3, "k", -1, &r, &err), err, CONVO_ECONFLICT);
    ck_assert_ptr_nonnull(strstr(err.message, "idempotency key k was used for another batch"));
    ASSERT_FAILS(conf_append_opts(conf_store, t, conf_three, 1, "k", -1, &r, &err), err, CONVO_ECONFLICT);
    const char *spaced[] = {conf_three[0], "{ \"role\":\"assistant\",\"n\":2}"};
    ASSERT_FAILS(conf_append_opts(conf_store, t, spaced, 2, "k", -1, &r, &err), err, CONVO_ECONFLICT);
    ASSERT_FAILS(conf_append_opts(conf_store, t, conf_three + 1, 2, "k", -1, &r, &err), err,
                 CONVO_ECONFLICT);
    ck_assert_int_eq(conf_length(conf_store, t), 2);
    ASSERT_OK(conf_append_opts(conf_store, t, conf_three, 2, "k", -1, &r, &err), err);
    conf_assert_result(&r, 0, 2, 1);
    ck_assert_int_eq(conf_length(conf_store, t), 2);
}
END_TEST

START_TEST(test_idempotency_per_thread)
{
    char a[256], b[256];
    TID(a, "a");
    TID(b, "b");
    convo_append_result r;
    convo_error err;
    ASSERT_OK(conf_append_opts(conf_store, a, conf_three, 2, "same", -1, &r, &err), err);
    conf_assert_result(&r, 0, 2, 0);
    ASSERT_OK(conf_append_opts(conf_store, b, conf_three, 3, "same", -1, &r, &err), err);
    conf_assert_result(&r, 0, 3, 0);
    ck_assert_int_eq(conf_length(conf_store, a), 2);
    ck_assert_int_eq(conf_length(conf_store, b), 3);
}
END_TEST

START_TEST(test_idempotency_odd_keys)
{
    static const char *const keys[] = {
        "a.b", "$set", "$", ".", "k:1", "{tag}", "a b", "q\"uote", "back\\slash", "*", "?",
        "[x]", "%41", "\xc3\xbc\xe6\x97\xa5\xf0\x9f\x98\x80", "0", "-1", "__proto__",
    };
    char t[256];
    TID(t, "odd");
    convo_append_result r;
    convo_error err;
    size_t n = sizeof keys / sizeof *keys;
    for (size_t i = 0; i < n; i++) {
        ASSERT_OK(conf_append_opts(conf_store, t, conf_three, 1, keys[i], -1, &r, &err), err);
        ck_assert_msg(r.replayed == 0 && r.first_seq == (int64_t)i,
                      "key '%s': first %lld replayed %d", keys[i], (long long)r.first_seq,
                      r.replayed);
    }
    for (size_t i = 0; i < n; i++) {
        ASSERT_OK(conf_append_opts(conf_store, t, conf_three, 1, keys[i], -1, &r, &err), err);
        ck_assert_msg(r.replayed == 1 && r.first_seq == (int64_t)i,
                      "retry of key '%s': first %lld replayed %d", keys[i],
                      (long long)r.first_seq, r.replayed);
    }
    ck_assert_int_eq(conf_length(conf_store, t), (int64_t)n);
}
END_TEST

START_TEST(test_idempotency_before_expected_length)
{
    char t[256];
    TID(t, "order");
    convo_append_result r;
    convo_error err;
    ASSERT_OK(conf_append_opts(conf_store, t, conf_three, 3, "k", 0, &r, &err), err);
    conf_assert_result(&r, 0, 3, 0);
    /* the retry's expected length (0) no longer matches, but the key wins */
    ASSERT_OK(conf_append_opts(conf_store, t, conf_three, 3, "k", 0, &r, &err), err);
    conf_assert_result(&r, 0, 3, 1);
    ASSERT_OK(conf_append_opts(conf_store, t, conf_three, 3, "k", 99, &r, &err), err);
    conf_assert_result(&r, 0, 3, 1);
    ck_assert_int_eq(conf_length(conf_store, t), 3);
}
END_TEST

/* A key is only remembered for a batch that was stored. */
START_TEST(test_idempotency_failed_append_not_recorded)
{
    char t[256];
    TID(t, "failed");
    convo_append_result r;
    convo_error err;
    ASSERT_FAILS(conf_append_opts(conf_store, t, conf_three, 3, "k", 5, &r, &err), err, CONVO_ECONFLICT);
    ck_assert_int_eq(conf_length(conf_store, t), -1);
    const char *bad[] = {"{\"role\":\"user\"}", "{nope"};
    ASSERT_FAILS(conf_append_opts(conf_store, t, bad, 2, "k", -1, &r, &err), err, CONVO_EINVAL);
    ASSERT_OK(conf_append_opts(conf_store, t, conf_three, 2, "k", -1, &r, &err), err);
    conf_assert_result(&r, 0, 2, 0);
    ASSERT_OK(conf_append_opts(conf_store, t, conf_three, 2, "k", -1, &r, &err), err);
    conf_assert_result(&r, 0, 2, 1);
}
END_TEST

START_TEST(test_idempotency_survives_reopen)
{
    SKIP_IF_PRIVATE();
    char t[256];
    TID(t, "reopen");
    convo_append_result r;
    convo_error err;
    ASSERT_OK(conf_append_opts(conf_store, t, conf_three, 3, "persist", -1, &r, &err), err);
    convo_close(conf_store);
    conf_store = conf_open();
    ASSERT_OK(conf_append_opts(conf_store, t, conf_three, 3, "persist", -1, &r, &err), err);
    conf_assert_result(&r, 0, 3, 1);
    ck_assert_int_eq(conf_length(conf_store, t), 3);
}
END_TEST

/* ---------------------------------------------------------- expected length */

START_TEST(test_expected_length)
{
    char t[256];
    TID(t, "expect");
    convo_append_result r;
    convo_error err;
    ASSERT_FAILS(conf_append_opts(conf_store, t, conf_three, 1, NULL, 3, &r, &err), err, CONVO_ECONFLICT);
    ck_assert_int_eq(conf_length(conf_store, t), -1);
    ASSERT_OK(conf_append_opts(conf_store, t, conf_three, 2, NULL, 0, &r, &err), err);
    conf_assert_result(&r, 0, 2, 0);
    ASSERT_FAILS(conf_append_opts(conf_store, t, conf_three, 1, NULL, 0, &r, &err), err, CONVO_ECONFLICT);
    ASSERT_FAILS(conf_append_opts(conf_store, t, conf_three, 1, NULL, 1, &r, &err), err, CONVO_ECONFLICT);
    ASSERT_FAILS(conf_append_opts(conf_store, t, conf_three, 1, NULL, 3, &r, &err), err, CONVO_ECONFLICT);
    ck_assert_int_eq(conf_length(conf_store, t), 2);
    ASSERT_OK(conf_append_opts(conf_store, t, conf_three + 2, 1, NULL, 2, &r, &err), err);
    conf_assert_result(&r, 2, 1, 0);
    convo_history *h = conf_load(conf_store, t, NULL);
    ck_assert_int_eq(convo_history_count(h), 3);
    conf_assert_message(h, 2, conf_three[2], strlen(conf_three[2]), "tool", 2);
    convo_history_free(h);
}
END_TEST

START_TEST(test_expected_length_on_empty_thread)
{
    char t[256];
    TID(t, "emptyexp");
    conf_save_extra_ok(conf_store, t, "{\"k\":\"v\"}");
    convo_append_result r;
    convo_error err;
    ASSERT_FAILS(conf_append_opts(conf_store, t, conf_three, 1, NULL, 1, &r, &err), err, CONVO_ECONFLICT);
    ASSERT_OK(conf_append_opts(conf_store, t, conf_three, 1, NULL, 0, &r, &err), err);
    conf_assert_result(&r, 0, 1, 0);
    conf_assert_extra(conf_store, t, "{\"k\":\"v\"}");
}
END_TEST

void conf_add_idempotency_tests(Suite *s)
{
    TCase *tc = conf_tcase(s, "idempotency");
    tcase_add_test(tc, test_idempotent_retry);
    tcase_add_test(tc, test_idempotency_per_thread);
    tcase_add_test(tc, test_idempotency_key_other_batch);
    tcase_add_test(tc, test_idempotency_odd_keys);
    tcase_add_test(tc, test_idempotency_before_expected_length);
    tcase_add_test(tc, test_idempotency_failed_append_not_recorded);
    tcase_add_test(tc, test_idempotency_survives_reopen);
    tc = conf_tcase(s, "expected_length");
    tcase_add_test(tc, test_expected_length);
    tcase_add_test(tc, test_expected_length_on_empty_thread);
}
