/* unit_driver.c — Check tests for what the core does around a driver: a
 * version-1 driver's optional calls, the checkpoint getters on NULL, a key with
 * a C1 control, allocation failure in the memory driver, and passwords scrubbed
 * from every error a driver returns. */
#include "internal.h"
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <jansson.h>

/* ------------------------------------------------------- driver versioning */

/* A version 1 driver table ends before bench_raw, stored_bytes and sweep: the
 * core must not call them (issue 18.2). They are set here to functions that
 * fail the test, standing for whatever lies past a real v1 table's end. */
static int v1_bench_raw(convo_backend *b, const char *payload, size_t len, size_t n,
                        double *seconds, convo_error *err)
{
    (void)b, (void)payload, (void)len, (void)n, (void)seconds, (void)err;
    ck_abort_msg("bench_raw of a version 1 driver was called");
    return 0;
}

static int v1_stored_bytes(convo_backend *b, int64_t *bytes, convo_error *err)
{
    (void)b, (void)bytes, (void)err;
    ck_abort_msg("stored_bytes of a version 1 driver was called");
    return 0;
}

static int v1_sweep(convo_backend *b, uint64_t *removed, convo_error *err)
{
    (void)b, (void)removed, (void)err;
    ck_abort_msg("sweep of a version 1 driver was called");
    return 0;
}

START_TEST(test_v1_driver_optional_calls)
{
    static const char *const schemes[] = {"v1test", NULL};
    convo_driver d;
    memset(&d, 0, sizeof d);
    d.version = 1;
    d.name = "v1test";
    d.schemes = schemes;
    d.bench_raw = v1_bench_raw;
    d.stored_bytes = v1_stored_bytes;
    d.sweep = v1_sweep;
    convo_store s = {.driver = &d};
    convo_error err = {0};
    double secs;
    int64_t bytes;
    uint64_t removed = 7;
    ck_assert_int_eq(convo_bench_raw(&s, "x", 1, 1, &secs, &err), CONVO_ENOTSUP);
    ck_assert_int_eq(convo_store_bytes(&s, &bytes, &err), CONVO_ENOTSUP);
    ck_assert_int_eq(convo_sweep(&s, &removed, &err), 0);
    ck_assert_uint_eq(removed, 0);
}
END_TEST

START_TEST(test_checkpoint_getters_null)
{
    ck_assert_ptr_null(convo_checkpoint_thread_id(NULL));
    ck_assert_ptr_null(convo_checkpoint_ns(NULL));
    ck_assert_ptr_null(convo_checkpoint_id(NULL));
    ck_assert_ptr_null(convo_checkpoint_parent_id(NULL));
    ck_assert_ptr_null(convo_checkpoint_metadata(NULL));
    ck_assert_int_eq(convo_checkpoint_log_length(NULL), 0);
    ck_assert_int_eq(convo_checkpoint_created_at(NULL), 0);
    ck_assert_uint_eq(convo_checkpoint_channel_count(NULL), 0);
    ck_assert_uint_eq(convo_checkpoint_write_count(NULL), 0);
    convo_blob b = convo_checkpoint_body(NULL);
    ck_assert_ptr_null(b.type);
    ck_assert_ptr_null(b.bytes);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_ptr_null(convo_checkpoint_channel(NULL, 0, NULL, NULL));
    ck_assert_ptr_null(convo_checkpoint_write(NULL, 0, NULL, NULL, NULL, NULL));
}
END_TEST

/* Thread ids and checkpoint keys follow one rule (issue 18.6): the C1 control
 * U+0085 is refused in a checkpoint id as in a thread id. */
START_TEST(test_checkpoint_key_c1_control)
{
    convo_store *s;
    convo_error err = {0};
    ck_assert_int_eq(convo_open(&s, "memory:", &err), 0);
    convo_checkpoint *cp = NULL;
    ck_assert_int_eq(convo_checkpoint_get(s, "t\xC2\x85", "", NULL, &cp, &err), CONVO_EINVAL);
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", "c\xC2\x85", &cp, &err), CONVO_EINVAL);
    ck_assert_str_eq(err.message, "checkpoint id contains a control character");
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "n\xC2\x9F", NULL, &cp, &err), CONVO_EINVAL);
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", "c\xC2\xA0", &cp, &err), CONVO_ENOTFOUND);
    convo_close(s);
}
END_TEST

/* jansson's allocations fail once `jansson_allocs_left` reaches 0 (-1: never). */
static long jansson_allocs_left = -1;

static void *counted_malloc(size_t n)
{
    if (jansson_allocs_left == 0)
        return NULL;
    if (jansson_allocs_left > 0)
        jansson_allocs_left--;
    return malloc(n);
}

/* Issue 18.8: an idempotent append to a new memory: thread that runs out of
 * memory, wherever, leaves no thread behind (recording the key failed after
 * the thread was made, and an empty thread stayed). Every allocation jansson
 * makes for the call fails in turn, until the append goes through. */
START_TEST(test_memory_append_nomem_leaves_nothing)
{
    convo_store *s;
    convo_error err = {0};
    ck_assert_int_eq(convo_open(&s, "memory:", &err), 0);
    const char *msg = "{\"role\":\"user\"}";
    long failures = 0;
    for (long k = 0;; k++) {
        ck_assert_msg(k < 1000, "the append never went through");
        char id[32];
        snprintf(id, sizeof id, "t%ld", k);
        convo_append_opts o = CONVO_APPEND_OPTS_INIT;
        o.idempotency_key = "key";
        convo_append_result res;
        jansson_allocs_left = k;
        json_set_alloc_funcs(counted_malloc, free);
        int rc = convo_append(s, id, &msg, NULL, 1, &o, &res, &err);
        json_set_alloc_funcs(malloc, free);
        jansson_allocs_left = -1;
        if (rc == 0)
            break;
        ck_assert_msg(rc == CONVO_ENOMEM, "allocation %ld: %d %s", k, rc, err.message);
        convo_history *h = NULL;
        rc = convo_load(s, id, NULL, &h, &err);
        ck_assert_msg(rc == CONVO_ENOTFOUND, "allocation %ld failed: thread left (%d, %zu)", k,
                      rc, convo_history_count(h));
        failures++;
    }
    ck_assert_int_gt(failures, 1);
    convo_close(s);
}
END_TEST

/* ------------------------------------------------- passwords in messages */

static void assert_scrub(const char *in, const char *password_url, const char *want)
{
    char **secrets = convo__url_secrets(password_url);
    ck_assert_ptr_nonnull(secrets);
    char msg[256];
    snprintf(msg, sizeof msg, "%s", in);
    convo__scrub(msg, sizeof msg, secrets);
    ck_assert_msg(strcmp(msg, want) == 0, "scrub(%s) = %s, want %s", in, msg, want);
    convo__secrets_free(secrets);
}

/* Issue 19.7, 18.12: the password field of a URL, a password= value and the
 * password as a whole word are masked; a short password inside other words
 * is not (masking "e" in "conn***ction" showed the password). */
START_TEST(test_scrub_password_fields_only)
{
    const char *pg_e = "postgres://convo:e@h/db";
    assert_scrub("FATAL: password authentication failed for user \"sec\" (connection)", pg_e,
                 "FATAL: password authentication failed for user \"sec\" (connection)");
    assert_scrub("bad URL postgres://convo:e@h/db here", pg_e, "bad URL postgres://convo:***@h/db here");
    assert_scrub("to mongodb://u:an0ther@x:1,y:2/?w=1 failed", pg_e,
                 "to mongodb://u:***@x:1,y:2/?w=1 failed"); /* any URL's password field */
    assert_scrub("redis://h:6379 and http://h:80/x keep their ports", pg_e,
                 "redis://h:6379 and http://h:80/x keep their ports");
    assert_scrub("conninfo password=S3cret port=5", pg_e, "conninfo password=*** port=5");
    assert_scrub("q?a=1&Password=S3cret&b=2", pg_e, "q?a=1&Password=***&b=2");
    assert_scrub("password = 'two words' then", pg_e, "password = '***' then");
    assert_scrub("mypassword=visible, password: unchanged", pg_e,
                 "mypassword=visible, password: unchanged");
    const char *pw = "postgres://u:S3cret%21@h/db?sslpassword=k3y";
    assert_scrub("token \"S3cret%21\" and S3cret! and S3cret!x and xS3cret!", pw,
                 "token \"***\" and *** and S3cret!x and xS3cret!");
    assert_scrub("key k3y, not k3yring", pw, "key ***, not k3yring");
    /* a message cut inside a URL's user info still hides what is left of it */
    char cut[256];
    memset(cut, 'x', sizeof cut);
    memcpy(cut + 200, " postgres://u:S3cret", 20);
    cut[255] = '\0';
    char **secrets = convo__url_secrets(pw);
    convo__scrub(cut, sizeof cut, secrets);
    ck_assert_msg(!strstr(cut, "S3c") && strstr(cut, "postgres://u:***"), "%s", cut + 190);
    convo__secrets_free(secrets);
}
END_TEST

static int leaky_load(convo_backend *b, const char *thread_id, const convo_load_opts *opts,
                      convo_history **out, convo_error *err)
{
    (void)b, (void)thread_id, (void)opts, (void)out;
    return convo__error(err, CONVO_EIO, "S3cret", "leaky: S3cret at postgres://u:S3cret@h");
}

/* The core masks what any driver returns, whatever the driver does. */
START_TEST(test_scrub_after_every_driver_call)
{
    static const char *const schemes[] = {"leaky", NULL};
    convo_driver d;
    memset(&d, 0, sizeof d);
    d.version = 1;
    d.name = "leaky";
    d.schemes = schemes;
    d.load = leaky_load;
    convo_store s = {.driver = &d, .secrets = convo__url_secrets("leaky://u:S3cret@h")};
    convo_error err;
    convo_history *h = NULL;
    ck_assert_int_eq(convo_load(&s, "t", NULL, &h, &err), CONVO_EIO);
    ck_assert_str_eq(err.message, "leaky: *** at postgres://u:***@h");
    ck_assert_str_eq(err.backend_code, "***");
    convo__secrets_free(s.secrets);
}
END_TEST

void unit_add_driver_tests(Suite *s)
{
    TCase *tc = tcase_create("driver");
    tcase_add_test(tc, test_v1_driver_optional_calls);
    tcase_add_test(tc, test_checkpoint_getters_null);
    tcase_add_test(tc, test_checkpoint_key_c1_control);
    tcase_add_test(tc, test_memory_append_nomem_leaves_nothing);
    tcase_add_test(tc, test_scrub_password_fields_only);
    tcase_add_test(tc, test_scrub_after_every_driver_call);
    suite_add_tcase(s, tc);
}
