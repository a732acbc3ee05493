/* redis_extra.h — what the files of tests/redis_extra share: the shared test
 * server and a prefix unique to the run, stores on a prefix with a few
 * writes that must succeed (tests/redis.c), a plain hiredis client to look
 * behind the driver, and the private redis-server (tests/redis_private.c). */
#ifndef CONVO_TESTS_REDIS_EXTRA_H
#define CONVO_TESTS_REDIS_EXTRA_H

#include <check.h>
#include <convo.h>
#include <hiredis/hiredis.h>
#include <stddef.h>
#include <stdint.h>

extern const char *base_url; /* $CONVO_TEST_REDIS_URL */
extern char run_id[40];      /* unique per run: prefixes start with it */
/* two messages, the second with odd spacing and an escape */
extern const char *const two[2];

double now_s(void);
void sleep_ms(long ms);
/* url + params ("a=b&c=d"), with '?' or '&' as needed. */
void url_with(char *buf, size_t size, const char *url, const char *params);
convo_store *open_url(const char *url);
/* url with prefix=P and more parameters (or NULL). */
convo_store *open_prefix(const char *url, const char *prefix, const char *more);
/* Appends `two` with idempotency key `key` (or none). */
void append_ok(convo_store *s, const char *id, const char *key);
void extra_ok(convo_store *s, const char *id, const char *patch);
/* A checkpoint "c1" with one channel value and one pending write. */
void checkpoint_ok(convo_store *s, const char *id, const char *ns);
/* The thread's length, or -1 when it does not exist. */
int64_t length_of(convo_store *s, const char *id);

/* Connects to a redis:// or redis+unix:// URL as given (auth and db included). */
redisContext *plain_connect(const char *url);
/* A command's reply (never NULL; freeReplyObject it). */
redisReply *cmd(redisContext *c, const char *fmt, ...);
/* A command whose reply must be an integer. */
long long cmd_int(redisContext *c, const char *fmt, ...);
/* Every key matching pattern (SCAN, never KEYS); caller frees with keys_free. */
typedef struct keyset {
    char **k;
    size_t n;
} keyset;
keyset scan_keys(redisContext *c, const char *pattern);
void keys_free(keyset *ks);
/* Escapes glob characters so a prefix can start a SCAN MATCH pattern. */
void glob_escape(char *out, size_t size, const char *s);

/* tests/redis_private.c: starts the private server (or notes that there is
 * none, for need_private's skip), and stops and removes it. */
void priv_setup(void);
void priv_teardown(void);

/* Each file's cases, added to the one test case "driver" in this order. */
void redis_add_url_tests(TCase *tc);     /* tests/redis_urls.c */
void redis_add_lua_tests(TCase *tc);     /* tests/redis_lua.c */
void redis_add_key_tests(TCase *tc);     /* tests/redis_keys.c */
void redis_add_ttl_tests(TCase *tc);     /* tests/redis_ttl.c */
void redis_add_data_tests(TCase *tc);    /* tests/redis_data.c */
void redis_add_thread_tests(TCase *tc);  /* tests/redis_threads.c */
void redis_add_private_tests(TCase *tc); /* tests/redis_private.c */

#endif
