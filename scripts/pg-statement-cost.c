/* pg-statement-cost.c — runs one of the PostgreSQL driver's append statements
 * (or the bench's raw INSERT) N times on one connection, prepared, with binary
 * parameters as the driver sends them; scripts/pg-statement-cost.sh counts the
 * server's instructions for it under callgrind.
 *
 *   pg-statement-cost CONNINFO SCHEMA FILE.sql NPARAMS N burst|spread BASE
 *
 * NPARAMS 3: bench_insert.sql into @S.bench_cost (thread, seq, body);
 * 4: append_plain.sql before the appends' listed second (thread, body, role,
 * created_at); 5: append_plain.sql (... and created_at's whole second); 7:
 * append_one.sql before it (thread, body, role, created_at, expected length
 * -1, ttl NULL, expected generation -1); 8: append_one.sql (... and the
 * whole second); 6: an append that names the thread by its tid, as a client
 * that remembered it would (tid, body, role, created_at, its second, and the
 * seq the last run on that thread returned, 0 before: a hint); 0: a statement
 * without parameters (a read: any number of rows). burst: thread-0,
 * each call 1 ms after the last (inside its listed_at window); spread: a
 * random one of thread-0..thread-1999, each call 2 s after the last. BASE:
 * the first seq (raw) and the seed (spread). */
#include <libpq-fe.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void put64(char *out, uint64_t v)
{
    for (int i = 7; i >= 0; i--, v >>= 8)
        out[i] = (char)(v & 0xff);
}

/* The file with @S replaced by schema and @T by bench_cost. */
static char *statement(const char *path, const char *schema)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    static char in[65536], out[70000];
    size_t n = fread(in, 1, sizeof in - 1, f), o = 0;
    fclose(f);
    in[n] = 0;
    for (size_t i = 0; i < n && o + 64 < sizeof out; i++) {
        const char *with = in[i] == '@' && in[i + 1] == 'S'   ? schema
                           : in[i] == '@' && in[i + 1] == 'T' ? "bench_cost"
                                                              : NULL;
        if (with) {
            o += (size_t)snprintf(out + o, sizeof out - o, "%s", with);
            i++;
        } else {
            out[o++] = in[i];
        }
    }
    out[o] = 0;
    return out;
}

static uint64_t be64(const char *in)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | (unsigned char)in[i];
    return v;
}

/* tids[k], last[k]: the tid of thread-k and its last seq (mode 6) */
static int tids_of(PGconn *pg, const char *schema, int64_t *tids, int64_t *last)
{
    char sql[320];
    snprintf(sql, sizeof sql, "SELECT substr(t.thread_id, 8)::int, t.tid, (SELECT max(m.seq)"
             " FROM %s.messages m WHERE m.tid = t.tid) FROM %s.threads t"
             " WHERE t.thread_id ~ '^thread-[0-9]+$'", schema, schema);
    PGresult *r = PQexec(pg, sql);
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        fprintf(stderr, "tids: %s", PQerrorMessage(pg));
        PQclear(r);
        return 1;
    }
    for (int i = 0; i < PQntuples(r); i++) {
        int k = atoi(PQgetvalue(r, i, 0));
        if (k >= 0 && k < 2000) {
            tids[k] = atoll(PQgetvalue(r, i, 1));
            last[k] = atoll(PQgetvalue(r, i, 2));
        }
    }
    PQclear(r);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 8) {
        fprintf(stderr, "usage: %s CONNINFO SCHEMA FILE NPARAMS N burst|spread BASE\n", argv[0]);
        return 2;
    }
    PGconn *pg = PQconnectdb(argv[1]);
    const char *sql = statement(argv[3], argv[2]);
    int nparams = atoi(argv[4]), n = atoi(argv[5]), spread = strcmp(argv[6], "spread") == 0;
    long base = atol(argv[7]);
    if (PQstatus(pg) != CONNECTION_OK || !sql) {
        fprintf(stderr, "%s", sql ? PQerrorMessage(pg) : "cannot read the statement\n");
        return 1;
    }
    PGresult *r = PQprepare(pg, "cost", sql, 0, NULL);
    if (PQresultStatus(r) != PGRES_COMMAND_OK) {
        fprintf(stderr, "prepare: %s", PQerrorMessage(pg));
        return 1;
    }
    PQclear(r);
    char body[200], at[8], second[8], minus1[8], seq[8], thread[32], tid[8], hint[8];
    static int64_t last[2000], tids[2000]; /* mode 6: each thread's last seq, its tid */
    if (nparams == 6 && tids_of(pg, argv[2], tids, last) != 0)
        return 1;
    memset(body, 'x', sizeof body);
    put64(minus1, (uint64_t)-1);
    srand((unsigned)base);
    /* 2027-01-15 08:00:00 UTC in microseconds since 2000-01-01 */
    int64_t t0 = (INT64_C(1800000000) - INT64_C(946684800)) * 1000000;
    static const int binary[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    for (int i = 0; i < n; i++) {
        int k = spread ? rand() % 2000 : 0;
        int tl = snprintf(thread, sizeof thread, "thread-%d", k);
        int64_t at_micros = t0 + (spread ? INT64_C(2000000) : INT64_C(1000)) * i;
        put64(at, (uint64_t)at_micros);
        put64(seq, (uint64_t)(base + i));
        const char *raw[3] = {thread, seq, body};
        const int raw_len[3] = {tl, 8, (int)sizeof body};
        put64(second, (uint64_t)(at_micros - at_micros % 1000000));
        const char *app[8] = {thread, body, "user", at, minus1, NULL, minus1, second};
        const int app_len[8] = {tl, (int)sizeof body, 4, 8, 8, 0, 8, 8};
        if (nparams == 5) /* append_plain.sql's activity second */
            app[4] = second;
        put64(tid, (uint64_t)tids[k]);
        put64(hint, (uint64_t)last[k]);
        const char *named[6] = {tid, body, "user", at, second, hint};
        const int named_len[6] = {8, (int)sizeof body, 4, 8, 8, 8};
        r = PQexecPrepared(pg, "cost", nparams,
                           nparams == 3 ? raw : nparams == 6 ? named : app,
                           nparams == 3 ? raw_len : nparams == 6 ? named_len : app_len, binary, 1);
        ExecStatusType st = PQresultStatus(r);
        if (st != PGRES_COMMAND_OK &&
            (st != PGRES_TUPLES_OK || (nparams > 0 && PQntuples(r) != 1))) {
            fprintf(stderr, "run %d: %s", i, st == PGRES_TUPLES_OK ? "no row\n"
                                                                   : PQerrorMessage(pg));
            return 1;
        }
        if (nparams == 6)
            last[k] = (int64_t)be64(PQgetvalue(r, 0, 0));
        PQclear(r);
    }
    printf("%d\n", PQbackendPID(pg)); /* its callgrind file is named after it */
    PQfinish(pg);
    return 0;
}
