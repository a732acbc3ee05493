/* redis.c — tests/redis_extra, the Redis driver's own checks beyond the
 * conformance suite: the helpers its files share (redis_extra.h: stores on a
 * prefix, a plain hiredis client) and the suite. The checks live in one file
 * per concern: URLs and ?wait= (redis_urls.c), each .lua file on its own
 * (redis_lua.c), the key scheme (redis_keys.c), TTL expiry (redis_ttl.c),
 * corrupt records and sizes (redis_data.c), the thread index's repairs and
 * races (redis_threads.c), and restarts, timeouts, lost scripts, sockets and
 * passwords on a private redis-server (redis_private.c).
 * Server: $CONVO_TEST_REDIS_URL; run by tests/redis-extra.sh. */
#include "redis_extra.h"
#include <check.h>
#include <convo.h>
#include <errno.h>
#include <hiredis/hiredis.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

const char *base_url; /* the shared server */
char run_id[40];     /* unique per run: prefixes start with it */

/* ------------------------------------------------------------ helpers */

double now_s(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (double)tv.tv_sec + (double)tv.tv_usec / 1e6;
}

void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* url + "prefix=P" (+ more), with '?' or '&' as needed. */
void url_with(char *buf, size_t size, const char *url, const char *params)
{
    snprintf(buf, size, "%s%s%s", url, strchr(url, '?') ? "&" : "?", params);
}

convo_store *open_url(const char *url)
{
    convo_store *s = NULL;
    convo_error err;
    int rc = convo_open(&s, url, &err);
    ck_assert_msg(rc == 0, "convo_open(%s): %d %s", url, rc, err.message);
    return s;
}

convo_store *open_prefix(const char *url, const char *prefix, const char *more)
{
    char params[256], full[512];
    snprintf(params, sizeof params, "prefix=%s%s%s", prefix, more ? "&" : "", more ? more : "");
    url_with(full, sizeof full, url, params);
    return open_url(full);
}

const char *const two[2] = {"{\"role\":\"user\",\"content\":\"hello\"}",
                                  "{\"role\":\"assistant\", \"content\" : \"h\\u00e9 \"}"};

void append_ok(convo_store *s, const char *id, const char *key)
{
    convo_append_opts o = CONVO_APPEND_OPTS_INIT;
    o.idempotency_key = key;
    convo_error err;
    int rc = convo_append(s, id, two, NULL, 2, &o, NULL, &err);
    ck_assert_msg(rc == 0, "append %s: %d %s", id, rc, err.message);
}

void extra_ok(convo_store *s, const char *id, const char *patch)
{
    convo_error err;
    int rc = convo_save_extra(s, id, patch, &err);
    ck_assert_msg(rc == 0, "save_extra %s: %d %s", id, rc, err.message);
}

/* A checkpoint "c1" with one channel value and one pending write. */
void checkpoint_ok(convo_store *s, const char *id, const char *ns)
{
    convo_blob v = {"json", "42", 2};
    convo_channel_in ch[] = {{"n", "1", &v}};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = id;
    cp.checkpoint_ns = ns;
    cp.checkpoint_id = "c1";
    cp.metadata_json = "{\"step\":1}";
    cp.channels = ch;
    cp.nchannels = 1;
    convo_error err;
    int rc = convo_checkpoint_put(s, &cp, &err);
    ck_assert_msg(rc == 0, "checkpoint_put %s: %d %s", id, rc, err.message);
    convo_write_in w = {0, "n", {"json", "43", 2}};
    rc = convo_checkpoint_put_writes(s, id, ns, "c1", "task", "", &w, 1, &err);
    ck_assert_msg(rc == 0, "put_writes %s: %d %s", id, rc, err.message);
}

int64_t length_of(convo_store *s, const char *id)
{
    convo_history *h;
    convo_error err;
    int rc = convo_load(s, id, NULL, &h, &err);
    if (rc == CONVO_ENOTFOUND)
        return -1;
    ck_assert_msg(rc == 0, "load %s: %d %s", id, rc, err.message);
    int64_t n = convo_history_length(h);
    convo_history_free(h);
    return n;
}

/* ------------------------------------------- a plain hiredis client */

/* Connects to a redis:// or redis+unix:// URL as given (auth and db included). */
redisContext *plain_connect(const char *url)
{
    char buf[512], *user = NULL, *pass = NULL, *db = NULL;
    snprintf(buf, sizeof buf, "%s", url);
    char *q = strchr(buf, '?');
    if (q) {
        *q++ = '\0';
        char *d = strstr(q, "db=");
        if (d && (d == q || d[-1] == '&'))
            db = strtok(d + 3, "&");
    }
    int unix_sock = strncmp(buf, "redis+unix://", 13) == 0;
    char *rest = buf + (unix_sock ? 13 : 8);
    char *at = strrchr(rest, '@');
    if (at) {
        *at = '\0';
        user = rest;
        pass = strchr(rest, ':');
        if (pass)
            *pass++ = '\0';
        rest = at + 1;
    }
    redisContext *c;
    if (unix_sock) {
        c = redisConnectUnix(rest);
    } else {
        char *slash = strchr(rest, '/');
        if (slash) {
            *slash = '\0';
            if (slash[1])
                db = slash + 1;
        }
        char *colon = strrchr(rest, ':');
        int port = colon ? atoi(colon + 1) : 6379;
        if (colon)
            *colon = '\0';
        c = redisConnect(*rest ? rest : "127.0.0.1", port);
    }
    ck_assert_msg(c && !c->err, "plain connect to %s: %s", url, c ? c->errstr : "oom");
    redisReply *r = NULL;
    if (pass)
        r = *user ? redisCommand(c, "AUTH %s %s", user, pass) : redisCommand(c, "AUTH %s", pass);
    freeReplyObject(r);
    if (db) {
        r = redisCommand(c, "SELECT %s", db);
        freeReplyObject(r);
    }
    return c;
}

redisReply *cmd(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    ck_assert_msg(r != NULL, "plain command %s: %s", fmt, c->errstr);
    return r;
}

long long cmd_int(redisContext *c, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    redisReply *r = redisvCommand(c, fmt, ap);
    va_end(ap);
    ck_assert_msg(r && r->type == REDIS_REPLY_INTEGER, "%s: not an integer reply (%s)", fmt,
                  r && r->type == REDIS_REPLY_ERROR ? r->str : "");
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

keyset scan_keys(redisContext *c, const char *pattern)
{
    keyset ks = {NULL, 0};
    char cursor[32] = "0";
    do {
        redisReply *r = cmd(c, "SCAN %s MATCH %s COUNT 500", cursor, pattern);
        ck_assert_int_eq(r->type, REDIS_REPLY_ARRAY);
        snprintf(cursor, sizeof cursor, "%s", r->element[0]->str);
        redisReply *a = r->element[1];
        ks.k = realloc(ks.k, (ks.n + a->elements + 1) * sizeof *ks.k);
        for (size_t i = 0; i < a->elements; i++)
            ks.k[ks.n++] = strndup(a->element[i]->str, a->element[i]->len);
        freeReplyObject(r);
    } while (strcmp(cursor, "0") != 0);
    return ks;
}

void keys_free(keyset *ks)
{
    for (size_t i = 0; i < ks->n; i++)
        free(ks->k[i]);
    free(ks->k);
}

/* Escapes glob characters so a prefix can start a SCAN MATCH pattern. */
void glob_escape(char *out, size_t size, const char *s)
{
    size_t o = 0;
    for (; *s && o + 3 < size; s++) {
        if (strchr("*?[]\\", *s))
            out[o++] = '\\';
        out[o++] = *s;
    }
    out[o] = '\0';
}


static Suite *redis_suite(void)
{
    Suite *s = suite_create("redis");
    TCase *tc = tcase_create("driver");
    tcase_set_timeout(tc, 60);
    redis_add_url_tests(tc);
    redis_add_lua_tests(tc);
    redis_add_key_tests(tc);
    redis_add_ttl_tests(tc);
    redis_add_data_tests(tc);
    redis_add_thread_tests(tc);
    redis_add_private_tests(tc); /* the private server's last: test_restart restarts it */
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    base_url = getenv("CONVO_TEST_REDIS_URL");
    const char *req = getenv("CONVO_REQUIRE_ALL");
    if (!base_url || !*base_url) {
        if (req && strcmp(req, "1") == 0) {
            fprintf(stderr, "redis: CONVO_TEST_REDIS_URL is not set and CONVO_REQUIRE_ALL=1\n");
            return 1;
        }
        fprintf(stderr, "redis: CONVO_TEST_REDIS_URL is not set; skipped\n");
        return 77;
    }
    signal(SIGPIPE, SIG_IGN); /* writes to a server that went away */
    snprintf(run_id, sizeof run_id, "convo-test-%ld-%ld", (long)getpid(), (long)time(NULL));
    priv_setup();
    SRunner *sr = srunner_create(redis_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    priv_teardown();
    return failed ? 1 : 0;
}
