/* maint.c — the PostgreSQL driver's maintenance calls: import (convo import,
 * convo copy), sweep of threads whose ttl ran out, and what convo bench
 * measures (the cost of a raw INSERT, the bytes a store takes). */
#include "config.h"
#include "pg_int.h"
#include "drivers/postgres/sql.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SWEEP_BATCH 256 /* expired threads removed per transaction */
/* The earliest time timestamptz holds (4714-11-24 BC), in microseconds since
 * 1970; below it the conversion to PostgreSQL's epoch overflows (INT64_MIN was
 * stored as the year 294247). Every int64 above it fits (INT64_MAX is 294247 AD). */
#define PG_MIN_MICROS (INT64_C(-211813488000000000) + PG_EPOCH_MICROS)

int convo__pg_thread_import(convo_backend *b, const char *thread_id, int64_t first_seq,
                            const convo_message_in *msgs, const int64_t *created_at, size_t n,
                            int64_t generation, int *skipped, convo_error *err)
{
    for (size_t i = 0; i < n; i++)
        if (created_at[i] < PG_MIN_MICROS)
            return convo__error(err, CONVO_EINVAL, NULL, "message %lld: created_at %lld is "
                                "before the earliest time PostgreSQL stores (4714 BC)",
                                (long long)(first_seq + (int64_t)i), (long long)created_at[i]);
    int lens[7] = {(int)strlen(thread_id), 8, 0, 0, 0, 8, TTL_LEN};
    char *bodies, *roles, first[8], gen[8];
    int rc = convo__pg_encode_batch(msgs, n, &bodies, &lens[2], &roles, &lens[3]);
    if (rc != 0)
        return convo__pg_too_large(rc, err);
    pg_array at;
    convo__pg_array_start(&at, OID_TIMESTAMPTZ, n * 12);
    for (size_t i = 0; i < n; i++) {
        char t[8];
        put64(t, (uint64_t)(created_at[i] - PG_EPOCH_MICROS));
        convo__pg_array_add(&at, t, 8);
    }
    char *times = convo__pg_array_finish(&at, &lens[4]);
    put64(first, (uint64_t)first_seq);
    put64(gen, (uint64_t)generation);
    const char *values[7] = {thread_id, first, bodies, roles, times, gen, b->ttl};
    PGresult *r = NULL;
    rc = times ? convo__pg_run(b, ST_IMPORT, values, lens, &r, err)
               : convo__pg_too_large(CONVO_ENOMEM, err);
    free(bodies);
    free(roles);
    free(times);
    if (rc == 0)
        *skipped = PQgetvalue(r, 0, 0)[0] != 0;
    PQclear(r);
    return rc;
}

/* expiry_index.sql, for an opener with a ttl: the store gets threads_by_expiry
 * (migrate-26.sql) before this opener writes its first deadline. */
int convo__pg_expiry_open(convo_backend *b, convo_error *err)
{
    if (!b->ttl)
        return 0;
    char *sql = convo__pg_fill(b, SQL_EXPIRY_INDEX, NULL);
    if (!sql)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    pg_conn *c;
    int rc = convo__pg_conn_get(b, &c, err);
    if (rc == 0) {
        rc = convo__pg_exec(b, c->pg, sql, err);
        convo__pool_release(b->pool, c, PQstatus(c->pg) != CONNECTION_OK);
    }
    free(sql);
    return rc;
}

/* In batches, each its own transaction, until a batch comes back short. Any
 * store sweeps what stores with ttl left behind (without threads_by_expiry,
 * in a store no ttl opener opened, by reading every thread row). */
int convo__pg_sweep(convo_backend *b, uint64_t *removed, convo_error *err)
{
    char limit[4];
    put32(limit, SWEEP_BATCH);
    const char *values[1] = {limit};
    const int lens[1] = {4};
    uint64_t total = 0;
    for (;;) {
        PGresult *r;
        int rc = convo__pg_run(b, ST_SWEEP, values, lens, &r, err);
        if (rc != 0)
            return rc;
        int64_t n = convo__pg_get_int(r, 0, 0);
        PQclear(r);
        total += (uint64_t)n;
        if (n < SWEEP_BATCH)
            break;
    }
    *removed = total;
    return 0;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* n prepared single-row INSERTs into a table shaped like messages, each its
 * own transaction and round trip: what an append costs at the least. */
static int bench_inserts(convo_backend *b, PGconn *pg, const char *table, const char *payload,
                         size_t len, size_t n, double *seconds, convo_error *err)
{
    char *sql = convo__pg_fill(b, SQL_BENCH_INSERT, table);
    if (!sql)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    PGresult *r = PQprepare(pg, "convo_bench_raw", sql, 0, NULL);
    free(sql);
    int rc = r && PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : convo__pg_fail(b, pg, r, err);
    PQclear(r);
    static const int binary[3] = {1, 1, 1};
    char seq[8];
    const char *values[3] = {"bench", seq, payload};
    const int lens[3] = {5, 8, (int)len};
    double start = now_seconds();
    for (size_t i = 0; i < n && rc == 0; i++) {
        put64(seq, (uint64_t)i);
        r = PQexecPrepared(pg, "convo_bench_raw", 3, values, lens, binary, 1);
        if (!r || PQresultStatus(r) != PGRES_COMMAND_OK)
            rc = convo__pg_fail(b, pg, r, err);
        PQclear(r);
    }
    *seconds = now_seconds() - start;
    if (PQstatus(pg) == CONNECTION_OK)
        PQclear(PQexec(pg, SQL_BENCH_DEALLOCATE));
    return rc;
}

int convo__pg_bench_raw(convo_backend *b, const char *payload, size_t payload_len, size_t n,
                        double *seconds, convo_error *err)
{
    if (payload_len >= (size_t)1 << 30)
        return convo__error(err, CONVO_ETOOLARGE, NULL, "postgres: payload over 1 GiB");
    pg_conn *c;
    int rc = convo__pg_conn_get(b, &c, err);
    if (rc != 0)
        return rc;
    char table[64];
    snprintf(table, sizeof table, "\"bench_raw_%ld_%lld\"", (long)getpid(),
             (long long)convo__now_micros());
    char *create = convo__pg_fill(b, SQL_BENCH_CREATE, table);
    char *drop = convo__pg_fill(b, SQL_BENCH_DROP, table);
    rc = create && drop ? convo__pg_exec(b, c->pg, create, err)
                        : convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    if (rc == 0) {
        rc = bench_inserts(b, c->pg, table, payload, payload_len, n, seconds, err);
        int dropped = PQstatus(c->pg) == CONNECTION_OK ? convo__pg_exec(b, c->pg, drop, err) : 0;
        rc = rc ? rc : dropped;
    }
    free(create);
    free(drop);
    convo__pool_release(b->pool, c, PQstatus(c->pg) != CONNECTION_OK);
    return rc;
}

/* Tables with their indexes and TOAST, in this store's schema. */
int convo__pg_stored_bytes(convo_backend *b, int64_t *bytes, convo_error *err)
{
    pg_conn *c;
    int rc = convo__pg_conn_get(b, &c, err);
    if (rc != 0)
        return rc;
    const char *values[1] = {b->schema};
    PGresult *r = PQexecParams(c->pg, SQL_STORED_BYTES, 1, NULL, values, NULL, NULL, 1);
    if (r && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
        *bytes = convo__pg_get_int(r, 0, 0);
    else
        rc = convo__pg_fail(b, c->pg, r, err);
    PQclear(r);
    convo__pool_release(b->pool, c, PQstatus(c->pg) != CONNECTION_OK);
    return rc;
}
