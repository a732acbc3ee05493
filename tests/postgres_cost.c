/* postgres_cost.c — what a one-message append costs on PostgreSQL next to a
 * raw single-row INSERT on the same connection: wall time and the CPU time
 * of the server and of this process, reported, not asserted. Part of
 * tests/postgres_extra (postgres.h). */
#include "postgres.h"
#include <check.h>
#include <convo.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* CPU seconds used so far by process pid (user + system), or -1 when it is
 * not on this machine. */
static double cpu_seconds(long pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* fields 14 and 15 follow the command name */
    unsigned long user = 0, sys = 0;
    for (int field = 2; p && field < 14; field++)
        p = strchr(p + 1, ' ');
    if (!p || sscanf(p, " %lu %lu", &user, &sys) != 2)
        return -1;
    return (double)(user + sys) / (double)sysconf(_SC_CLK_TCK);
}

static double process_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* One-message appends to an existing thread next to single-row INSERT round
 * trips (convo_bench_raw), on the same single connection. Reported, not
 * asserted: wall time measures the machine as much as the code, so the
 * server's and this process's CPU time per call are shown too. */
START_TEST(test_append_cost_against_raw_insert)
{
    const char *env = getenv("CONVO_PG_BENCH_N");
    size_t n = env ? (size_t)atol(env) : 2000;
    char app[64], more[128];
    snprintf(app, sizeof app, "pgx_cost_%08x", run_id);
    snprintf(more, sizeof more, "pool=1&application_name=%s", app);
    convo_store *s = open_ok(schema_url("cost", more));
    convo_error err;
    ck_assert_int_eq(append1(s, "cost", &err), 0); /* creates the thread, prepares */
    PGconn *pg = admin();
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT pid FROM pg_stat_activity WHERE application_name = '%s'",
             app);
    long pid = query_long(pg, sql);
    PQfinish(pg);
    double raw = 0;
    ck_assert_int_eq(convo_bench_raw(s, msg1, strlen(msg1), 200, &raw, &err), 0); /* warm up */
    double server0 = cpu_seconds(pid), client0 = process_cpu(), start = seconds_now();
    size_t failed = 0; /* counted, not asserted: check writes to a pipe on every assert */
    for (size_t i = 0; i < n; i++)
        failed += append1(s, "cost", &err) != 0;
    double appends = seconds_now() - start;
    ck_assert_msg(failed == 0, "%zu appends failed: %s", failed, err.message);
    double server1 = cpu_seconds(pid), client1 = process_cpu();
    ck_assert_int_eq(convo_bench_raw(s, msg1, strlen(msg1), n, &raw, &err), 0);
    double server2 = cpu_seconds(pid), client2 = process_cpu();
    int64_t bytes = 0;
    ck_assert_int_eq(convo_store_bytes(s, &bytes, &err), 0);
    ck_assert_int_gt(bytes, 0);
    double per = 1e6 / (double)n;
    fprintf(stderr,
            "postgres: %zu one-message appends %.1f us each, %zu raw INSERT round trips %.1f us"
            " each: append at %.0f%% of the raw rate\n",
            n, appends * per, n, raw * per, raw / appends * 100);
    if (server0 >= 0 && server2 >= 0)
        fprintf(stderr,
                "postgres: CPU per call: server %.1f us (append) / %.1f us (raw, with its"
                " CREATE and DROP TABLE); this process %.1f us / %.1f us\n",
                (server1 - server0) * per, (server2 - server1) * per,
                (client1 - client0) * per, (client2 - client1) * per);
    convo_close(s);
    drop_schema("cost");
}
END_TEST

void postgres_add_cost_tests(Suite *s)
{
    TCase *tc = tcase_create("cost");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_append_cost_against_raw_insert);
    suite_add_tcase(s, tc);
}
