/* postgres_failures.c — PostgreSQL going wrong under the driver: idle
 * connections killed, a call in flight cut off, statement_timeout, a time
 * out of PostgreSQL's range in an import, and the server restarted in the
 * middle of appends (the "restart" case, on private servers: see
 * tests/postgres-extra.sh). Part of tests/postgres_extra (postgres.h). */
#include "dumpbuf.h"
#include "postgres.h"
#include <check.h>
#include <convo.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void terminate_store_backends(const char *app)
{
    PGconn *pg = admin();
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity"
             " WHERE application_name = '%s' AND pid <> pg_backend_pid()", app);
    ck_assert_int_ge(query_long(pg, sql), 1);
    PQfinish(pg);
}

/* Idle connections the server dropped are replaced before use: no call fails. */
START_TEST(test_reconnect_after_idle_kill)
{
    char app[64], more[128];
    snprintf(app, sizeof app, "pgx_idle_%08x", run_id);
    snprintf(more, sizeof more, "application_name=%s&pool=3", app);
    convo_store *s = open_ok(schema_url("idle", more));
    convo_error err;
    ck_assert_int_eq(append1(s, "t", &err), 0);
    terminate_store_backends(app);
    usleep(200 * 1000); /* let the server close them */
    for (int i = 0; i < 5; i++)
        ck_assert_msg(append1(s, "t", &err) == 0, "append %d: %s", i, err.message);
    ck_assert_int_eq(length_of(s, "t"), 6);
    convo_close(s);
    drop_schema("idle");
}
END_TEST

typedef struct blocked_call {
    convo_store *s;
    int rc;
    convo_error err;
} blocked_call;

static void *append_blocked(void *arg)
{
    blocked_call *c = arg;
    c->rc = append1(c->s, "locked", &c->err);
    return NULL;
}

/* Holds the thread row of "locked" in schema `name` from another session. */
static PGconn *lock_thread_row(const char *name)
{
    PGconn *pg = admin();
    char sql[256];
    free(query1(pg, "BEGIN"));
    snprintf(sql, sizeof sql,
             "SELECT 1 FROM \"%s\".threads WHERE thread_id = 'locked' FOR UPDATE",
             schema_name(name));
    char *v = query1(pg, sql);
    ck_assert_ptr_nonnull(v);
    free(v);
    return pg;
}

/* The connection dies under a running call: that call fails with CONVO_EIO,
 * the next one succeeds on a new connection. */
START_TEST(test_call_in_flight_fails_then_recovers)
{
    char app[64], more[128];
    snprintf(app, sizeof app, "pgx_flight_%08x", run_id);
    snprintf(more, sizeof more, "application_name=%s&pool=1", app);
    convo_store *s = open_ok(schema_url("flight", more));
    convo_error err;
    ck_assert_int_eq(append1(s, "locked", &err), 0);
    PGconn *holder = lock_thread_row("flight");
    blocked_call call = {s, 0, {0}};
    pthread_t th;
    pthread_create(&th, NULL, append_blocked, &call);
    wait_for_lock_wait(app);
    terminate_store_backends(app);
    pthread_join(th, NULL);
    PQfinish(holder); /* rolls back, releasing the row */
    ck_assert_msg(call.rc == CONVO_EIO, "in-flight call: %d %s", call.rc, call.err.message);
    ck_assert_int_eq(append1(s, "locked", &err), 0);
    ck_assert_int_eq(length_of(s, "locked"), 2);
    convo_close(s);
    drop_schema("flight");
}
END_TEST

/* statement_timeout through libpq's options: SQLSTATE 57014 is CONVO_ETIMEOUT. */
START_TEST(test_statement_timeout)
{
    convo_store *s = open_ok(schema_url("timeout", "options=-c%20statement_timeout%3D300"));
    convo_error err;
    ck_assert_int_eq(append1(s, "locked", &err), 0);
    PGconn *holder = lock_thread_row("timeout");
    ck_assert_int_eq(append1(s, "locked", &err), CONVO_ETIMEOUT);
    ck_assert_str_eq(err.backend_code, "57014");
    PQfinish(holder);
    ck_assert_int_eq(append1(s, "locked", &err), 0);
    ck_assert_int_eq(length_of(s, "locked"), 2);
    convo_close(s);
    drop_schema("timeout");
}
END_TEST

/* A message time imported from a dump is stored as that time in SQL terms, or
 * refused: INT64_MIN microseconds wrapped around to the year 294247. */
START_TEST(test_import_time_range)
{
    convo_store *s = open_ok(schema_url("times", NULL));
    PGconn *pg = admin();
    const struct {
        int64_t at;
        long year; /* 0: refused */
    } cases[] = {{INT64_MIN, 0},
                 {-210866803200000000 - 1, 0},          /* a microsecond before 4714 BC */
                 {-210866803200000000, -4714},          /* the earliest PostgreSQL holds */
                 {-62135596800000000, 1},               /* 0001-01-01 */
                 {1732500000123456, 2024},
                 {INT64_MAX, 294247}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char thread[32], sql[256];
        snprintf(thread, sizeof thread, "time-%zu", k);
        membuf m = dump_with_time(thread, cases[k].at);
        convo_error err;
        int rc = convo_import(s, mem_read, &m, NULL, NULL, &err);
        free(m.data);
        if (cases[k].year == 0) {
            ck_assert_msg(rc == CONVO_EINVAL, "time %lld: rc %d", (long long)cases[k].at, rc);
            ck_assert_ptr_nonnull(strstr(err.message, "earliest time PostgreSQL stores"));
            convo_history *none = NULL;
            ck_assert_int_eq(convo_load(s, thread, NULL, &none, NULL), CONVO_ENOTFOUND);
            convo_history_free(none);
            continue;
        }
        ck_assert_msg(rc == 0, "time %lld: %s", (long long)cases[k].at, err.message);
        snprintf(sql, sizeof sql, "SELECT extract(year FROM m.created_at AT TIME ZONE 'UTC')"
                 " FROM %s.messages m JOIN %s.threads t ON t.tid = m.tid"
                 " WHERE t.thread_id = '%s'",
                 schema_name("times"), schema_name("times"), thread);
        ck_assert_int_eq(query_long(pg, sql), cases[k].year);
        convo_history *h;
        ck_assert_int_eq(convo_load(s, thread, NULL, &h, &err), 0);
        ck_assert_int_eq(convo_history_created_at(h, 0), cases[k].at);
        convo_history_free(h);
    }
    PQfinish(pg);
    convo_close(s);
    drop_schema("times");
}
END_TEST

typedef struct restart_run {
    convo_store *s;
    volatile int stop;
    int ok, eio, other, last_other;
    char other_message[256];
} restart_run;

static void *append_until_stopped(void *arg)
{
    restart_run *r = arg;
    while (!r->stop) {
        convo_error err;
        int rc = append1(r->s, "restart", &err);
        if (rc == 0)
            r->ok++;
        else if (rc == CONVO_EIO)
            r->eio++;
        else {
            r->other++;
            r->last_other = rc;
            snprintf(r->other_message, sizeof r->other_message, "%s", err.message);
        }
        if (rc != 0)
            usleep(20 * 1000);
    }
    return NULL;
}

static void restart_postgres(const char *dir)
{
    const char *script = getenv("CONVO_TEST_SERVERS");
    char cmd[2048];
    if (script && *script)
        snprintf(cmd, sizeof cmd, "'%s' restart-postgres '%s'", script, dir);
    else
        snprintf(cmd, sizeof cmd, "'%s/scripts/test-servers.sh' restart-postgres '%s'",
                 getenv("top_srcdir") ? getenv("top_srcdir") : ".", dir);
    ck_assert_msg(system(cmd) == 0, "%s failed", cmd);
}

/* The server restarts while appends run: calls fail only with CONVO_EIO, each
 * acknowledged append is kept, seqs stay dense, and calls succeed again after. */
START_TEST(test_restart_in_the_middle)
{
    const char *dir = getenv("CONVO_TEST_SERVER_DIR");
    if (!dir || !*dir) {
        fprintf(stderr, "postgres: restart test skipped: CONVO_TEST_SERVER_DIR is unset "
                        "(run under scripts/test-servers.sh)\n");
        return;
    }
    convo_store *s = open_ok(schema_url("restart", "pool=2"));
    restart_run run = {s, 0, 0, 0, 0, 0, ""};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, append_until_stopped, &run);
    usleep(300 * 1000);
    restart_postgres(dir);
    /* right after the restart, with no call in between, the next call works */
    convo_error err;
    int rc = append1(s, "after", &err);
    usleep(300 * 1000);
    run.stop = 1;
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    ck_assert_msg(rc == 0, "first call after the restart: %d %s", rc, err.message);
    ck_assert_msg(run.other == 0, "%d calls failed with %d: %s", run.other, run.last_other,
                  run.other_message);
    ck_assert_int_gt(run.ok, 0);
    int64_t n = length_of(s, "restart");
    /* a call cut off after its commit may have stored without acknowledging */
    ck_assert_msg(n >= run.ok && n <= run.ok + run.eio, "%lld stored, %d ok, %d EIO",
                  (long long)n, run.ok, run.eio);
    fprintf(stderr, "postgres: restart: %d appends ok, %d failed with CONVO_EIO\n", run.ok,
            run.eio);
    convo_close(s);
    drop_schema("restart");
}
END_TEST

void postgres_add_failure_tests(Suite *s)
{
    TCase *tc = tcase_create("failures");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_reconnect_after_idle_kill);
    tcase_add_test(tc, test_call_in_flight_fails_then_recovers);
    tcase_add_test(tc, test_statement_timeout);
    tcase_add_test(tc, test_import_time_range);
    suite_add_tcase(s, tc);
    tc = tcase_create("restart");
    tcase_set_tags(tc, "restart"); /* tests/postgres-extra.sh runs it on private servers */
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_restart_in_the_middle);
    suite_add_tcase(s, tc);
}
