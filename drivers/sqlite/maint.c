/* maint.c — the SQLite driver's upkeep and measures: sweep (threads past
 * their ttl), bench's raw baseline (bare inserts into a scratch table) and the
 * bytes the store takes on disk. */
#include "config.h"
#include "sqlite_int.h"
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#define SWEEP_BATCH 64 /* expired threads removed per write transaction */

/* ---- expiry ---- */

typedef struct sweep_args {
    uint64_t removed;
    int more; /* a full batch was removed: there may be more */
} sweep_args;

/* Removes up to SWEEP_BATCH threads whose deadline has passed. */
static int sweep_tx(sq_conn *c, void *arg, convo_error *err)
{
    sweep_args *a = arg;
    int64_t nums[SWEEP_BATCH];
    size_t n = 0;
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_THREAD_EXPIRED, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, convo__now_micros());
    sqlite3_bind_int64(st, 2, SWEEP_BATCH);
    while ((rc = sq_stmt_step(c, st, "finding expired threads", err)) == 1)
        if (n < SWEEP_BATCH) /* LIMIT says so; the check keeps the array safe */
            nums[n++] = sqlite3_column_int64(st, 0);
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = sq_thread_purge(c, nums[i], err);
    a->removed += rc == 0 ? n : 0;
    a->more = rc == 0 && n == SWEEP_BATCH;
    return rc;
}

/* In batches, so other writers get the lock in between. Any store sweeps what
 * stores with ttl left behind; a file never written with ttl has nothing to sweep. */
int sq_sweep(convo_backend *b, uint64_t *removed, convo_error *err)
{
    sweep_args a = {0, 1};
    int rc = 0;
    while (rc == 0 && a.more)
        rc = sq_run_tx(b, 1, sweep_tx, &a, err);
    *removed = a.removed;
    return rc;
}

/* ---- measuring ---- */

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* n transactions of one bare INSERT each into the scratch table of this process. */
static int bench_on(sq_conn *c, long pid, const char *payload, size_t len, size_t n,
                    double *seconds, convo_error *err)
{
    char sql[sizeof SQL_BENCH_INSERT + 24]; /* the format with room for any pid */
    sqlite3_stmt *ins = NULL;
    snprintf(sql, sizeof sql, SQL_BENCH_INSERT, pid);
    int rc = sqlite3_prepare_v2(c->db, sql, -1, &ins, NULL);
    if (rc != SQLITE_OK)
        return sq_conn_error(c, rc, err, "preparing the benchmark");
    double t0 = seconds_now();
    int out = 0;
    for (size_t i = 0; i < n && out == 0; i++) {
        out = sq_exec_id(c, ST_BEGIN_IMMEDIATE, "starting a transaction", err);
        if (out == 0) {
            sqlite3_bind_blob64(ins, 1, payload, len, SQLITE_STATIC);
            out = sq_stmt_run(c, ins, "inserting", err);
        }
        if (out == 0)
            out = sq_exec_id(c, ST_COMMIT, "committing", err);
    }
    *seconds = seconds_now() - t0;
    sqlite3_finalize(ins);
    if (!sqlite3_get_autocommit(c->db))
        sq_exec_id(c, ST_ROLLBACK, "rolling back", NULL);
    return out;
}

/* The scratch table is the process's own (statements/bench-*.sql: its name
 * carries the process id), created and dropped around the run. */
int sq_bench_raw(convo_backend *b, const char *payload, size_t payload_len, size_t n,
                 double *seconds, convo_error *err)
{
    void *p;
    int rc = convo__pool_acquire(b->pool, &p, err);
    if (rc)
        return rc;
    sq_conn *c = p;
    long pid = (long)getpid();
    char create[sizeof SQL_BENCH_CREATE + 24], drop[sizeof SQL_BENCH_DROP + 24];
    snprintf(create, sizeof create, SQL_BENCH_CREATE, pid);
    snprintf(drop, sizeof drop, SQL_BENCH_DROP, pid);
    rc = sq_exec_sql(c, create, "creating the benchmark table", err);
    if (rc == 0) {
        rc = bench_on(c, pid, payload, payload_len, n, seconds, err);
        int dropped = sq_exec_sql(c, drop, "dropping the benchmark table", err);
        rc = rc ? rc : dropped;
    }
    convo__pool_release(b->pool, c, !b->memory && !sqlite3_get_autocommit(c->db));
    return rc;
}

/* The pages in use once the WAL is checkpointed into the file and truncated:
 * (page_count - freelist_count) x page_size (statements/stored-bytes.sql).
 * Free pages (left by deletes, reused by later writes) are not counted, so a
 * measurement does not depend on what was deleted before it. */
int sq_stored_bytes(convo_backend *b, int64_t *bytes, convo_error *err)
{
    void *p;
    int rc = convo__pool_acquire(b->pool, &p, err);
    if (rc)
        return rc;
    sq_conn *c = p;
    if (!b->memory) /* best effort: a busy reader only makes the file look bigger */
        sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
    sqlite3_stmt *st;
    rc = sqlite3_prepare_v2(c->db, SQL_STORED_BYTES, -1, &st, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        *bytes = sqlite3_column_int64(st, 0);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    rc = rc == SQLITE_OK ? 0 : sq_conn_error(c, rc, err, "reading the database size");
    convo__pool_release(b->pool, c, false);
    return rc;
}
