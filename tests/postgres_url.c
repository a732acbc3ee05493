/* postgres_url.c — the PostgreSQL driver's URL: schema names and convo's own
 * parameters refused before any connection, libpq's own passed through, and
 * the password in no message. Part of tests/postgres_extra (postgres.h). */
#include "postgres.h"
#include <check.h>
#include <convo.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Nothing listens on port 1: reaching the network would be CONVO_EIO, so
 * CONVO_EINVAL proves the URL was refused before any connection. */
static const char *unreachable = "postgres://convo:secret@127.0.0.1:1/convo";

static void assert_refused_offline(const char *params)
{
    char url[512];
    snprintf(url, sizeof url, "%s?%s", unreachable, params);
    convo_store *s = NULL;
    convo_error err;
    int rc = convo_open(&s, url, &err);
    ck_assert_msg(rc == CONVO_EINVAL, "%s: expected CONVO_EINVAL, got %d (%s)", params, rc,
                  err.message);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(err.message, "secret") == NULL, "password in: %s", err.message);
}

START_TEST(test_schema_injection_refused)
{
    static const char *const bad[] = {
        "schema=x;drop table",     "schema=x;drop%20table",  "schema=%22a%22",
        "schema=\"a\"",            "schema=Robert');--",     "schema=Robert%27)%3B--",
        "schema=",                 "schema=Convo",           "schema=1abc",
        "schema=a-b",              "schema=a.b",             "schema=pg_catalog",
        "schema=public%00x",       "schema=%C3%A9t%C3%A9",
        "schema=a234567890123456789012345678901234567890123456789012345678901234",
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_refused_offline(bad[i]);
}
END_TEST

START_TEST(test_unknown_parameter_refused)
{
    static const char *const bad[] = {"foo=bar", "prefix=x", "database=convo", "pool=0",
                                      "pool=101", "pool=abc", "pool=-1", "pool=4x",
                                      "schema=ok&schemas=x", "sslmode=disable&Host=x",
                                      "ttl=0", "ttl=-1", "ttl=", "ttl=1.5", "ttl=1s",
                                      "ttl=abc", "ttl=+5", "ttl=2147483648"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        assert_refused_offline(bad[i]);
    /* not a URL libpq understands */
    convo_store *s = NULL;
    convo_error err;
    ck_assert_int_eq(convo_open(&s, "postgres:convo", &err), CONVO_EINVAL);
    ck_assert_int_eq(convo_open(&s, "postgresql:host=localhost dbname=x", &err), CONVO_EINVAL);
}
END_TEST

/* libpq's own options pass through; the longest valid schema name works. */
START_TEST(test_libpq_parameters_pass_through)
{
    char more[256];
    /* connect_timeout, unless the test URL sets it already (check-valgrind.sh does) */
    snprintf(more, sizeof more,
             "sslmode=disable&application_name=convo_pgx_%08x&%s&pool=2&keepalives=1", run_id,
             strstr(base_url, "connect_timeout=") ? "target_session_attrs=any"
                                                  : "connect_timeout=5");
    convo_store *s = open_ok(schema_url("params", more));
    convo_error err;
    ck_assert_int_eq(append1(s, "t", &err), 0);
    PGconn *pg = admin();
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'convo_pgx_%08x'",
             run_id);
    ck_assert_int_ge(query_long(pg, sql), 1);
    PQfinish(pg);
    convo_close(s);
    drop_schema("params");

    /* TLS options reach libpq: this server has no TLS, so requiring it fails */
    s = NULL;
    ck_assert_int_eq(convo_open(&s, schema_url("params", "sslmode=require"), &err), CONVO_EIO);
    ck_assert_msg(strstr(err.message, "SSL") != NULL, "message: %s", err.message);
    ck_assert_int_eq(convo_open(&s, schema_url("params", "ssl=true"), &err), CONVO_EIO);
    ck_assert_msg(strstr(err.message, "SSL") != NULL, "message: %s", err.message);

    char name[64] = "z23456789012345678901234567890123456789012345678901234567890123";
    ck_assert_int_eq(strlen(name), 63);
    char params[128];
    snprintf(params, sizeof params, "schema=%s", name);
    s = open_ok(url_with(params));
    ck_assert_int_eq(append1(s, "t", &err), 0);
    convo_close(s);
    pg = admin();
    snprintf(sql, sizeof sql, "DROP SCHEMA \"%s\" CASCADE", name);
    PQclear(PQexec(pg, "SET client_min_messages = warning"));
    free(query1(pg, sql));
    PQfinish(pg);
}
END_TEST

/* The URL with its password replaced by pw (the URL must have one). */
static void with_password(char *out, size_t size, const char *pw)
{
    const char *at = strrchr(base_url, '@');
    const char *colon = strchr(strstr(base_url, "://") + 3, ':');
    ck_assert_msg(at && colon && colon < at, "CONVO_TEST_POSTGRES_URL has no password");
    snprintf(out, size, "%.*s%s%s", (int)(colon + 1 - base_url), base_url, pw, at);
}

START_TEST(test_password_not_in_messages)
{
    const char *pw = "Wr0ngPassw0rdXyz";
    char url[1024];
    with_password(url, sizeof url, pw);
    convo_store *s = NULL;
    convo_error err;
    int rc = convo_open(&s, url, &err);
    ck_assert_int_eq(rc, CONVO_EIO);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(err.message, pw) == NULL, "password in: %s", err.message);
    ck_assert_msg(strlen(err.message) > 0, "no message");
    /* also as a password= parameter, and in a message libpq builds from the URL */
    const char *at = strrchr(base_url, '@');
    const char *slash = strstr(base_url, "://") + 3;
    const char *colon = strchr(slash, ':');
    char url2[1024];
    snprintf(url2, sizeof url2, "%.*s%s%spassword=%s&schema=x", (int)(colon - base_url),
             base_url, at, strchr(at, '?') ? "&" : "?", pw);
    rc = convo_open(&s, url2, &err);
    ck_assert_int_eq(rc, CONVO_EIO);
    ck_assert_msg(strstr(err.message, pw) == NULL, "password in: %s", err.message);
    /* percent-encoded in the URL: neither form shows */
    with_password(url, sizeof url, "Wr0ng%50ass%2F%3Aword");
    rc = convo_open(&s, url, &err);
    ck_assert_int_eq(rc, CONVO_EIO);
    ck_assert_msg(strstr(err.message, "Wr0ngPass/:word") == NULL, "password in: %s", err.message);
    ck_assert_msg(strstr(err.message, "Wr0ng%50ass") == NULL, "password in: %s", err.message);
    /* an unknown host: libpq names the host, never the password */
    snprintf(url2, sizeof url2, "postgres://convo:%s@no-such-host.invalid:5432/convo", pw);
    rc = convo_open(&s, url2, &err);
    ck_assert_int_eq(rc, CONVO_EIO);
    ck_assert_msg(strstr(err.message, pw) == NULL, "password in: %s", err.message);
}
END_TEST

void postgres_add_url_tests(Suite *s)
{
    TCase *tc = tcase_create("url");
    tcase_add_test(tc, test_schema_injection_refused);
    tcase_add_test(tc, test_unknown_parameter_refused);
    tcase_add_test(tc, test_libpq_parameters_pass_through);
    tcase_add_test(tc, test_password_not_in_messages);
    suite_add_tcase(s, tc);
}
