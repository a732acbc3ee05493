/* unit_driver.c — Check tests for what the core does around a driver: a
 * version-1 driver's optional calls, the checkpoint getters on NULL, a key with
 * a C1 control, allocation failure in the memory driver, passwords scrubbed
 * from every error a driver returns, and a listing's one read of a log its
 * caller knows. */
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

/* The memory driver's load, counted: how often a listing reads the log. */
static const convo_driver *counted_driver;
static int counted_loads;

static int counting_load(convo_backend *b, const char *thread_id, const convo_load_opts *opts,
                         convo_history **out, convo_error *err)
{
    counted_loads++;
    return counted_driver->load(b, thread_id, opts, out, err);
}

/* Ten checkpoints whose writes refer to the log, listed by a caller that knows
 * the log: one check of the log for the whole set (two loads), not two per
 * checkpoint; the items as a listing that knows nothing gives them, texts of
 * what is known left out. A generation not the thread's: each on its own. */
START_TEST(test_list_reads_the_known_log_once)
{
    convo_store *s = NULL;
    convo_error err;
    ck_assert_int_eq(convo_open(&s, "memory:", &err), 0);
    char texts[20][64];
    const char *msgs[20];
    for (int i = 0; i < 20; i++) {
        snprintf(texts[i], sizeof texts[i], "{\"role\":\"user\",\"content\":\"m%d\"}", i);
        msgs[i] = texts[i];
    }
    ck_assert_int_eq(convo_append(s, "t", msgs, NULL, 20, NULL, NULL, &err), 0);
    char id[10][16], parent[16] = "";
    for (int i = 0; i < 10; i++) {
        snprintf(id[i], sizeof id[i], "c%d", i);
        convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
        cp.thread_id = "t";
        cp.checkpoint_id = id[i];
        cp.parent_id = i ? parent : NULL;
        cp.log_length = 20;
        ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "%s", err.message);
        int64_t seqs[2] = {2 * i, 2 * i + 1};
        convo_items_in it = CONVO_ITEMS_IN_INIT;
        it.items = &msgs[2 * i];
        it.seqs = seqs;
        it.n = 2;
        const convo_items_in *per[1] = {&it};
        convo_write_in w = {0, "messages", {NULL, NULL, 0}};
        convo_writes_in in = CONVO_WRITES_IN_INIT;
        in.thread_id = "t";
        in.checkpoint_id = id[i];
        in.task_id = "task";
        in.writes = &w;
        in.n = 1;
        in.items = per;
        ck_assert_msg(convo_checkpoint_put_writes_ex(s, &in, &err) == 0, "%s", err.message);
        strcpy(parent, id[i]);
    }
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = "t";
    o.only_channel = "messages";
    convo_checkpoint_set *whole = NULL, *set = NULL;
    ck_assert_int_eq(convo_checkpoint_list(s, &o, &whole, &err), 0);
    ck_assert_uint_eq(convo_checkpoint_set_count(whole), 10);
    convo_driver d = *s->driver;
    counted_driver = s->driver;
    d.load = counting_load;
    s->driver = &d;
    convo_history *h = NULL;
    ck_assert_int_eq(convo_load(s, "t", NULL, &h, &err), 0);
    o.known_generation = convo_history_generation(h);
    o.known_origin = convo_history_created_at(h, 0);
    convo_history_free(h);
    for (int64_t length = 11; length <= 20; length += 9) {
        o.known_length = length;
        counted_loads = 0;
        ck_assert_int_eq(convo_checkpoint_list(s, &o, &set, &err), 0);
        ck_assert_int_le(counted_loads, 2);
        for (size_t i = 0; i < 10; i++) {
            convo_items a, b;
            ck_assert_int_eq(convo_checkpoint_write_items(convo_checkpoint_set_get(whole, i), 0, &a),
                             1);
            ck_assert_int_eq(convo_checkpoint_write_items(convo_checkpoint_set_get(set, i), 0, &b), 1);
            ck_assert_uint_eq(a.n, 2);
            ck_assert_uint_eq(b.n, 2);
            ck_assert_int_eq(convo_checkpoint_generation(convo_checkpoint_set_get(set, i)),
                             o.known_generation);
            for (size_t k = 0; k < 2; k++) {
                ck_assert_int_eq(a.seqs[k], b.seqs[k]);
                if (b.seqs[k] < length)
                    ck_assert_ptr_null(b.items[k]);
                else
                    ck_assert_str_eq(a.items[k], b.items[k]);
            }
        }
        convo_checkpoint_set_free(set);
    }
    o.known_generation++;
    counted_loads = 0;
    ck_assert_int_eq(convo_checkpoint_list(s, &o, &set, &err), 0);
    ck_assert_int_ge(counted_loads, 10); /* each checkpoint reads its messages again */
    convo_items b;
    ck_assert_int_eq(convo_checkpoint_write_items(convo_checkpoint_set_get(set, 9), 0, &b), 1);
    ck_assert_str_eq(b.items[0], msgs[0]);
    convo_checkpoint_set_free(set);
    s->driver = counted_driver;
    convo_checkpoint_set_free(whole);
    convo_close(s);
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
    tcase_add_test(tc, test_list_reads_the_known_log_once);
    suite_add_tcase(s, tc);
}
