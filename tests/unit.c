/* unit.c — Check tests for the core's internals (lib/): URL parsing and
 * redaction, input validation, the extra merge, load ranges, time formatting,
 * errors (the connection pool: unit_pool.c; drivers' versions and password
 * scrubbing: unit_driver.c). The conformance suite covers the
 * public API. */
#include "internal.h"
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

/* unit_pool.c: the connection pool (lib/pool.c). */
void unit_add_pool_tests(Suite *s);
/* unit_driver.c: driver versions, NULL getters, allocation failure, password scrubbing. */
void unit_add_driver_tests(Suite *s);
void unit_add_body_tests(Suite *s);
/* unit_segment.c: the sealed-segment codec (lib/segment.c). */
void unit_add_segment_tests(Suite *s);

/* ---------------------------------------------------------------------- URLs */

static convo_url *parse_ok(const char *text)
{
    convo_url *u = NULL;
    convo_error err;
    convo__error_clear(&err);
    int rc = convo__url_parse(&u, text, &err);
    ck_assert_msg(rc == 0 && u, "parsing '%s' failed: %d %s", text, rc, err.message);
    return u;
}

static void parse_fails(const char *text)
{
    convo_url *u = (convo_url *)1;
    convo_error err;
    convo__error_clear(&err);
    int rc = convo__url_parse(&u, text, &err);
    ck_assert_msg(rc == CONVO_EINVAL, "parsing '%s' gave %d, expected EINVAL", text ? text : "NULL",
                  rc);
    ck_assert_ptr_null(u);
    ck_assert_int_eq(err.code, CONVO_EINVAL);
    ck_assert(err.message[0] != '\0');
}

static const char *param(const convo_url *u, const char *key)
{
    for (size_t i = 0; i < u->nparams; i++)
        if (strcmp(u->params[i].key, key) == 0)
            return u->params[i].value;
    return NULL;
}

START_TEST(test_url_plain_schemes)
{
    convo_url *u = parse_ok("memory:");
    ck_assert_str_eq(u->scheme, "memory");
    ck_assert_str_eq(u->rest, "");
    ck_assert_ptr_null(u->host);
    ck_assert_int_eq(u->nparams, 0);
    ck_assert_str_eq(u->redacted, "memory:");
    convo__url_free(u);

    u = parse_ok("SQLite:/tmp/a b.db?mode=rw");
    ck_assert_str_eq(u->scheme, "sqlite");
    ck_assert_str_eq(u->rest, "/tmp/a b.db");
    ck_assert_ptr_null(u->host);
    ck_assert_pstr_eq(param(u, "mode"), "rw");
    convo__url_free(u);

    u = parse_ok("sqlite::memory:");
    ck_assert_str_eq(u->scheme, "sqlite");
    ck_assert_str_eq(u->rest, ":memory:");
    convo__url_free(u);

    u = parse_ok("redis+unix:/run/redis.sock");
    ck_assert_str_eq(u->scheme, "redis+unix");
    ck_assert_str_eq(u->rest, "/run/redis.sock");
    convo__url_free(u);
}
END_TEST

START_TEST(test_url_authority)
{
    convo_url *u = parse_ok("redis://user:p%40ss@db.example:6380/2?prefix=a&ttl=5");
    ck_assert_str_eq(u->scheme, "redis");
    ck_assert_pstr_eq(u->user, "user");
    ck_assert_pstr_eq(u->password, "p@ss");
    ck_assert_pstr_eq(u->host, "db.example");
    ck_assert_int_eq(u->port, 6380);
    ck_assert_pstr_eq(u->path, "2");
    ck_assert_int_eq(u->nparams, 2);
    ck_assert_pstr_eq(param(u, "prefix"), "a");
    ck_assert_pstr_eq(param(u, "ttl"), "5");
    ck_assert_str_eq(u->redacted, "redis://user:***@db.example:6380/2?prefix=a&ttl=5");
    convo__url_free(u);

    u = parse_ok("postgres://localhost/convo");
    ck_assert_ptr_null(u->user);
    ck_assert_ptr_null(u->password);
    ck_assert_pstr_eq(u->host, "localhost");
    ck_assert_int_eq(u->port, 0);
    ck_assert_pstr_eq(u->path, "convo");
    convo__url_free(u);

    u = parse_ok("postgresql://bob@h:5432");
    ck_assert_pstr_eq(u->user, "bob");
    ck_assert_ptr_null(u->password);
    ck_assert_int_eq(u->port, 5432);
    ck_assert_ptr_null(u->path);
    convo__url_free(u);

    /* the last '@' ends the user info: a password may hold '@' unencoded */
    u = parse_ok("redis://u:se@cret@host:1");
    ck_assert_pstr_eq(u->password, "se@cret");
    ck_assert_pstr_eq(u->host, "host");
    ck_assert(!strstr(u->redacted, "cret"));
    convo__url_free(u);

    u = parse_ok("redis://:only@host");
    ck_assert_pstr_eq(u->user, "");
    ck_assert_pstr_eq(u->password, "only");
    ck_assert(!strstr(u->redacted, "only"));
    convo__url_free(u);

    u = parse_ok("postgres://u%20x:pw@h/d%2Fb");
    ck_assert_pstr_eq(u->user, "u x");
    ck_assert_pstr_eq(u->path, "d/b");
    convo__url_free(u);

    u = parse_ok("mongodb://a:1,b:2/db?replicaSet=rs");
    ck_assert_pstr_eq(u->host, "a:1,b:2");
    ck_assert_int_eq(u->port, 0);
    ck_assert_pstr_eq(u->path, "db");
    convo__url_free(u);
}
END_TEST

START_TEST(test_url_ipv6)
{
    convo_url *u = parse_ok("redis://[::1]:6379");
    ck_assert_pstr_eq(u->host, "::1");
    ck_assert_int_eq(u->port, 6379);
    convo__url_free(u);
    u = parse_ok("postgres://u:pw@[fe80::1%25eth0]/db");
    ck_assert_pstr_eq(u->host, "fe80::1%eth0");
    ck_assert_int_eq(u->port, 0);
    ck_assert_pstr_eq(u->path, "db");
    convo__url_free(u);
    parse_fails("redis://[::1");
    parse_fails("redis://[::1]x");
    parse_fails("redis://[::1]:");
}
END_TEST

START_TEST(test_url_ports)
{
    convo_url *u = parse_ok("redis://h:1");
    ck_assert_int_eq(u->port, 1);
    convo__url_free(u);
    u = parse_ok("redis://h:65535");
    ck_assert_int_eq(u->port, 65535);
    convo__url_free(u);
    parse_fails("redis://h:0");
    parse_fails("redis://h:65536");
    parse_fails("redis://h:123456");
    parse_fails("redis://h:");
    parse_fails("redis://h:abc");
    parse_fails("redis://h:12a");
    parse_fails("redis://h:-1");
    parse_fails("redis://h: 80");
}
END_TEST

START_TEST(test_url_query)
{
    convo_url *u = parse_ok("sqlite:x.db?a=1&b=&c&d=x%3Dy%26z&e=a+b&&f=%C3%A9");
    ck_assert_int_eq(u->nparams, 6);
    ck_assert_pstr_eq(param(u, "a"), "1");
    ck_assert_pstr_eq(param(u, "b"), "");
    ck_assert_pstr_eq(param(u, "c"), "");
    ck_assert_pstr_eq(param(u, "d"), "x=y&z");
    ck_assert_pstr_eq(param(u, "e"), "a+b"); /* "+" is literal, as libpq and MongoDB read it */
    ck_assert_pstr_eq(param(u, "f"), "\xc3\xa9");
    ck_assert_str_eq(u->params[0].key, "a"); /* order kept */
    ck_assert_str_eq(u->params[5].key, "f");
    convo__url_free(u);

    u = parse_ok("sqlite:x.db?");
    ck_assert_int_eq(u->nparams, 0);
    convo__url_free(u);

    parse_fails("sqlite:x.db?a=1&a=2");
    parse_fails("sqlite:x.db?a=1&b=2&a=1");
    parse_fails("sqlite:x.db?=v");
    parse_fails("sqlite:x.db?a=%zz");
    parse_fails("sqlite:x.db?a=%4");
    parse_fails("sqlite:x.db?a=%");
    parse_fails("sqlite:x.db?a=%00");
    parse_fails("redis://u:%zz@h");
}
END_TEST

START_TEST(test_url_malformed)
{
    parse_fails(NULL);
    parse_fails("");
    parse_fails("nocolon");
    parse_fails(":nothing");
    parse_fails("re dis://h");
    parse_fails("re/dis:x");
    convo_url *u = parse_ok("a.b-c+d:x");
    ck_assert_str_eq(u->scheme, "a.b-c+d");
    convo__url_free(u);
    convo__url_free(NULL);
}
END_TEST

static void assert_redacted(const char *text, const char *secret)
{
    convo_url *u = parse_ok(text);
    ck_assert_msg(!strstr(u->redacted, secret), "redacted '%s' shows '%s'", u->redacted, secret);
    ck_assert_msg(strstr(u->redacted, "***") != NULL, "redacted '%s' has no mask", u->redacted);
    convo__url_free(u);
}

START_TEST(test_url_redacted)
{
    assert_redacted("postgres://u:topsecret@h/db", "topsecret");
    assert_redacted("postgres://u:topsecret@h/db?password=topsecret2&x=1", "topsecret");
    assert_redacted("postgres://h/db?password=topsecret", "topsecret");
    assert_redacted("postgres://h/db?sslmode=require&password=topsecret", "topsecret");
    assert_redacted("mongodb://u:topsecret@a:1,b:2/db?authSource=admin", "topsecret");
    assert_redacted("redis://:topsecret@[::1]:6379/0", "topsecret");
    assert_redacted("redis://u:top%40secret@h", "secret");
    assert_redacted("postgres://h/db?pass%77ord=topsecret", "topsecret");
    assert_redacted("postgres://h/db?%70assword=topsecret&a=1", "topsecret");
    convo_url *u = parse_ok("postgres://h/db?password=x&other=keep");
    ck_assert_str_eq(u->redacted, "postgres://h/db?password=***&other=keep");
    convo__url_free(u);
    u = parse_ok("postgres://u@h/db?mypassword=visible");
    ck_assert_str_eq(u->redacted, "postgres://u@h/db?mypassword=visible");
    convo__url_free(u);
}
END_TEST

/* Masks that outgrow what they hide must not overrun the redacted copy. */
START_TEST(test_url_redacted_many_masks)
{
    char text[400] = "redis://u:@h/?";
    for (int i = 0; i < 30; i++)
        strcat(text, "password=&");
    parse_fails(text);
    char one[400] = "redis://u:@h/?";
    for (int i = 0; i < 30; i++)
        strcat(one, i == 0 ? "password=" : "&x");
    convo_url *u;
    convo_error err;
    convo__error_clear(&err);
    ck_assert_int_eq(convo__url_parse(&u, one, &err), CONVO_EINVAL); /* x given twice */
}
END_TEST

/* Error messages from parsing never carry the password either. */
START_TEST(test_url_errors_hide_password)
{
    const char *bad[] = {"redis://u:topsecret@h:99999", "redis://u:topsecret@h?a=1&a=2",
                         "redis://u:topsecret@[::1", "postgres://h?password=topsecret&password=x"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        convo_url *u;
        convo_error err;
        convo__error_clear(&err);
        ck_assert_int_eq(convo__url_parse(&u, bad[i], &err), CONVO_EINVAL);
        ck_assert_msg(!strstr(err.message, "topsecret"), "message shows the password: %s",
                      err.message);
    }
}
END_TEST

START_TEST(test_url_take_and_rebuild)
{
    convo_url *u = parse_ok("postgres://u:p@h:5432/db?schema=s&sslmode=require&pool=4");
    char *v = convo__url_take(u, "schema");
    ck_assert_pstr_eq(v, "s");
    free(v);
    ck_assert_ptr_null(convo__url_take(u, "schema"));
    ck_assert_ptr_null(convo__url_take(u, "missing"));
    v = convo__url_take(u, "pool");
    ck_assert_pstr_eq(v, "4");
    free(v);
    ck_assert_int_eq(u->nparams, 1);
    char *r = convo__url_rebuild(u);
    ck_assert_str_eq(r, "postgres://u:p@h:5432/db?sslmode=require");
    free(r);
    convo_error err;
    convo__error_clear(&err);
    ck_assert_int_eq(convo__url_reject_rest(u, &err), CONVO_EINVAL);
    ck_assert(strstr(err.message, "sslmode") != NULL);
    v = convo__url_take(u, "sslmode");
    free(v);
    ck_assert_int_eq(convo__url_reject_rest(u, NULL), 0);
    r = convo__url_rebuild(u);
    ck_assert_str_eq(r, "postgres://u:p@h:5432/db");
    free(r);
    convo__url_free(u);

    u = parse_ok("mongodb://h/?appname=my app&x=a%26b%3Dc&y=%C3%A9");
    r = convo__url_rebuild(u);
    ck_assert_str_eq(r, "mongodb://h/?appname=my%20app&x=a%26b%3Dc&y=%C3%A9");
    convo_url *again = parse_ok(r);
    ck_assert_pstr_eq(param(again, "appname"), "my app");
    ck_assert_pstr_eq(param(again, "x"), "a&b=c");
    convo__url_free(again);
    free(r);
    convo__url_free(u);
}
END_TEST

/* ---------------------------------------------------------------- validation */

/* Issue 18.7: URL integers and ttl are read once, here, for every driver. */
START_TEST(test_url_take_int_and_ttl)
{
    static const char *const bad[] = {"0", "-1", "+1", " 1", "1 ", "1x", "1.5", "0x10", "",
                                      "2147483648", "99999999999999999999", "1e3", "--1"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char text[64];
        snprintf(text, sizeof text, "redis://h?ttl=%s", bad[i]);
        convo_url *u = parse_ok(text);
        int64_t ttl = 7;
        convo_error err;
        convo__error_clear(&err);
        ck_assert_msg(convo__url_take_ttl(u, &ttl, &err) == CONVO_EINVAL, "ttl=%s accepted", bad[i]);
        ck_assert_str_eq(err.message, "bad URL: ttl must be a whole number from 1 to 2147483647");
        ck_assert_int_eq(ttl, 0);
        ck_assert_uint_eq(u->nparams, 0); /* taken even when refused */
        convo__url_free(u);
    }
    convo_url *u = parse_ok("x:?ttl=2147483647&n=-5&m=007");
    int64_t ttl = 0;
    long long n = 1, m = 1, absent = 42;
    convo_error err;
    convo__error_clear(&err); /* the first error is kept: a set code would hide the next */
    ck_assert_int_eq(convo__url_take_ttl(u, &ttl, &err), 0);
    ck_assert_int_eq(ttl, 2147483647);
    ck_assert_int_eq(convo__url_take_int(u, "n", -10, 10, &n, &err), 0);
    ck_assert_int_eq(n, -5);
    ck_assert_int_eq(convo__url_take_int(u, "m", 0, 10, &m, &err), 0);
    ck_assert_int_eq(m, 7);
    ck_assert_int_eq(convo__url_take_int(u, "nope", 0, 10, &absent, &err), 0);
    ck_assert_int_eq(absent, 42);
    ck_assert_int_eq(convo__url_take_ttl(u, &ttl, &err), 0); /* absent: no expiry */
    ck_assert_int_eq(ttl, 0);
    convo__url_free(u);
    u = parse_ok("x:?n=-5");
    ck_assert_int_eq(convo__url_take_int(u, "n", 0, 10, &n, &err), CONVO_EINVAL);
    convo__url_free(u);
}
END_TEST

START_TEST(test_utf8)
{
    struct { const char *s; size_t len; int ok; } cases[] = {
        {"", 0, 1},
        {"plain ascii", 11, 1},
        {"\xc3\xa9", 2, 1},
        {"\xe6\x97\xa5", 3, 1},
        {"\xf0\x9f\x98\x80", 4, 1},
        {"\xf4\x8f\xbf\xbf", 4, 1},         /* U+10FFFF */
        {"\xef\xbb\xbf", 3, 1},             /* BOM */
        {"\xee\x80\x80", 3, 1},             /* U+E000, just past the surrogates */
        {"\xed\x9f\xbf", 3, 1},             /* U+D7FF, just before */
        {"a\0b", 3, 1},                     /* NUL is valid UTF-8 */
        {"\x80", 1, 0},                     /* lone continuation */
        {"\xbf", 1, 0},
        {"\xc3", 1, 0},                     /* truncated */
        {"\xe6\x97", 2, 0},
        {"\xf0\x9f\x98", 3, 0},
        {"\xc3\xa9\xc3", 3, 0},
        {"\xc3\x28", 2, 0},                 /* bad continuation */
        {"\xe6\x28\xa5", 3, 0},
        {"\xc0\xaf", 2, 0},                 /* overlong '/' */
        {"\xc1\xbf", 2, 0},
        {"\xe0\x80\xaf", 3, 0},
        {"\xe0\x9f\xbf", 3, 0},             /* overlong U+07FF */
        {"\xf0\x80\x80\xaf", 4, 0},
        {"\xf0\x8f\xbf\xbf", 4, 0},         /* overlong U+FFFF */
        {"\xed\xa0\x80", 3, 0},             /* U+D800 */
        {"\xed\xbf\xbf", 3, 0},             /* U+DFFF */
        {"\xed\xa0\xbd\xed\xb8\x80", 6, 0}, /* CESU-8 pair */
        {"\xf4\x90\x80\x80", 4, 0},         /* U+110000 */
        {"\xf5\x80\x80\x80", 4, 0},
        {"\xf8\x88\x80\x80\x80", 5, 0},     /* 5-byte form */
        {"\xfe", 1, 0},
        {"\xff", 1, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        ck_assert_msg(convo__check_utf8(cases[i].s, cases[i].len) == cases[i].ok,
                      "case %zu: expected %d", i, cases[i].ok);
    /* the length bounds the check: a valid prefix of an invalid buffer passes */
    ck_assert_int_eq(convo__check_utf8("ok\xff", 2), 1);
}
END_TEST

static void thread_id_is(const char *id, int code)
{
    convo_error err;
    convo__error_clear(&err);
    int rc = convo__check_thread_id(id, &err);
    ck_assert_msg(rc == code, "thread id check gave %d, expected %d", rc, code);
    if (code)
        ck_assert(err.code == code && err.message[0]);
}

START_TEST(test_thread_ids)
{
    char id[600];
    memset(id, 'a', sizeof id);
    id[512] = '\0';
    thread_id_is(id, 0);
    id[512] = 'a';
    id[513] = '\0';
    thread_id_is(id, CONVO_EINVAL);
    /* 512 bytes of multi-byte characters; one more character goes over */
    for (int i = 0; i < 256; i++)
        memcpy(id + 2 * i, "\xc3\xa9", 2);
    id[512] = '\0';
    thread_id_is(id, 0);
    memcpy(id + 510, "\xe6\x97\xa5", 4);
    thread_id_is(id, CONVO_EINVAL);

    const char *ok[] = {"a", "a b", "a:b", "{x}", "/", "\"", "\xc2\xa0", "\xc2\xa9",
                        "\xe2\x80\xa8", "\xf0\x9f\x98\x80", "~", " "};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++)
        thread_id_is(ok[i], 0);
    const char *bad[] = {NULL, "", "\x01", "a\nb", "\t", "a\x7f", "\x1f", "\xc2\x80",
                         "a\xc2\x85" "b", "\xc2\x9f", "\xff", "\xc0\xaf", "\xed\xa0\x80",
                         "a\xc2"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++)
        thread_id_is(bad[i], CONVO_EINVAL);
    ck_assert_int_eq(convo__check_thread_id("", NULL), CONVO_EINVAL);
}
END_TEST

static const convo_limits limits = {100, 10, 100, 1000, NULL, {NULL, NULL}};

static int check_message(const char *m, size_t len, char *const *roles, char **role)
{
    convo_error err;
    convo__error_clear(&err);
    int rc = convo__check_message(m, len == (size_t)-1 ? strlen(m) : len, &limits, roles, role,
                                  &err);
    if (rc != 0)
        ck_assert(err.code == rc && err.message[0] && !strchr(err.message, '\n'));
    return rc;
}

START_TEST(test_messages)
{
    char *role;
    ck_assert_int_eq(check_message("{\"role\":\"user\",\"c\":1}", -1, NULL, &role), 0);
    ck_assert_str_eq(role, "user");
    free(role);
    ck_assert_int_eq(check_message(" {\"x\":[1],\"role\":\"\\u00e9\"} ", -1, NULL, &role), 0);
    ck_assert_str_eq(role, "\xc3\xa9");
    free(role);
    /* one rule with extra: integers fit in signed 64 bits (issue 23.4) */
    ck_assert_int_eq(check_message("{\"role\":\"u\",\"big\":123456789012345678901234567890}", -1,
                                   NULL, &role),
                     CONVO_EINVAL);
    ck_assert_int_eq(check_message("{\"role\":\"u\",\"n\":[9223372036854775808]}", -1, NULL, &role),
                     CONVO_EINVAL);
    ck_assert_int_eq(check_message("{\"role\":\"u\",\"n\":-9223372036854775809}", -1, NULL, &role),
                     CONVO_EINVAL);
    ck_assert_int_eq(check_message("{\"role\":\"u\",\"n\":[9223372036854775807,-9223372036854775808,"
                                   "123456789012345678901234567890.5,1e300]}", -1, NULL, &role),
                     0);
    free(role);
    /* ...but import restores what a store held from before the rule */
    const char *old_big = "{\"role\":\"u\",\"big\":123456789012345678901234567890}";
    ck_assert_int_eq(convo__check_message_ex(old_big, strlen(old_big), &limits, NULL, 1, &role,
                                             NULL),
                     0);
    ck_assert_str_eq(role, "u");
    free(role);
    ck_assert_int_eq(check_message("{\"role\":\"u\",\"s\":\"a\\u0000b\"}", -1, NULL, &role), 0);
    free(role);
    /* exactly the limit passes; one byte more is too large */
    char m[128];
    memset(m, ' ', sizeof m);
    memcpy(m, "{\"role\":\"user\"}", 15);
    ck_assert_int_eq(check_message(m, 100, NULL, &role), 0);
    free(role);
    ck_assert_int_eq(check_message(m, 101, NULL, &role), CONVO_ETOOLARGE);
    ck_assert_ptr_null(role);
    /* a 64-byte role in 32 two-byte characters passes, 33 do not */
    char r[200] = "{\"role\":\"";
    for (int i = 0; i < 32; i++)
        strcat(r, "\xc3\xa9");
    strcat(r, "\"}");
    ck_assert_int_eq(check_message(r, -1, NULL, &role), 0);
    free(role);
    r[strlen(r) - 2] = '\0';
    strcat(r, "\xc3\xa9\"}");
    ck_assert_int_eq(check_message(r, -1, NULL, &role), CONVO_EINVAL);

    const char *bad[] = {"", "{", "[]", "\"s\"", "{\"content\":1}", "{\"role\":\"\"}",
                         "{\"role\":1}", "{\"role\":null}", "{\"role\":\"a\\u0000b\"}",
                         "{\"role\":\"u\",\"role\":\"v\"}", "{\"role\":\"u\"} {}",
                         "{\"role\":\"\xff\"}", "{\"role\":\"u\",\"x\":1e400}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        ck_assert_msg(check_message(bad[i], -1, NULL, &role) == CONVO_EINVAL, "'%s' passed",
                      bad[i]);
        ck_assert_ptr_null(role);
    }
    ck_assert_int_eq(check_message("{\"role\":\"u\"}\0", 13, NULL, &role), CONVO_EINVAL);
    convo_error err;
    convo__error_clear(&err);
    ck_assert_int_eq(convo__check_message(NULL, 0, &limits, NULL, &role, &err), CONVO_EINVAL);
}
END_TEST

/* jansson's reading with the flags of convo__check_message: 1 when it accepts
 * the bytes as an object with a plain "role" of 1..64 bytes, copied to role. */
static int jansson_role(const char *m, size_t len, char *role, size_t cap)
{
    json_t *j = json_loadb(m, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, NULL);
    json_t *r = json_object_get(j, "role");
    int ok = json_is_object(j) && json_is_string(r) && json_string_length(r) > 0 &&
             json_string_length(r) <= CONVO_MAX_ROLE_BYTES && json_string_length(r) < cap &&
             !memchr(json_string_value(r), '\0', json_string_length(r));
    if (ok)
        memcpy(role, json_string_value(r), json_string_length(r) + 1);
    json_decref(j);
    return ok;
}

/* The scanner is sure only where jansson agrees, with the same role. */
static int scan_agrees(const char *m, size_t len)
{
    const char *role;
    size_t n;
    char want[CONVO_MAX_ROLE_BYTES + 1];
    if (!convo__scan_message(m, len, &role, &n))
        return 1;
    return jansson_role(m, len, want, sizeof want) && n == strlen(want) &&
           memcmp(role, want, n) == 0;
}

static int scan_sure(const char *m)
{
    const char *role;
    size_t n;
    return convo__scan_message(m, strlen(m), &role, &n);
}

/* Messages as applications write them: the fast path must take them. */
static const char *const common_messages[] = {
    "{\"role\":\"user\",\"content\":\"hello\"}",
    " \t\r\n{ \"role\" : \"assistant\" , \"content\" : \"line\\nbreak \\\"quoted\\\" \\u00e9\\ud83d\\ude00 \\/\\\\\\b\\f\\r\\t\" } \n",
    "{\"content\":\"caf\xc3\xa9 \xf0\x9f\x98\x80\",\"role\":\"r\xc3\xb4le\"}",
    "{\"role\":\"tool\",\"tool_call_id\":\"c1\",\"content\":[{\"type\":\"text\",\"text\":\"x\"}],"
    "\"n\":[0,-0,1,-1,12.5,-0.25,123456789012345678,-123456789012345678,0.000001],\"t\":true,\"f\":false,"
    "\"z\":null,\"e\":{},\"a\":[],\"nested\":{\"role\":1,\"role \":2,\"x\":{\"y\":[[[{\"z\":[]}]]]}}}",
    "{\"role\":\"assistant\",\"content\":\"\",\"tool_calls\":[{\"id\":\"call_1\",\"type\":\"function\","
    "\"function\":{\"name\":\"f\",\"arguments\":\"{\\\"a\\\":1}\"}}],\"additional_kwargs\":{},"
    "\"response_metadata\":{\"model\":\"m\",\"usage\":{\"in\":10,\"out\":20}},\"id\":\"run-1\"}",
    "{\"role\":\"u\",\"s\":\"a\\u0000b\",\"\":1,\"k\":\"\\uDBFF\\uDFFF\"}",
};

/* Each of these goes to jansson: errors, and what the scanner leaves to it. */
static const char *const unsure_messages[] = {
    "", " ", "{", "}", "[]", "\"s\"", "1", "null", "{}", "{\"content\":1}",
    "{\"role\":\"\"}", "{\"role\":1}", "{\"role\":null}", "{\"role\":[\"u\"]}",
    "{\"role\":\"a\\u0000b\"}", "{\"role\":\"\\u0075\"}", "{\"r\\u006fle\":\"u\"}",
    "{\"role\":\"u\",\"role\":\"v\"}", "{\"role\":\"u\",\"a\":{\"k\":1,\"k\":2}}",
    "{\"role\":\"u\",\"a\":1,\"a\":1}", "{\"role\":\"u\"} {}", "{\"role\":\"u\"}x",
    "{\"role\":\"u\",}", "{\"role\":\"u\",\"a\":[1,]}", "{\"role\":\"u\",\"a\":[,1]}",
    "{\"role\":\"u\" \"a\":1}", "{\"role\" \"u\"}", "{role:\"u\"}", "{'role':'u'}",
    "{\"role\":\"u\",\"x\":1e3}", "{\"role\":\"u\",\"x\":1E-3}", "{\"role\":\"u\",\"x\":01}",
    "{\"role\":\"u\",\"x\":-}", "{\"role\":\"u\",\"x\":1.}", "{\"role\":\"u\",\"x\":.5}",
    "{\"role\":\"u\",\"x\":+1}", "{\"role\":\"u\",\"x\":0x1}", "{\"role\":\"u\",\"x\":NaN}",
    "{\"role\":\"u\",\"x\":tru}", "{\"role\":\"u\",\"x\":truex}", "{\"role\":\"u\",\"x\":True}",
    "{\"role\":\"u\",\"x\":nul}", "{\"role\":\"u\",\"x\":\"\\ud800\"}",
    "{\"role\":\"u\",\"x\":\"\\udc00\"}", "{\"role\":\"u\",\"x\":\"\\ud800\\u0041\"}",
    "{\"role\":\"u\",\"x\":\"\\ud800x\"}", "{\"role\":\"u\",\"x\":\"\\x\"}",
    "{\"role\":\"u\",\"x\":\"\\u12g4\"}", "{\"role\":\"u\",\"x\":\"\\u12\"}",
    "{\"role\":\"u\",\"x\":\"\\\"}", "{\"role\":\"u\",\"x\":\"a\tb\"}",
    "{\"role\":\"u\",\"x\":\"\xff\"}", "{\"role\":\"\xc0\x80\"}", "\xef\xbb\xbf{\"role\":\"u\"}",
    "{\"role\":\"u\"\v}", "{\"role\":\"u\",\"x\":\"unterminated}",
    "{\"role\":\"12345678901234567890123456789012345678901234567890123456789012345\"}",
};

START_TEST(test_message_fast_path)
{
    for (size_t i = 0; i < sizeof common_messages / sizeof *common_messages; i++) {
        const char *m = common_messages[i];
        ck_assert_msg(scan_sure(m), "the scanner is not sure of common message %zu", i);
        ck_assert_msg(scan_agrees(m, strlen(m)), "common message %zu: jansson disagrees", i);
    }
    for (size_t i = 0; i < sizeof unsure_messages / sizeof *unsure_messages; i++)
        ck_assert_msg(!scan_sure(unsure_messages[i]), "the scanner is sure of '%s'",
                      unsure_messages[i]);
    const char *role;
    size_t n;
    ck_assert(!convo__scan_message("{\"role\":\"u\"}\0", 13, &role, &n)); /* NUL after it */
    ck_assert(convo__scan_message("{\"role\":\"u\"}", 12, &role, &n) && n == 1 && *role == 'u');

    /* limits of the scanner: 16 levels, 32 keys; one more goes to jansson */
    char deep[256] = "{\"role\":\"u\",\"a\":", keys[2048] = "{\"role\":\"u\"";
    for (int i = 0; i < 15; i++)
        strcat(deep, "[");
    for (int i = 0; i < 15; i++)
        strcat(deep, "]");
    strcat(deep, "}");
    ck_assert(scan_sure(deep));
    memmove(deep + 17, deep + 16, strlen(deep + 16) + 1);
    deep[16] = '[';
    char *close = strrchr(deep, '}');
    memcpy(close, "]}", 3);
    ck_assert(!scan_sure(deep));
    ck_assert_int_eq(check_message(deep, -1, NULL, (char **)&role), 0);
    free((char *)role);
    for (int i = 1; i < 32; i++)
        sprintf(keys + strlen(keys), ",\"k%d\":%d", i, i);
    ck_assert(scan_sure(strcat(keys, "}")));
    strcpy(keys + strlen(keys) - 1, ",\"k32\":32}");
    ck_assert(!scan_sure(keys));
    ck_assert_int_eq(convo__check_message(keys, strlen(keys), &(convo_limits){4096, 10, 100, 1000, NULL, {NULL, NULL}},
                                          NULL, (char **)&role, NULL),
                     0);
    ck_assert_str_eq(role, "u");
    free((char *)role);
}
END_TEST

/* Random edits of JSON messages: wherever the scanner is sure, jansson agrees,
 * and convo__check_message accepts exactly what jansson accepts. */
/* The scanner and the UTF-8 check read eight bytes at a time: a byte that
 * matters (quote, backslash, control, non-ASCII) is found at every offset of
 * a word, and the answer is jansson's (the scanner) or the rule's (UTF-8). */
START_TEST(test_message_fast_path_word_offsets)
{
    static const struct {
        const char *s; /* put into a string value at every offset */
        int valid;     /* the message is then valid JSON */
    } specials[] = {
        {"\"", 0}, {"\\", 0}, {"\\n", 1}, {"\\u00e9", 1}, {"\x01", 0}, {"\x1f", 0},
        {"\t", 0}, {" ", 1}, {"\x7f", 1}, {"\xc3\xa9", 1}, {"\xf0\x9f\x98\x80", 1},
        {"\xff", 0}, {"\xc3", 0}, {"\xed\xa0\x80", 0},
    };
    char m[128], want[CONVO_MAX_ROLE_BYTES + 1];
    for (size_t k = 0; k < sizeof specials / sizeof *specials; k++) {
        for (int at = 0; at < 24; at++) {
            int len = snprintf(m, sizeof m, "{\"role\":\"u\",\"c\":\"%.*s%s%.*s\"}", at,
                               "abcdefghijklmnopqrstuvwxyz", specials[k].s, 24 - at,
                               "ABCDEFGHIJKLMNOPQRSTUVWXYZ");
            const char *role;
            size_t n;
            int sure = convo__scan_message(m, (size_t)len, &role, &n);
            int ok = jansson_role(m, (size_t)len, want, sizeof want);
            ck_assert_msg(ok == specials[k].valid, "special %zu at %d: jansson says %d", k, at, ok);
            ck_assert_msg(sure == ok, "special %zu at %d: the scanner says %d", k, at, sure);
            /* the same bytes as a bare buffer: UTF-8 iff the special is */
            int utf8 = convo__check_utf8(m, (size_t)len);
            ck_assert_int_eq(utf8, convo__check_utf8(specials[k].s, strlen(specials[k].s)));
        }
    }
    /* a multi-byte sequence cut by the end of the buffer, at every offset */
    for (size_t len = 1; len < 20; len++) {
        memset(m, 'a', len);
        m[len - 1] = (char)0xc3;
        ck_assert_int_eq(convo__check_utf8(m, len), 0);
    }
}
END_TEST

START_TEST(test_message_fast_path_against_jansson)
{
    static const char alphabet[] = "{}[]:,\"\\u0aeEd.-+ \ttrfnl1\xc3\xa9\xed\xa0\x80\xf0\x9f\x98";
    uint64_t x = 0x9E3779B97F4A7C15u;
    unsigned sure = 0, tried = 0;
    char buf[1024], want[CONVO_MAX_ROLE_BYTES + 1];
    convo_limits big = {sizeof buf, 10, 100, 1000, NULL, {NULL, NULL}};
    for (int round = 0; round < 60000; round++) {
        const char *seed = common_messages[round % (sizeof common_messages / sizeof *common_messages)];
        size_t len = strlen(seed);
        memcpy(buf, seed, len);
        for (int edits = 1 + (int)(x % 3); edits > 0; edits--) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            size_t at = len ? (size_t)(x >> 20) % len : 0;
            char c = alphabet[(x >> 8) % (sizeof alphabet - 1)];
            switch (x % 4) {
            case 0: /* replace */
                if (len)
                    buf[at] = c;
                break;
            case 1: /* insert */
                if (len + 1 < sizeof buf) {
                    memmove(buf + at + 1, buf + at, len - at);
                    buf[at] = c;
                    len++;
                }
                break;
            case 2: /* delete */
                if (len) {
                    memmove(buf + at, buf + at + 1, len - at - 1);
                    len--;
                }
                break;
            default: /* cut */
                len = at;
            }
        }
        tried++;
        const char *role;
        size_t n;
        int fast = convo__scan_message(buf, len, &role, &n);
        sure += fast;
        ck_assert_msg(scan_agrees(buf, len), "the scanner is sure of '%.*s'; jansson is not",
                      (int)len, buf);
        char *got = NULL;
        int rc = convo__check_message(buf, len, &big, NULL, &got, NULL);
        int ok = jansson_role(buf, len, want, sizeof want);
        ck_assert_msg((rc == 0) == ok, "'%.*s': check_message %d, jansson %d", (int)len, buf, rc,
                      ok);
        if (ok)
            ck_assert_str_eq(got, want);
        free(got);
    }
    /* the edits leave a good share intact or still valid: the fast path ran */
    ck_assert_msg(sure > tried / 20, "the scanner was sure of %u of %u", sure, tried);
}
END_TEST

START_TEST(test_message_roles_allow_list)
{
    char *roles[] = {"user", "assistant", NULL};
    char *role;
    ck_assert_int_eq(check_message("{\"role\":\"user\"}", -1, roles, &role), 0);
    free(role);
    ck_assert_int_eq(check_message("{\"role\":\"assistant\"}", -1, roles, &role), 0);
    free(role);
    ck_assert_int_eq(check_message("{\"role\":\"system\"}", -1, roles, &role), CONVO_EINVAL);
    ck_assert_int_eq(check_message("{\"role\":\"use\"}", -1, roles, &role), CONVO_EINVAL);
    ck_assert_int_eq(check_message("{\"role\":\"users\"}", -1, roles, &role), CONVO_EINVAL);
    char *none[] = {NULL};
    ck_assert_int_eq(check_message("{\"role\":\"user\"}", -1, none, &role), CONVO_EINVAL);
}
END_TEST

START_TEST(test_extra_patch)
{
    char *compact;
    void *obj;
    convo_error err;
    convo__error_clear(&err);
    ck_assert_int_eq(convo__check_extra_patch(" { \"b\" : [ 1 , 2 ] , \"a\" : null } ", &limits,
                                              &compact, &obj, &err),
                     0);
    ck_assert_str_eq(compact, "{\"b\":[1,2],\"a\":null}");
    ck_assert(json_is_object((json_t *)obj));
    free(compact);
    json_decref(obj);
    const char *bad[] = {"", "[]", "1", "null", "{\"a\":1,\"a\":2}", "{x}", "{} {}"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        convo__error_clear(&err);
        ck_assert_msg(convo__check_extra_patch(bad[i], &limits, &compact, &obj, &err) ==
                          CONVO_EINVAL,
                      "'%s' passed", bad[i]);
        ck_assert_ptr_null(compact);
        ck_assert_ptr_null(obj);
    }
    convo__error_clear(&err);
    ck_assert_int_eq(convo__check_extra_patch(NULL, &limits, &compact, &obj, &err), CONVO_EINVAL);
    char big[200];
    memset(big, ' ', sizeof big);
    memcpy(big, "{}", 2);
    big[101] = '\0';
    convo__error_clear(&err);
    ck_assert_int_eq(convo__check_extra_patch(big, &limits, &compact, &obj, &err),
                     CONVO_ETOOLARGE);
    big[100] = '\0';
    ck_assert_int_eq(convo__check_extra_patch(big, &limits, &compact, &obj, NULL), 0);
    free(compact);
    json_decref(obj);
}
END_TEST

/* --------------------------------------------------------------------- extra */

static char *merge(const char *cur, const char *patch, size_t max, int expect_rc)
{
    char *out = NULL;
    size_t len = 0;
    convo_error err;
    convo__error_clear(&err);
    int rc = convo__extra_merge(cur, cur ? strlen(cur) : 0, patch, max, &out, &len, &err);
    ck_assert_msg(rc == expect_rc, "merge of '%s' into '%s': %d (%s)", patch, cur ? cur : "NULL",
                  rc, err.message);
    if (rc == 0)
        ck_assert_int_eq(len, strlen(out));
    return out;
}

START_TEST(test_extra_merge)
{
    char *m = merge(NULL, "{\"a\":1}", 1000, 0);
    ck_assert_str_eq(m, "{\"a\":1}");
    free(m);
    m = merge("", "{}", 1000, 0);
    ck_assert_str_eq(m, "{}");
    free(m);
    /* existing keys stay in place, new keys go last, nested objects are replaced */
    m = merge("{\"z\":1,\"n\":{\"x\":1,\"y\":2},\"a\":\"k\"}",
              "{\"n\":{\"q\":3},\"z\":null,\"new\":[1]}", 1000, 0);
    ck_assert_str_eq(m, "{\"z\":null,\"n\":{\"q\":3},\"a\":\"k\",\"new\":[1]}");
    free(m);
    m = merge("{\"a\":1}", "{\".\":1,\"$\":2,\"\":3,\"a.b.$c\":4}", 1000, 0);
    ck_assert_str_eq(m, "{\"a\":1,\".\":1,\"$\":2,\"\":3,\"a.b.$c\":4}");
    free(m);
    m = merge("{\"a\":1}", "{}", 1000, 0);
    ck_assert_str_eq(m, "{\"a\":1}");
    free(m);
    m = merge("{\"u\":\"\xc3\xa9\"}", "{\"v\":\"\\u00e9\"}", 1000, 0);
    ck_assert_str_eq(m, "{\"u\":\"\xc3\xa9\",\"v\":\"\xc3\xa9\"}");
    free(m);
}
END_TEST

START_TEST(test_extra_merge_limits_and_errors)
{
    /* {"a":1,"b":2} is 13 bytes */
    char *m = merge("{\"a\":1}", "{\"b\":2}", 13, 0);
    free(m);
    ck_assert_ptr_null(merge("{\"a\":1}", "{\"b\":2}", 12, CONVO_ETOOLARGE));
    /* replacing a key can shrink the object back under the limit */
    m = merge("{\"a\":\"long value\"}", "{\"a\":1}", 7, 0);
    ck_assert_str_eq(m, "{\"a\":1}");
    free(m);
    ck_assert_ptr_null(merge("[1]", "{\"a\":1}", 1000, CONVO_ECORRUPT));
    ck_assert_ptr_null(merge("{bad", "{\"a\":1}", 1000, CONVO_ECORRUPT));
    ck_assert_ptr_null(merge("{}", "[1]", 1000, CONVO_EINVAL));
    ck_assert_ptr_null(merge("{}", "{bad", 1000, CONVO_EINVAL));
}
END_TEST

/* ---------------------------------------------------------------- load range */

START_TEST(test_load_range)
{
    struct { int64_t from, limit, tail, length, want_from, want_to; } cases[] = {
        {0, 0, 0, 10, 0, 10},   {3, 0, 0, 10, 3, 10},  {0, 4, 0, 10, 0, 4},
        {3, 4, 0, 10, 3, 7},    {8, 4, 0, 10, 8, 10},  {0, 0, 3, 10, 7, 10},
        {0, 2, 3, 10, 7, 9},    {8, 0, 3, 10, 8, 10},  {2, 0, 3, 10, 7, 10},
        {0, 0, 20, 10, 0, 10},  {10, 0, 0, 10, 10, 10}, {50, 5, 0, 10, 10, 10},
        {0, 0, 0, 0, 0, 0},     {5, 3, 2, 0, 0, 0},    {-4, 0, 0, 10, 0, 10},
        {0, 0, 10, 10, 0, 10},  {0, 1, 1, 10, 9, 10},  {0, INT64_MAX, 0, 10, 0, 10},
        {INT64_MAX, 0, 0, 10, 10, 10}, {0, 0, INT64_MAX, 10, 0, 10},
        {5, INT64_MAX, 0, 10, 5, 10},   {INT64_MAX, INT64_MAX, INT64_MAX, 10, 10, 10},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        convo_load_opts o = CONVO_LOAD_OPTS_INIT;
        o.from_seq = cases[i].from;
        o.limit = cases[i].limit;
        o.tail = cases[i].tail;
        int64_t f = -1, t = -1;
        convo__load_range(&o, cases[i].length, &f, &t);
        ck_assert_msg(f == cases[i].want_from && t == cases[i].want_to,
                      "case %zu: [%lld, %lld), expected [%lld, %lld)", i, (long long)f,
                      (long long)t, (long long)cases[i].want_from, (long long)cases[i].want_to);
    }
}
END_TEST

/* --------------------------------------------------------------------- times */

START_TEST(test_format_time)
{
    struct { int64_t us; const char *want; } cases[] = {
        {0, "1970-01-01T00:00:00.000000Z"},
        {1, "1970-01-01T00:00:00.000001Z"},
        {999999, "1970-01-01T00:00:00.999999Z"},
        {-1, "1969-12-31T23:59:59.999999Z"},
        {-1000000, "1969-12-31T23:59:59.000000Z"},
        {-1000001, "1969-12-31T23:59:58.999999Z"},
        {1700000000123456LL, "2023-11-14T22:13:20.123456Z"},
        {951782400000000LL, "2000-02-29T00:00:00.000000Z"},
        {-62135596800000000LL, "0001-01-01T00:00:00.000000Z"},
        {253402300799999999LL, "9999-12-31T23:59:59.999999Z"},
        {-14182940000000LL, "1969-07-20T20:17:40.000000Z"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char buf[40];
        memset(buf, 'x', sizeof buf);
        convo_format_time(cases[i].us, buf, sizeof buf);
        ck_assert_str_eq(buf, cases[i].want);
    }
    char small[11];
    convo_format_time(0, small, sizeof small);
    ck_assert_str_eq(small, "1970-01-01");
    char exact[28];
    convo_format_time(1, exact, sizeof exact);
    ck_assert_str_eq(exact, "1970-01-01T00:00:00.000001Z");
    int64_t now = convo__now_micros();
    ck_assert(now > 1700000000000000LL);
}
END_TEST

/* -------------------------------------------------------------------- errors */

/* import/export name the thread an error is about, once */
START_TEST(test_error_name_thread)
{
    convo_error err;
    convo__error_clear(&err);
    convo__error_name_thread(&err, "t"); /* no error: nothing to name */
    ck_assert_str_eq(err.message, "");
    convo__error(&err, CONVO_ENOTFOUND, NULL, "thread not found");
    convo__error_name_thread(&err, "t");
    ck_assert_str_eq(err.message, "thread t not found");
    convo__error_name_thread(&err, "t"); /* named already */
    ck_assert_str_eq(err.message, "thread t not found");
    convo__error_clear(&err);
    convo__error(&err, CONVO_ECONFLICT, NULL, "thread tx exists");
    convo__error_name_thread(&err, "t"); /* another thread's name is not this one's */
    ck_assert_str_eq(err.message, "thread t tx exists");
    convo__error_clear(&err);
    convo__error(&err, CONVO_EIO, NULL, "connection lost");
    convo__error_name_thread(&err, "a b");
    ck_assert_str_eq(err.message, "thread a b: connection lost");
    /* a long id is cut at a character boundary; the message stays one bounded line */
    char id[513];
    memset(id, 'x', 95);
    strcpy(id + 95, "\xc3\xa9");
    memset(id + 97, 'y', 415);
    id[512] = '\0';
    convo__error_clear(&err);
    convo__error(&err, CONVO_EIO, NULL, "%0200d", 7);
    convo__error_name_thread(&err, id);
    ck_assert_int_eq(strncmp(err.message + 7 + 95, "...: 000", 8), 0);
    ck_assert_uint_eq(strlen(err.message), sizeof err.message - 1);
}
END_TEST

START_TEST(test_error_first_kept)
{
    convo_error err;
    convo__error_clear(&err);
    ck_assert_int_eq(convo__error(&err, CONVO_EIO, "57P01", "first %d", 1), CONVO_EIO);
    ck_assert_int_eq(convo__error(&err, CONVO_EINVAL, NULL, "second"), CONVO_EINVAL);
    ck_assert_int_eq(err.code, CONVO_EIO);
    ck_assert_str_eq(err.backend_code, "57P01");
    ck_assert_str_eq(err.message, "first 1");
    convo__error_clear(&err);
    ck_assert_int_eq(err.code, 0);
    ck_assert_str_eq(err.message, "");
    ck_assert_int_eq(convo__error(NULL, CONVO_ENOMEM, NULL, "x"), CONVO_ENOMEM);
    convo__error_clear(NULL);
    /* one line, trailing blanks trimmed, long text and codes truncated */
    convo__error(&err, CONVO_EIO, "0123456789ABCDEFGHIJ", "line one\nline two\r\n");
    ck_assert_str_eq(err.message, "line one line two");
    ck_assert_int_eq(strlen(err.backend_code), sizeof err.backend_code - 1);
    /* libpq's "...\n\tIs the server running": a line break and the blanks around it are one space */
    convo__error_clear(&err);
    convo__error(&err, CONVO_EIO, NULL, "refused \n\tIs it running?\n\n  Hint:\ta");
    ck_assert_str_eq(err.message, "refused Is it running? Hint:\ta");
    convo__error_clear(&err);
    char longtext[1000];
    memset(longtext, 'y', sizeof longtext - 1);
    longtext[sizeof longtext - 1] = '\0';
    convo__error(&err, CONVO_EIO, NULL, "%s", longtext);
    ck_assert_int_eq(strlen(err.message), sizeof err.message - 1);
}
END_TEST

START_TEST(test_strerror_codes)
{
    for (int c = 0; c >= CONVO_ECORRUPT; c--) {
        const char *s = convo_strerror(c);
        ck_assert(s && *s);
        for (int d = 0; d > c; d--)
            ck_assert_str_ne(s, convo_strerror(d));
    }
    ck_assert_str_eq(convo_strerror(-100), "unknown error");
    ck_assert_str_eq(convo_version(), CONVO_VERSION);
    int memory = 0;
    for (const char *const *d = convo_drivers(); *d; d++)
        memory |= strcmp(*d, "memory") == 0;
    ck_assert(memory);
    ck_assert_ptr_nonnull(convo__driver_find("memory"));
    ck_assert_ptr_null(convo__driver_find("nosuch"));
}
END_TEST

/* ------------------------------------------------------------ result builders */

START_TEST(test_history_builder)
{
    convo_history *h = convo__history_new();
    ck_assert_int_eq(convo__history_reserve(h, 100), 0);
    for (int i = 0; i < 40; i++)
        ck_assert_int_eq(convo__history_add(h, "{\"role\":\"u\"}xx", 12, "u", 5 + i, 1000 + i), 0);
    convo__history_set_length(h, 77);
    ck_assert_int_eq(convo_history_count(h), 40);
    ck_assert_int_eq(convo_history_length(h), 77);
    size_t len;
    ck_assert_str_eq(convo_history_message(h, 39, &len), "{\"role\":\"u\"}");
    ck_assert_int_eq(len, 12);
    ck_assert_str_eq(convo_history_role(h, 0), "u");
    ck_assert_int_eq(convo_history_seq(h, 39), 44);
    ck_assert_int_eq(convo_history_created_at(h, 1), 1001);
    ck_assert_ptr_null(convo_history_message(h, 40, &len));
    ck_assert_int_eq(len, 0);
    ck_assert_ptr_null(convo_history_role(h, 40));
    ck_assert_str_eq(convo_history_extra(h), "{}");
    ck_assert_int_eq(convo__history_set_extra(h, "{\"a\":1}junk", 7), 0);
    ck_assert_int_eq(convo__history_set_extra(h, "{\"b\":2}", 7), 0);
    ck_assert_str_eq(convo_history_extra(h), "{\"b\":2}");
    convo_history_free(h);
    ck_assert_int_eq(convo_history_count(NULL), 0);

    convo_thread_page *p = convo__thread_page_new();
    for (int i = 0; i < 40; i++)
        ck_assert_int_eq(convo__thread_page_add(p, "abcdef", 3), 0);
    ck_assert_int_eq(convo_thread_page_count(p), 40);
    ck_assert_str_eq(convo_thread_page_id(p, 39), "abc");
    ck_assert_ptr_null(convo_thread_page_id(p, 40));
    ck_assert_ptr_null(convo_thread_page_next(p));
    ck_assert_int_eq(convo__thread_page_set_next(p, "abc"), 0);
    ck_assert_int_eq(convo__thread_page_set_next(p, "abd"), 0);
    ck_assert_str_eq(convo_thread_page_next(p), "abd");
    convo_thread_page_free(p);
}
END_TEST

/* ---------------------------------------------------------------------- main */

static Suite *unit_suite(void)
{
    Suite *s = suite_create("unit");
    TCase *tc = tcase_create("url");
    tcase_add_test(tc, test_url_plain_schemes);
    tcase_add_test(tc, test_url_authority);
    tcase_add_test(tc, test_url_ipv6);
    tcase_add_test(tc, test_url_ports);
    tcase_add_test(tc, test_url_query);
    tcase_add_test(tc, test_url_malformed);
    tcase_add_test(tc, test_url_redacted);
    tcase_add_test(tc, test_url_redacted_many_masks);
    tcase_add_test(tc, test_url_errors_hide_password);
    tcase_add_test(tc, test_url_take_and_rebuild);
    tcase_add_test(tc, test_url_take_int_and_ttl);
    suite_add_tcase(s, tc);
    tc = tcase_create("validate");
    tcase_set_timeout(tc, 120); /* a bound against a hang, not a speed check: the differential test needs seconds alone and much longer on a loaded 2-core machine */
    tcase_add_test(tc, test_utf8);
    tcase_add_test(tc, test_thread_ids);
    tcase_add_test(tc, test_messages);
    tcase_add_test(tc, test_message_roles_allow_list);
    tcase_add_test(tc, test_message_fast_path);
    tcase_add_test(tc, test_message_fast_path_word_offsets);
    tcase_add_test(tc, test_message_fast_path_against_jansson);
    tcase_add_test(tc, test_extra_patch);
    suite_add_tcase(s, tc);
    tc = tcase_create("core");
    tcase_add_test(tc, test_extra_merge);
    tcase_add_test(tc, test_extra_merge_limits_and_errors);
    tcase_add_test(tc, test_load_range);
    tcase_add_test(tc, test_format_time);
    tcase_add_test(tc, test_error_first_kept);
    tcase_add_test(tc, test_error_name_thread);
    tcase_add_test(tc, test_strerror_codes);
    tcase_add_test(tc, test_history_builder);
    suite_add_tcase(s, tc);
    unit_add_pool_tests(s);
    unit_add_driver_tests(s);
    unit_add_body_tests(s);
    unit_add_segment_tests(s);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(unit_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
