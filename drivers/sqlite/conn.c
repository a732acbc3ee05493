/* conn.c — the SQLite driver's connections: each one opened on the file,
 * switched to WAL and migrated (schema.c) before the pool hands it out; how
 * SQLite's result codes become convo errors; the statements a connection
 * prepares once (listed in SQ_STATEMENTS, each one file in statements/) and
 * the transaction every call runs in. */
#include "config.h"
#include "sqlite_int.h"
#include "segments.h"
#include "compact.h"
#include "pending.h"
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

/* The text of each cached statement, from statements/NAME.sql. */
static const char *const stmt_sql[ST_COUNT] = {
#define SQ_STMT_SQL(name) [ST_##name] = SQL_##name,
    SQ_STATEMENTS(SQ_STMT_SQL)
#undef SQ_STMT_SQL
};

/* ---- errors ---- */

static int map_code(int rc)
{
    if (rc == SQLITE_IOERR_NOMEM)
        return CONVO_ENOMEM;
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED: return CONVO_ETIMEOUT;
    case SQLITE_FULL:
    case SQLITE_IOERR:
    case SQLITE_CANTOPEN:
    case SQLITE_READONLY:
    case SQLITE_PERM:
    case SQLITE_PROTOCOL: return CONVO_EIO;
    case SQLITE_CORRUPT:
    case SQLITE_NOTADB: return CONVO_ECORRUPT;
    case SQLITE_NOMEM: return CONVO_ENOMEM;
    case SQLITE_TOOBIG: return CONVO_ETOOLARGE;
    default: return CONVO_ERROR;
    }
}

/* Maps an SQLite result code to a convo error; backend_code is the extended code. */
static int sq_error(sqlite3 *db, int busy_ms, int rc, convo_error *err, const char *what)
{
    char code[16];
    snprintf(code, sizeof code, "%d", rc);
    const char *msg = db && sqlite3_extended_errcode(db) == rc ? sqlite3_errmsg(db)
                                                               : sqlite3_errstr(rc);
    int mapped = map_code(rc);
    if (mapped == CONVO_ETIMEOUT)
        return convo__error(err, mapped, code, "sqlite: %s: %s (still locked after %d ms)", what,
                            msg, busy_ms);
    return convo__error(err, mapped, code, "sqlite: %s: %s", what, msg);
}

int sq_conn_error(sq_conn *c, int rc, convo_error *err, const char *what)
{
    return sq_error(c->db, c->busy_ms, rc, err, what);
}

/* ---- statements ---- */

int sq_stmt_get(sq_conn *c, enum stmt_id id, sqlite3_stmt **out, convo_error *err)
{
    *out = NULL;
    if (!c->stmts[id]) {
        int rc = sqlite3_prepare_v3(c->db, stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT,
                                    &c->stmts[id], NULL);
        if (rc != SQLITE_OK)
            return sq_conn_error(c, rc, err, "preparing a statement");
    }
    *out = c->stmts[id];
    return 0;
}

/* Makes a statement reusable and drops its pointers to the caller's buffers. */
void sq_stmt_done(sqlite3_stmt *st)
{
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
}

/* Steps st once: 1 for a row (st left active), 0 when done, < 0 on error;
 * st is reset unless a row is returned. */
int sq_stmt_step(sq_conn *c, sqlite3_stmt *st, const char *what, convo_error *err)
{
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        return 1;
    int out = rc == SQLITE_DONE ? 0 : sq_conn_error(c, rc, err, what);
    sq_stmt_done(st);
    return out;
}

/* Runs a statement that returns no rows. */
int sq_stmt_run(sq_conn *c, sqlite3_stmt *st, const char *what, convo_error *err)
{
    int rc = sq_stmt_step(c, st, what, err);
    if (rc == 1) {
        sq_stmt_done(st);
        rc = 0;
    }
    return rc;
}

int sq_exec_id(sq_conn *c, enum stmt_id id, const char *what, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, id, &st, err);
    return rc ? rc : sq_stmt_run(c, st, what, err);
}

/* Runs SQL text that is not worth caching (schema changes, pragmas). */
int sq_exec_sql(sq_conn *c, const char *sql, const char *what, convo_error *err)
{
    int rc = sqlite3_exec(c->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : sq_conn_error(c, rc, err, what);
}

/* Runs statement id with its first nargs parameters bound to a, b and d. */
int sq_run_with_ints(sq_conn *c, enum stmt_id id, int nargs, int64_t a, int64_t b, int64_t d,
                     const char *what, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, id, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, a);
    if (nargs > 1)
        sqlite3_bind_int64(st, 2, b);
    if (nargs > 2)
        sqlite3_bind_int64(st, 3, d);
    return sq_stmt_run(c, st, what, err);
}

/* ---- transactions ---- */

/* Runs body inside BEGIN [IMMEDIATE] ... COMMIT on a pooled connection; any
 * failure rolls everything back, so a call writes all or nothing. */
int sq_run_tx(convo_backend *b, int write, tx_body body, void *arg, convo_error *err)
{
    void *p;
    int rc = convo__pool_acquire(b->pool, &p, err);
    if (rc)
        return rc;
    sq_conn *c = p;
    c->open_read.num = 0;
    rc = sq_exec_id(c, write ? ST_BEGIN_IMMEDIATE : ST_BEGIN, "starting a transaction", err);
    if (rc == 0) {
        rc = body(c, arg, err);
        if (rc == 0)
            rc = sq_exec_id(c, ST_COMMIT, "committing", err);
        if (rc != 0 && !sqlite3_get_autocommit(c->db))
            sq_exec_id(c, ST_ROLLBACK, "rolling back", NULL);
        if (rc != 0) /* it may describe a row rolled back */
            sq_list_memo_clear(c);
    }
    /* a connection stuck in a transaction would block every other writer */
    int broken = !b->memory && !sqlite3_get_autocommit(c->db);
    convo__pool_release(b->pool, c, broken);
    return rc;
}

/* ---- connections ---- */

/* One attempt at PRAGMA journal_mode=WAL: SQLITE_OK once the file is in WAL
 * mode, SQLITE_DONE when SQLite refused the mode, else the error code. */
static int try_wal(sq_conn *c)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(c->db, SQL_JOURNAL_WAL, -1, &st, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *mode = (const char *)sqlite3_column_text(st, 0);
        rc = mode && strcasecmp(mode, "wal") == 0 ? SQLITE_OK : SQLITE_DONE;
    }
    sqlite3_finalize(st);
    return rc;
}

/* The milliseconds to sleep after the count-th BUSY in a row (0 first), or 0
 * to give up: sqlite3_busy_timeout's schedule, which ends at busy_ms in all. */
static int busy_delay(int count, int busy_ms)
{
    static const int delays[] = {1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100};
    static const int totals[] = {0, 1, 3, 8, 18, 33, 53, 78, 103, 128, 178, 228};
    const int last = (int)(sizeof delays / sizeof *delays) - 1;
    int64_t delay = delays[count < last ? count : last];
    int64_t prior = count <= last ? totals[count]
                                  : totals[last] + (int64_t)delays[last] * (count - last);
    if (prior + delay > busy_ms)
        delay = busy_ms - prior;
    return delay > 0 ? (int)delay : 0;
}

/* Sleeps ms between the store's wait hooks. */
static void busy_sleep(sq_conn *c, int ms)
{
    convo_wait w;
    convo__wait_begin(&w, c->wait);
    sqlite3_sleep(ms);
    convo__wait_end(&w);
}

/* The busy handler, instead of sqlite3_busy_timeout's (the same schedule) so
 * that each of its sleeps runs between the wait hooks. */
static int busy_wait(void *arg, int count)
{
    sq_conn *c = arg;
    int ms = busy_delay(count, c->busy_ms);
    if (ms > 0)
        busy_sleep(c, ms);
    return ms > 0;
}

/* Switching a new file to WAL needs an exclusive lock and SQLite answers BUSY
 * at once, without the busy handler, while another process holds any lock on
 * it (as when several open a new file together): retry up to busy_timeout. */
static int set_wal(sq_conn *c, convo_error *err)
{
    int rc, ms;
    for (int count = 0; ((rc = try_wal(c)) & 0xff) == SQLITE_BUSY &&
                        (ms = busy_delay(count, c->busy_ms)) > 0;
         count++)
        busy_sleep(c, ms);
    if (rc == SQLITE_DONE)
        return convo__error(err, CONVO_ENOTSUP, NULL,
                            "sqlite: the database could not be switched to WAL mode (a network"
                            " or read-only filesystem?)");
    return rc == SQLITE_OK ? 0 : sq_conn_error(c, rc, err, "switching to WAL mode");
}

static int conn_configure(convo_backend *b, sq_conn *c, convo_error *err)
{
    sqlite3_extended_result_codes(c->db, 1);
    sqlite3_busy_handler(c->db, busy_wait, c);
#ifdef SQLITE_DBCONFIG_DEFENSIVE
    sqlite3_db_config(c->db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)NULL);
#endif
    /* layout 7's compact forms and layout 10's pending writes, which their
     * statements and migrations use */
    int rc = sq_compact_register(c->db);
    if (rc == SQLITE_OK)
        rc = sq_pending_register(c->db);
    if (rc == SQLITE_OK)
        rc = sq_segments_register(c->db);
    if (rc != SQLITE_OK)
        return sq_conn_error(c, rc, err, "registering convo's SQL functions");
    rc = b->memory ? 0 : set_wal(c, err);
    if (rc == 0)
        rc = sq_exec_sql(c, b->sync_full ? SQL_SYNCHRONOUS_FULL : SQL_SYNCHRONOUS_NORMAL,
                         "setting synchronous", err);
    return rc ? rc : sq_migrate(c, err);
}

static void sq_disconnect(void *ctx, void *conn)
{
    sq_conn *c = conn;
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(c->stmts[i]);
    sqlite3_close(c->db);
    sq_list_memo_clear(c);
    sq_open_memo_clear(c);
    free(c);
}

static int sq_connect(void *ctx, void **out, convo_error *err)
{
    convo_backend *b = ctx;
    sq_conn *c = calloc(1, sizeof *c);
    if (!c)
        return no_memory(err);
    c->busy_ms = b->busy_ms;
    c->seal = b->seal;
    c->wait = &b->limits.wait;
    c->ttl_us = (int64_t)b->ttl_s * 1000000;
    /* the file exists already (made 0600 by sq_open): never let SQLite create it */
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (b->memory ? SQLITE_OPEN_CREATE : 0);
#ifdef SQLITE_OPEN_EXRESCODE
    flags |= SQLITE_OPEN_EXRESCODE;
#endif
    int rc = sqlite3_open_v2(b->path, &c->db, flags, NULL);
    if (rc != SQLITE_OK) {
        rc = sq_error(c->db, c->busy_ms, c->db ? sqlite3_extended_errcode(c->db) : rc, err,
                      "opening the database");
        sq_disconnect(b, c);
        return rc;
    }
    if ((rc = conn_configure(b, c, err)) != 0) {
        sq_disconnect(b, c);
        return rc;
    }
    *out = c;
    return 0;
}

const convo_pool_ops sq_pool_ops = {sq_connect, sq_disconnect};
