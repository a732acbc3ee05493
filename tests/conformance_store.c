/* conformance_store.c — the conformance suite on a store as a whole: error codes
 * and messages, URLs (errors, ttl, passwords never shown), then the concurrent
 * writers (conformance_concurrency.c), and what a reopen or a second handle sees. */
#include "conformance.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------- errors */

START_TEST(test_strerror)
{
    const int codes[] = {CONVO_OK, CONVO_ERROR, CONVO_EINVAL, CONVO_ENOTFOUND, CONVO_ECONFLICT,
                         CONVO_ETOOLARGE, CONVO_EIO, CONVO_ETIMEOUT, CONVO_ENOMEM,
                         CONVO_ENOTSUP, CONVO_ECORRUPT};
    size_t n = sizeof codes / sizeof *codes;
    for (size_t i = 0; i < n; i++) {
        const char *s = convo_strerror(codes[i]);
        ck_assert_msg(s && *s && !strchr(s, '\n'), "convo_strerror(%d) is empty", codes[i]);
        for (size_t j = 0; j < i; j++)
            ck_assert_msg(strcmp(s, convo_strerror(codes[j])) != 0,
                          "codes %d and %d share the text '%s'", codes[i], codes[j], s);
    }
    ck_assert_ptr_nonnull(convo_strerror(-999));
    ck_assert_ptr_nonnull(convo_strerror(12345));
    ck_assert_ptr_nonnull(convo_version());
}
END_TEST

START_TEST(test_error_cleared_on_success)
{
    char t[256];
    TID(t, "clear");
    convo_error err;
    ASSERT_FAILS(convo_load(conf_store, t, NULL, &(convo_history *){NULL}, &err), err,
                 CONVO_ENOTFOUND);
    ASSERT_OK(convo_append(conf_store, t, conf_three, NULL, 1, NULL, NULL, &err), err);
    ck_assert_int_eq(err.code, 0);
    ASSERT_FAILS(convo_save_extra(conf_store, t, "[]", &err), err, CONVO_EINVAL);
    ASSERT_OK(convo_save_extra(conf_store, t, "{}", &err), err);
    ck_assert_int_eq(err.code, 0);
}
END_TEST

/* Every call accepts err == NULL and still returns its code. */
START_TEST(test_null_error_struct)
{
    char t[256], u[256];
    TID(t, "t");
    TID(u, "u");
    convo_history *h;
    convo_thread_page *p;
    ck_assert_int_eq(convo_append(conf_store, t, conf_three, NULL, 2, NULL, NULL, NULL), 0);
    ck_assert_int_eq(convo_append(conf_store, "", conf_three, NULL, 2, NULL, NULL, NULL), CONVO_EINVAL);
    ck_assert_int_eq(convo_load(conf_store, u, NULL, &h, NULL), CONVO_ENOTFOUND);
    ck_assert_int_eq(convo_load(conf_store, t, NULL, &h, NULL), 0);
    convo_history_free(h);
    ck_assert_int_eq(convo_save_extra(conf_store, t, "x", NULL), CONVO_EINVAL);
    ck_assert_int_eq(convo_save_extra(conf_store, t, "{}", NULL), 0);
    ck_assert_int_eq(convo_thread_fork(conf_store, t, u, 5, NULL), CONVO_EINVAL);
    ck_assert_int_eq(convo_thread_fork(conf_store, t, u, -1, NULL), 0);
    ck_assert_int_eq(convo_thread_fork(conf_store, t, u, -1, NULL), CONVO_ECONFLICT);
    ck_assert_int_eq(convo_thread_list(conf_store, NULL, 1, &p, NULL), 0);
    convo_thread_page_free(p);
    ck_assert_int_eq(convo_thread_delete(conf_store, u, NULL), 0);
    ck_assert_int_eq(convo_thread_delete(conf_store, u, NULL), CONVO_ENOTFOUND);
    convo_append_opts o = CONVO_APPEND_OPTS_INIT;
    o.expected_length = 0;
    ck_assert_int_eq(convo_append(conf_store, t, conf_three, NULL, 1, &o, NULL, NULL), CONVO_ECONFLICT);
    ck_assert_int_eq(convo_open(NULL, conf_url, NULL), CONVO_EINVAL);
}
END_TEST

/* -------------------------------------------------------------- persistence */

START_TEST(test_reopen_keeps_everything)
{
    SKIP_IF_PRIVATE();
    char t[256], e[256];
    TID(t, "t");
    TID(e, "extraonly");
    conf_append(conf_store, t, conf_rt_msgs, conf_rt_n);
    conf_save_extra_ok(conf_store, t, "{\"k\":[1,{\"x\":null}],\"s\":\"\xc3\xa9\"}");
    conf_save_extra_ok(conf_store, e, "{}");
    convo_history *before = conf_load(conf_store, t, NULL);
    convo_close(conf_store);
    conf_store = conf_open();
    convo_history *after = conf_load(conf_store, t, NULL);
    ck_assert_int_eq(convo_history_count(after), conf_rt_n);
    for (size_t i = 0; i < conf_rt_n; i++) {
        conf_assert_message(after, i, conf_rt_msgs[i], strlen(conf_rt_msgs[i]), conf_rt_roles[i],
                            (int64_t)i);
        ck_assert_int_eq(convo_history_created_at(after, i), convo_history_created_at(before, i));
    }
    conf_assert_json_eq(convo_history_extra(after), convo_history_extra(before), "extra");
    convo_history_free(before);
    convo_history_free(after);
    ck_assert_int_eq(conf_length(conf_store, e), 0);
    ck_assert_int_eq(conf_append(conf_store, t, conf_three, 1), (int64_t)conf_rt_n);
}
END_TEST

/* Two handles on one store see each other's writes at once. */
START_TEST(test_two_handles)
{
    SKIP_IF_PRIVATE();
    char t[256];
    TID(t, "t");
    convo_store *other = conf_open();
    conf_append(conf_store, t, conf_three, 2);
    ck_assert_int_eq(conf_length(other, t), 2);
    ck_assert_int_eq(conf_append(other, t, conf_three, 1), 2);
    conf_save_extra_ok(other, t, "{\"o\":1}");
    conf_assert_extra(conf_store, t, "{\"o\":1}");
    convo_error err;
    ASSERT_OK(convo_thread_delete(conf_store, t, &err), err);
    ck_assert_int_eq(conf_length(other, t), -1);
    convo_close(other);
}
END_TEST

/* --------------------------------------------------------------------- URLs */

static char *url_with(const char *url, const char *param)
{
    size_t n = strlen(url);
    char *out = malloc(n + strlen(param) + 2);
    ck_assert_ptr_nonnull(out);
    const char *sep = strchr(url, '?') ? (n && (url[n - 1] == '?' || url[n - 1] == '&') ? "" : "&")
                                       : "?";
    sprintf(out, "%s%s%s", url, sep, param);
    return out;
}

/* The URL with "convo_user:secretpw@" as its user info, or NULL when it has no authority. */
static char *url_with_password(const char *url)
{
    const char *a = strstr(url, "://");
    if (!a)
        return NULL;
    a += 3;
    const char *end = a + strcspn(a, "/?");
    const char *host = a;
    for (const char *p = a; p < end; p++)
        if (*p == '@')
            host = p + 1;
    char *out = malloc(strlen(url) + 32);
    ck_assert_ptr_nonnull(out);
    sprintf(out, "%.*sconvo_user:secretpw@%s", (int)(a - url), url, host);
    return out;
}

START_TEST(test_url_errors)
{
    convo_store *s = (convo_store *)1;
    convo_error err;
    ASSERT_FAILS(convo_open(&s, "nosuchscheme:whatever", &err), err, CONVO_EINVAL);
    ck_assert_ptr_null(s);
    ASSERT_FAILS(convo_open(&s, "", &err), err, CONVO_EINVAL);
    ASSERT_FAILS(convo_open(&s, NULL, &err), err, CONVO_EINVAL);
    ASSERT_FAILS(convo_open(&s, "no scheme at all", &err), err, CONVO_EINVAL);
    char *bogus = url_with(conf_url, "bogus=1");
    ASSERT_FAILS(convo_open(&s, bogus, &err), err, CONVO_EINVAL);
    ck_assert_ptr_null(s);
    free(bogus);
}
END_TEST

/* Issue 18.7: ttl=S means the same for every driver: whole seconds from 1 to
 * 2147483647; 0 (Redis took it as "none"), signs, fractions and larger
 * numbers are CONVO_EINVAL with the same message. A driver without expiry
 * (memory) refuses every ttl. */
START_TEST(test_url_ttl_same_everywhere)
{
    static const char *const bad[] = {"ttl=0", "ttl=-1", "ttl=+5", "ttl=1.5", "ttl=",
                                      "ttl=2147483648", "ttl=1s"};
    int has_ttl = strcmp(convo_store_driver(conf_store), "memory") != 0;
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char *u = url_with(conf_url, bad[i]);
        convo_store *s = NULL;
        convo_error err;
        ASSERT_FAILS(convo_open(&s, u, &err), err, CONVO_EINVAL);
        if (has_ttl)
            ck_assert_msg(strstr(err.message, "ttl must be a whole number from 1 to 2147483647"),
                          "%s: %s", bad[i], err.message);
        ck_assert_ptr_null(s);
        free(u);
    }
    char *u = url_with(conf_url, "ttl=2147483647");
    convo_store *s = NULL;
    convo_error err;
    int rc = convo_open(&s, u, &err);
    if (has_ttl)
        ck_assert_msg(rc == 0, "ttl=2147483647: %d %s", rc, err.message);
    else
        ck_assert_int_eq(rc, CONVO_EINVAL);
    convo_close(s);
    free(u);
}
END_TEST

static void assert_no_password(const char *url)
{
    convo_store *s = NULL;
    convo_error err;
    int rc = convo_open(&s, url, &err);
    if (rc != 0) {
        ck_assert_msg(!strstr(err.message, "secretpw") && !strstr(err.backend_code, "secretpw"),
                      "convo_open's message shows the password: %s", err.message);
        return;
    }
    char t[256];
    TID(t, "pw");
    convo_history *h = NULL;
    rc = convo_load(s, t, NULL, &h, &err);
    if (rc != 0)
        ck_assert_msg(!strstr(err.message, "secretpw"), "message shows the password: %s",
                      err.message);
    convo_history_free(h);
    convo_close(s);
}

START_TEST(test_url_password_never_shown)
{
    char *u = url_with_password(conf_url);
    if (u)
        assert_no_password(u);
    free(u);
    u = url_with(conf_url, "password=secretpw");
    assert_no_password(u);
    free(u);
}
END_TEST

void conf_add_store_tests(Suite *s)
{
    TCase *tc = conf_tcase(s, "errors");
    tcase_add_test(tc, test_strerror);
    tcase_add_test(tc, test_error_cleared_on_success);
    tcase_add_test(tc, test_null_error_struct);
    tcase_add_test(tc, test_url_errors);
    tcase_add_test(tc, test_url_ttl_same_everywhere);
    tcase_add_test(tc, test_url_password_never_shown);
    conf_add_concurrency_tests(s);
    tc = conf_tcase(s, "persistence");
    tcase_add_test(tc, test_reopen_keeps_everything);
    tcase_add_test(tc, test_two_handles);
}
