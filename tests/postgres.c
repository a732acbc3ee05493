/* postgres.c — tests/postgres_extra, the PostgreSQL driver's own checks
 * against a real server (CONVO_TEST_POSTGRES_URL): the helpers the files of
 * the program share (postgres.h) and the suite, whose test cases live in one
 * file per concern: URL parameters (postgres_url.c), ttl and sweep
 * (postgres_ttl.c), data kept and errors mapped (postgres_data.c), rows
 * that do not decode (postgres_corrupt.c), races
 * across threads and processes (postgres_concurrency.c), lost connections,
 * timeouts and the restart (postgres_failures.c), the cost of an append next
 * to a raw INSERT (postgres_cost.c), the schema and its migrations
 * (postgres_schema.c) and the later layouts (see postgres.h). Run by
 * tests/postgres-extra.sh. */
#include "postgres.h"
#include <check.h>
#include <convo.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

const char *base_url;
unsigned run_id;

/* ------------------------------------------------------------------ helpers */

/* base_url with more query parameters ("a=b&c=d"); a static buffer of 4. */
const char *url_with(const char *params)
{
    static char buf[4][2048];
    static int n;
    char *b = buf[n++ % 4];
    snprintf(b, sizeof buf[0], "%s%s%s", base_url, strchr(base_url, '?') ? "&" : "?", params);
    return b;
}

/* A schema name unique to this run. */
const char *schema_name(const char *name)
{
    static char buf[4][64];
    static int n;
    char *b = buf[n++ % 4];
    snprintf(b, sizeof buf[0], "pgx_%08x_%s", run_id, name);
    return b;
}

const char *schema_url(const char *name, const char *more)
{
    char params[512];
    snprintf(params, sizeof params, "schema=%s%s%s", schema_name(name), more ? "&" : "",
             more ? more : "");
    return url_with(params);
}

convo_store *open_ok(const char *url)
{
    convo_store *s = NULL;
    convo_error err;
    int rc = convo_open(&s, url, &err);
    ck_assert_msg(rc == 0, "open: %d %s", rc, err.message);
    return s;
}

/* A plain libpq connection to the test server, for looking behind the driver. */
PGconn *admin(void)
{
    PGconn *pg = PQconnectdb(base_url);
    ck_assert_msg(PQstatus(pg) == CONNECTION_OK, "admin connection: %s", PQerrorMessage(pg));
    return pg;
}

/* Runs sql; returns the first value of the first row as a malloc'd string (or NULL). */
char *query1(PGconn *pg, const char *sql)
{
    PGresult *r = PQexec(pg, sql);
    ExecStatusType st = PQresultStatus(r);
    ck_assert_msg(st == PGRES_TUPLES_OK || st == PGRES_COMMAND_OK, "%s: %s", sql,
                  PQresultErrorMessage(r));
    char *v = st == PGRES_TUPLES_OK && PQntuples(r) > 0 && !PQgetisnull(r, 0, 0)
                  ? strdup(PQgetvalue(r, 0, 0))
                  : NULL;
    PQclear(r);
    return v;
}

long query_long(PGconn *pg, const char *sql)
{
    char *v = query1(pg, sql);
    ck_assert_msg(v != NULL, "%s returned nothing", sql);
    long n = atol(v);
    free(v);
    return n;
}

void drop_schema(const char *name)
{
    PGconn *pg = admin();
    char sql[160];
    snprintf(sql, sizeof sql, "DROP SCHEMA IF EXISTS \"%s\" CASCADE", schema_name(name));
    PQclear(PQexec(pg, "SET client_min_messages = warning"));
    free(query1(pg, sql));
    PQfinish(pg);
}

const char *msg1 = "{\"role\":\"user\",\"content\":\"hello\"}";

int append1(convo_store *s, const char *thread, convo_error *err)
{
    return convo_append(s, thread, &msg1, NULL, 1, NULL, NULL, err);
}

int64_t length_of(convo_store *s, const char *thread)
{
    convo_history *h;
    convo_error err;
    int rc = convo_load(s, thread, NULL, &h, &err);
    ck_assert_msg(rc == 0, "load %s: %s", thread, err.message);
    int64_t n = convo_history_length(h);
    for (size_t i = 0; i < convo_history_count(h); i++)
        ck_assert_int_eq(convo_history_seq(h, i), (int64_t)i);
    ck_assert_int_eq((int64_t)convo_history_count(h), n);
    convo_history_free(h);
    return n;
}



/* Runs sql (one or more statements) with every @S replaced by schema's quoted name. */
void exec_in_schema(PGconn *pg, const char *schema, const char *sql)
{
    size_t n = strlen(sql) + 1;
    for (const char *p = sql; (p = strstr(p, "@S")) != NULL; p += 2)
        n += strlen(schema) + 2;
    char *out = malloc(n), *o = out;
    ck_assert_ptr_nonnull(out);
    for (const char *p = sql; *p;) {
        if (p[0] == '@' && p[1] == 'S') {
            o += sprintf(o, "\"%s\"", schema);
            p += 2;
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
    PGresult *r = PQexec(pg, out);
    ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK || PQresultStatus(r) == PGRES_TUPLES_OK,
                  "%s", PQresultErrorMessage(r));
    PQclear(r);
    free(out);
}


void put_checkpoint(convo_store *s, const char *thread, const char *id)
{
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    convo_blob value = {"json", "1", 1};
    convo_channel_in ch = {"ch", "v1", &value};
    cp.thread_id = thread;
    cp.checkpoint_id = id;
    cp.channels = &ch;
    cp.nchannels = 1;
    convo_error err;
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put: %s", err.message);
}

/* Rows left in any table for thread in schema `name`. */
long rows_of(PGconn *pg, const char *name, const char *thread)
{
    static const char *const tables[] = {"threads", "thread_extra", "messages",
                                         "idempotency_keys", "checkpoints",
                                         "checkpoint_blobs"}; /* (v24) writes in checkpoints */
    long n = 0;
    for (size_t i = 0; i < sizeof tables / sizeof *tables; i++) {
        /* (v6) a child row names its thread by key: the thread's rows, and
         * any row whose key no thread has (left behind) */
        char sql[512];
        if (i == 0)
            snprintf(sql, sizeof sql, "SELECT count(*) FROM \"%s\".threads WHERE thread_id = '%s'",
                     schema_name(name), thread);
        else
            snprintf(sql, sizeof sql,
                     "SELECT count(*) FROM \"%s\".%s c WHERE c.tid IN (SELECT t.tid FROM"
                     " \"%s\".threads t WHERE t.thread_id = '%s') OR NOT EXISTS (SELECT 1"
                     " FROM \"%s\".threads t WHERE t.tid = c.tid)", schema_name(name),
                     tables[i], schema_name(name), thread, schema_name(name));
        n += query_long(pg, sql);
    }
    return n;
}

int list_has(convo_store *s, const char *thread)
{
    convo_thread_page *p;
    convo_error err;
    ck_assert_int_eq(convo_thread_list(s, NULL, 100, &p, &err), 0);
    int found = 0;
    for (size_t i = 0; i < convo_thread_page_count(p); i++)
        found |= strcmp(convo_thread_page_id(p, i), thread) == 0;
    convo_thread_page_free(p);
    return found;
}

void wait_for_lock_wait(const char *app)
{
    PGconn *pg = admin();
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM pg_stat_activity WHERE application_name = '%s'"
             " AND wait_event_type = 'Lock'", app);
    for (int i = 0; i < 100 && query_long(pg, sql) == 0; i++)
        usleep(50 * 1000);
    PQfinish(pg);
}

double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ------------------------------------------------------------------ main */

static Suite *postgres_suite(void)
{
    Suite *s = suite_create("postgres");
    postgres_add_url_tests(s);
    postgres_add_schema_tests(s);
    postgres_add_ttl_tests(s);
    postgres_add_data_tests(s);
    postgres_add_corrupt_tests(s);
    postgres_add_concurrency_tests(s);
    postgres_add_race_tests(s);
    postgres_add_failure_tests(s);
    postgres_add_rewrite_tests(s);
    postgres_add_index_tests(s);
    postgres_add_refs_tests(s);
    postgres_add_append_tests(s);
    postgres_add_dense_tests(s);
    postgres_add_compact_tests(s);
    postgres_add_inline_tests(s);
    postgres_add_packed_tests(s);
    postgres_add_swaps_tests(s);
    postgres_add_meta_tests(s);
    postgres_add_repeats_tests(s);
    postgres_add_lookup_tests(s);
    postgres_add_writes_short_tests(s);
    postgres_add_fill_tests(s);
    postgres_add_cold_tests(s);
    postgres_add_readback_tests(s);
    postgres_add_preview_tests(s);
    postgres_add_expiry_tests(s);
    postgres_add_segments_tests(s);
    postgres_add_cost_tests(s);
    return s;
}

int main(void)
{
    base_url = getenv("CONVO_TEST_POSTGRES_URL");
    if (!base_url || !*base_url) {
        const char *all = getenv("CONVO_REQUIRE_ALL");
        if (all && strcmp(all, "1") == 0) {
            fprintf(stderr, "postgres: CONVO_TEST_POSTGRES_URL is unset and "
                            "CONVO_REQUIRE_ALL=1: failing\n");
            return 1;
        }
        fprintf(stderr, "postgres: CONVO_TEST_POSTGRES_URL is unset: skipped\n");
        return 77;
    }
    srand((unsigned)time(NULL) ^ (unsigned)getpid());
    run_id = (unsigned)rand() ^ ((unsigned)getpid() << 16);
    SRunner *sr = srunner_create(postgres_suite());
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
