/* postgres_concurrency.c — PostgreSQL under concurrent callers: processes
 * racing with one idempotency key, threads sharing a small pool, a
 * serializable default that must not fail appends. Part of
 * tests/postgres_extra (postgres.h). */
#include "postgres.h"
#include <check.h>
#include <convo.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

/* Processes racing with the same idempotency key: one batch stored, every
 * caller told the same seq range. */
START_TEST(test_idempotency_race_across_processes)
{
    enum { N = 8, ROUNDS = 20 };
    const char *url = schema_url("idem", NULL);
    convo_store *s = open_ok(url);
    convo_close(s);
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pids[N];
    for (int i = 0; i < N; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            close(fds[0]);
            convo_store *c = NULL;
            int ok = convo_open(&c, url, NULL) == 0;
            for (int r = 0; ok && r < ROUNDS; r++) {
                char key[32];
                snprintf(key, sizeof key, "key-%d", r);
                convo_append_opts o = CONVO_APPEND_OPTS_INIT;
                o.idempotency_key = key;
                const char *two[] = {msg1, msg1};
                convo_append_result res;
                ok = convo_append(c, "t", two, NULL, 2, &o, &res, NULL) == 0;
                long line[3] = {r, (long)res.first_seq, res.replayed};
                ok = ok && write(fds[1], line, sizeof line) == (ssize_t)sizeof line;
            }
            convo_close(c);
            _exit(ok ? 0 : 1);
        }
    }
    close(fds[1]);
    long first[ROUNDS], fresh[ROUNDS] = {0};
    for (int r = 0; r < ROUNDS; r++)
        first[r] = -1;
    long line[3];
    while (read(fds[0], line, sizeof line) == (ssize_t)sizeof line) {
        ck_assert(first[line[0]] == -1 || first[line[0]] == line[1]);
        first[line[0]] = line[1];
        fresh[line[0]] += !line[2];
    }
    close(fds[0]);
    for (int i = 0; i < N; i++) {
        int status;
        waitpid(pids[i], &status, 0);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d failed", i);
    }
    for (int r = 0; r < ROUNDS; r++)
        ck_assert_msg(fresh[r] == 1, "key-%d stored %ld times", r, fresh[r]);
    s = open_ok(url);
    ck_assert_int_eq(length_of(s, "t"), 2 * ROUNDS);
    convo_close(s);
    drop_schema("idem");
}
END_TEST

typedef struct worker {
    convo_store *s;
    int id, failures;
} worker;

static void *append_many(void *arg)
{
    worker *w = arg;
    char thread[16];
    for (int i = 0; i < 100; i++) {
        snprintf(thread, sizeof thread, "t%d", i % 3);
        if (append1(w->s, thread, NULL) != 0)
            w->failures++;
    }
    return NULL;
}

/* Eight threads share a pool of two connections. */
START_TEST(test_pool_shared_by_threads)
{
    char app[64], more[128];
    snprintf(app, sizeof app, "pgx_pool_%08x", run_id);
    snprintf(more, sizeof more, "application_name=%s&pool=2", app);
    convo_store *s = open_ok(schema_url("pool", more));
    enum { N = 8 };
    pthread_t th[N];
    worker w[N];
    for (int i = 0; i < N; i++) {
        w[i] = (worker){s, i, 0};
        pthread_create(&th[i], NULL, append_many, &w[i]);
    }
    int64_t total = 0;
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(w[i].failures, 0);
    }
    for (int t = 0; t < 3; t++) {
        char thread[16];
        snprintf(thread, sizeof thread, "t%d", t);
        total += length_of(s, thread);
    }
    ck_assert_int_eq(total, N * 100);
    PGconn *pg = admin();
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM pg_stat_activity WHERE application_name = '%s'", app);
    ck_assert_int_eq(query_long(pg, sql), 2); /* never more than pool=2 */
    PQfinish(pg);
    convo_close(s);
    drop_schema("pool");
}
END_TEST

/* A serializable default (a role's setting) does not make concurrent appends
 * fail: the driver runs its statements in READ COMMITTED. */
START_TEST(test_serializable_default_no_failures)
{
    convo_store *s = open_ok(
        schema_url("iso", "pool=4&options=-c%20default_transaction_isolation%3Dserializable"));
    enum { N = 4 };
    pthread_t th[N];
    worker w[N];
    for (int i = 0; i < N; i++) {
        w[i] = (worker){s, i, 0};
        pthread_create(&th[i], NULL, append_many, &w[i]);
    }
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(w[i].failures, 0);
    }
    int64_t total = 0;
    for (int t = 0; t < 3; t++) {
        char thread[16];
        snprintf(thread, sizeof thread, "t%d", t);
        total += length_of(s, thread);
    }
    ck_assert_int_eq(total, N * 100);
    convo_close(s);
    drop_schema("iso");
}
END_TEST

void postgres_add_concurrency_tests(Suite *s)
{
    TCase *tc = tcase_create("concurrency");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_idempotency_race_across_processes);
    tcase_add_test(tc, test_pool_shared_by_threads);
    tcase_add_test(tc, test_serializable_default_no_failures);
    suite_add_tcase(s, tc);
}
