/* sqlite.c — the SQLite driver: one database file in WAL mode, shared by the
 * threads of a process through a small pool of connections and by other
 * processes through SQLite's own file locks; every write is one BEGIN IMMEDIATE
 * transaction. The stored layout is described in docs/sqlite.md. */
#include "config.h"
#include <convo/driver.h>
#include <sqlite3.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Version of the stored layout this code writes; see migrations[] below. */
#define SCHEMA_VERSION 1

/* A message's row key is (thread number << 32) | seq, so one thread's messages
 * are one contiguous range of the rowid B-tree. */
#define SEQ_BITS 32
#define MAX_LENGTH INT64_C(0xFFFFFFFF)
#define MAX_THREAD_NUM INT64_C(0x7FFFFFFF)

#define DEFAULT_BUSY_MS 5000
#define DEFAULT_POOL 4
#define MAX_POOL 64

enum stmt_id {
    ST_BEGIN,
    ST_BEGIN_IMMEDIATE,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_THREAD_GET,
    ST_THREAD_GET_EXTRA,
    ST_THREAD_INSERT,
    ST_THREAD_SET_EXTRA,
    ST_THREAD_DELETE,
    ST_THREAD_LIST,
    ST_IDEM_GET,
    ST_IDEM_PUT,
    ST_IDEM_DELETE,
    ST_MSG_INSERT,
    ST_MSG_LAST,
    ST_MSG_RANGE,
    ST_MSG_DELETE,
    ST_MSG_COPY,
    ST_COUNT
};

static const char *const stmt_sql[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN",
    [ST_BEGIN_IMMEDIATE] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_THREAD_GET] = "SELECT num FROM convo_threads WHERE id = ?1",
    [ST_THREAD_GET_EXTRA] = "SELECT num, extra FROM convo_threads WHERE id = ?1",
    [ST_THREAD_INSERT] = "INSERT INTO convo_threads(id, created_at, extra) VALUES(?1, ?2, ?3)",
    [ST_THREAD_SET_EXTRA] = "UPDATE convo_threads SET extra = ?2 WHERE num = ?1",
    [ST_THREAD_DELETE] = "DELETE FROM convo_threads WHERE num = ?1",
    [ST_THREAD_LIST] = "SELECT id FROM convo_threads WHERE id > ?1 ORDER BY id LIMIT ?2",
    [ST_IDEM_GET] = "SELECT first_seq, count FROM convo_idempotency WHERE thread = ?1 AND key = ?2",
    [ST_IDEM_PUT] = "INSERT INTO convo_idempotency(thread, key, first_seq, count, created_at)"
                    " VALUES(?1, ?2, ?3, ?4, ?5)",
    [ST_IDEM_DELETE] = "DELETE FROM convo_idempotency WHERE thread = ?1",
    [ST_MSG_INSERT] = "INSERT INTO convo_messages(key, role, created_at, body)"
                      " VALUES(?1, ?2, ?3, ?4)",
    [ST_MSG_LAST] = "SELECT key FROM convo_messages WHERE key >= ?1 AND key <= ?2"
                    " ORDER BY key DESC LIMIT 1",
    [ST_MSG_RANGE] = "SELECT key, role, created_at, body FROM convo_messages"
                     " WHERE key >= ?1 AND key < ?2 ORDER BY key",
    [ST_MSG_DELETE] = "DELETE FROM convo_messages WHERE key >= ?1 AND key <= ?2",
    [ST_MSG_COPY] = "INSERT INTO convo_messages(key, role, created_at, body)"
                    " SELECT key - ?1 + ?3, role, created_at, body FROM convo_messages"
                    " WHERE key >= ?1 AND key < ?2 ORDER BY key",
};

/* migrations[v] turns a version-v layout into version v+1, in one transaction. */
static const char *const migrations[SCHEMA_VERSION] = {
    "CREATE TABLE IF NOT EXISTS convo_meta("
    "  key TEXT PRIMARY KEY NOT NULL,"
    "  value TEXT NOT NULL) WITHOUT ROWID;"
    "CREATE TABLE convo_threads("
    "  num INTEGER PRIMARY KEY AUTOINCREMENT,"
    "  id TEXT NOT NULL UNIQUE,"
    "  created_at INTEGER NOT NULL,"
    "  extra TEXT);"
    "CREATE TABLE convo_messages("
    "  key INTEGER PRIMARY KEY,"
    "  role TEXT NOT NULL,"
    "  created_at INTEGER NOT NULL,"
    "  body BLOB NOT NULL);"
    "CREATE TABLE convo_idempotency("
    "  thread INTEGER NOT NULL,"
    "  key TEXT NOT NULL,"
    "  first_seq INTEGER NOT NULL,"
    "  count INTEGER NOT NULL,"
    "  created_at INTEGER NOT NULL,"
    "  PRIMARY KEY(thread, key)) WITHOUT ROWID;"
    "CREATE VIEW convo_message_view AS"
    "  SELECT t.id AS thread_id, m.key & 4294967295 AS seq, m.role AS role,"
    "         m.created_at AS created_at, m.body AS body"
    "  FROM convo_messages AS m JOIN convo_threads AS t ON t.num = m.key >> 32;",
};

typedef struct sq_conn {
    sqlite3 *db;
    int busy_ms;
    sqlite3_stmt *stmts[ST_COUNT]; /* prepared on first use, kept until disconnect */
} sq_conn;

struct convo_backend {
    char *path;       /* absolute path of the file, or ":memory:" */
    int memory;       /* one private in-memory database, so one connection */
    int busy_ms;
    int sync_full;    /* PRAGMA synchronous=FULL instead of NORMAL */
    convo_pool *pool; /* of sq_conn */
    convo_limits limits;
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

static int conn_error(sq_conn *c, int rc, convo_error *err, const char *what)
{
    return sq_error(c->db, c->busy_ms, rc, err, what);
}

static int no_memory(convo_error *err)
{
    return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
}

/* ---- statements ---- */

static int stmt_get(sq_conn *c, enum stmt_id id, sqlite3_stmt **out, convo_error *err)
{
    *out = NULL;
    if (!c->stmts[id]) {
        int rc = sqlite3_prepare_v3(c->db, stmt_sql[id], -1, SQLITE_PREPARE_PERSISTENT,
                                    &c->stmts[id], NULL);
        if (rc != SQLITE_OK)
            return conn_error(c, rc, err, "preparing a statement");
    }
    *out = c->stmts[id];
    return 0;
}

/* Makes a statement reusable and drops its pointers to the caller's buffers. */
static void stmt_done(sqlite3_stmt *st)
{
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
}

/* Steps st once: 1 for a row (st left active), 0 when done, < 0 on error;
 * st is reset unless a row is returned. */
static int stmt_step(sq_conn *c, sqlite3_stmt *st, const char *what, convo_error *err)
{
    int rc = sqlite3_step(st);
    if (rc == SQLITE_ROW)
        return 1;
    int out = rc == SQLITE_DONE ? 0 : conn_error(c, rc, err, what);
    stmt_done(st);
    return out;
}

/* Runs a statement that returns no rows. */
static int stmt_run(sq_conn *c, sqlite3_stmt *st, const char *what, convo_error *err)
{
    int rc = stmt_step(c, st, what, err);
    if (rc == 1) {
        stmt_done(st);
        rc = 0;
    }
    return rc;
}

static int exec_id(sq_conn *c, enum stmt_id id, const char *what, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = stmt_get(c, id, &st, err);
    return rc ? rc : stmt_run(c, st, what, err);
}

/* Runs SQL text that is not worth caching (schema changes, pragmas). */
static int exec_sql(sq_conn *c, const char *sql, const char *what, convo_error *err)
{
    int rc = sqlite3_exec(c->db, sql, NULL, NULL, NULL);
    return rc == SQLITE_OK ? 0 : conn_error(c, rc, err, what);
}

static int64_t key_of(int64_t num, int64_t seq)
{
    return (int64_t)((uint64_t)num << SEQ_BITS) + seq;
}

/* ---- rows ---- */

typedef struct thread_row {
    int64_t num, length;
} thread_row;

/* The length of thread num: one past the seq of its last message, found by
 * one seek to the end of its key range, so it costs the same at any length. */
static int thread_length(sq_conn *c, int64_t num, int64_t *length, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = stmt_get(c, ST_MSG_LAST, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, key_of(num, 0));
    sqlite3_bind_int64(st, 2, key_of(num, MAX_LENGTH));
    rc = stmt_step(c, st, "reading a thread's length", err);
    *length = 0;
    if (rc == 1) {
        *length = sqlite3_column_int64(st, 0) - key_of(num, 0) + 1;
        stmt_done(st);
        rc = 0;
    }
    return rc;
}

/* 1 and *t filled when the thread exists, 0 when not, < 0 on error. */
static int thread_find(sq_conn *c, const char *id, thread_row *t, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = stmt_get(c, ST_THREAD_GET, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    rc = stmt_step(c, st, "reading a thread", err);
    if (rc != 1)
        return rc;
    t->num = sqlite3_column_int64(st, 0);
    stmt_done(st);
    return (rc = thread_length(c, t->num, &t->length, err)) ? rc : 1;
}

/* Like thread_find but without the length (t->num only), and *extra gets a
 * malloc'd copy of the extra text (NULL if none). */
static int thread_find_extra(sq_conn *c, const char *id, thread_row *t, char **extra,
                             size_t *extra_len, convo_error *err)
{
    sqlite3_stmt *st;
    *extra = NULL;
    *extra_len = 0;
    int rc = stmt_get(c, ST_THREAD_GET_EXTRA, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    rc = stmt_step(c, st, "reading a thread", err);
    if (rc != 1)
        return rc;
    t->num = sqlite3_column_int64(st, 0);
    int is_null = sqlite3_column_type(st, 1) == SQLITE_NULL;
    const char *text = (const char *)sqlite3_column_text(st, 1);
    size_t len = (size_t)sqlite3_column_bytes(st, 1);
    if (text && (*extra = malloc(len + 1))) {
        memcpy(*extra, text, len);
        (*extra)[len] = '\0';
        *extra_len = len;
    }
    stmt_done(st);
    return !is_null && !*extra ? no_memory(err) : 1;
}

static int thread_insert(sq_conn *c, const char *id, int64_t now, const char *extra,
                         size_t extra_len, int64_t *num, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = stmt_get(c, ST_THREAD_INSERT, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, now);
    if (extra)
        sqlite3_bind_text64(st, 3, extra, extra_len, SQLITE_STATIC, SQLITE_UTF8);
    if ((rc = stmt_run(c, st, "creating a thread", err)) != 0)
        return rc;
    *num = sqlite3_last_insert_rowid(c->db);
    if (*num > MAX_THREAD_NUM)
        return convo__error(err, CONVO_ENOTSUP, NULL,
                            "sqlite: this database has used up its %lld thread numbers",
                            (long long)MAX_THREAD_NUM);
    return 0;
}

static int thread_set_extra(sq_conn *c, int64_t num, const char *extra, size_t extra_len,
                            convo_error *err)
{
    sqlite3_stmt *st;
    int rc = stmt_get(c, ST_THREAD_SET_EXTRA, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, num);
    sqlite3_bind_text64(st, 2, extra, extra_len, SQLITE_STATIC, SQLITE_UTF8);
    return stmt_run(c, st, "saving extra", err);
}

/* 1 and res filled when key was used on this thread, 0 when not, < 0 on error. */
static int idem_find(sq_conn *c, int64_t num, const char *key, convo_append_result *res,
                     convo_error *err)
{
    sqlite3_stmt *st;
    int rc = stmt_get(c, ST_IDEM_GET, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, num);
    sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
    rc = stmt_step(c, st, "reading an idempotency key", err);
    if (rc == 1) {
        res->first_seq = sqlite3_column_int64(st, 0);
        res->count = (size_t)sqlite3_column_int64(st, 1);
        res->replayed = 1;
        stmt_done(st);
    }
    return rc;
}

static int idem_put(sq_conn *c, int64_t num, const char *key, int64_t first, size_t n,
                    int64_t now, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = stmt_get(c, ST_IDEM_PUT, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, num);
    sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, first);
    sqlite3_bind_int64(st, 4, (int64_t)n);
    sqlite3_bind_int64(st, 5, now);
    return stmt_run(c, st, "storing an idempotency key", err);
}

/* created_at: one time per message, or NULL to stamp them all with now. */
static int messages_insert(sq_conn *c, int64_t num, int64_t first, const convo_message_in *msgs,
                           size_t n, int64_t now, const int64_t *created_at, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = stmt_get(c, ST_MSG_INSERT, &st, err);
    for (size_t i = 0; i < n && rc == 0; i++) {
        sqlite3_bind_int64(st, 1, key_of(num, first + (int64_t)i));
        sqlite3_bind_text(st, 2, msgs[i].role, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 3, created_at ? created_at[i] : now);
        /* a BLOB, so the bytes come back exactly as given */
        sqlite3_bind_blob64(st, 4, msgs[i].len ? msgs[i].bytes : "", msgs[i].len, SQLITE_STATIC);
        rc = stmt_run(c, st, "storing a message", err);
    }
    return rc;
}

/* Runs statement id with its first nargs parameters bound to a, b and d. */
static int run_with_ints(sq_conn *c, enum stmt_id id, int nargs, int64_t a, int64_t b,
                         int64_t d, const char *what, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = stmt_get(c, id, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, a);
    if (nargs > 1)
        sqlite3_bind_int64(st, 2, b);
    if (nargs > 2)
        sqlite3_bind_int64(st, 3, d);
    return stmt_run(c, st, what, err);
}

/* ---- transactions ---- */

typedef int (*tx_body)(sq_conn *c, void *arg, convo_error *err);

/* Runs body inside BEGIN [IMMEDIATE] ... COMMIT on a pooled connection; any
 * failure rolls everything back, so a call writes all or nothing. */
static int run_tx(convo_backend *b, int write, tx_body body, void *arg, convo_error *err)
{
    void *p;
    int rc = convo__pool_acquire(b->pool, &p, err);
    if (rc)
        return rc;
    sq_conn *c = p;
    rc = exec_id(c, write ? ST_BEGIN_IMMEDIATE : ST_BEGIN, "starting a transaction", err);
    if (rc == 0) {
        rc = body(c, arg, err);
        if (rc == 0)
            rc = exec_id(c, ST_COMMIT, "committing", err);
        if (rc != 0 && !sqlite3_get_autocommit(c->db))
            exec_id(c, ST_ROLLBACK, "rolling back", NULL);
    }
    /* a connection stuck in a transaction would block every other writer */
    int broken = !b->memory && !sqlite3_get_autocommit(c->db);
    convo__pool_release(b->pool, c, broken);
    return rc;
}

/* ---- append ---- */

typedef struct append_args {
    const char *thread_id;
    const convo_message_in *msgs;
    size_t n;
    const convo_append_opts *opts;
    convo_append_result *res;
} append_args;

static int append_tx(sq_conn *c, void *arg, convo_error *err)
{
    append_args *a = arg;
    const char *key = a->opts->idempotency_key;
    thread_row t = {0, 0};
    int found = thread_find(c, a->thread_id, &t, err);
    if (found < 0)
        return found;
    int rc;
    if (found && key && (rc = idem_find(c, t.num, key, a->res, err)) != 0)
        return rc < 0 ? rc : 0; /* a retry: report the original batch */
    if (a->opts->expected_length >= 0 && a->opts->expected_length != t.length)
        return convo__error(err, CONVO_ECONFLICT, NULL, "thread has %lld messages, expected %lld",
                            (long long)t.length, (long long)a->opts->expected_length);
    if (t.length + (int64_t)a->n > MAX_LENGTH)
        return convo__error(err, CONVO_ETOOLARGE, NULL,
                            "sqlite: a thread holds at most %lld messages",
                            (long long)MAX_LENGTH);
    int64_t now = convo__now_micros();
    rc = found ? 0 : thread_insert(c, a->thread_id, now, NULL, 0, &t.num, err);
    if (rc == 0)
        rc = messages_insert(c, t.num, t.length, a->msgs, a->n, now, NULL, err);
    if (rc == 0 && key)
        rc = idem_put(c, t.num, key, t.length, a->n, now, err);
    if (rc == 0) {
        a->res->first_seq = t.length;
        a->res->count = a->n;
        a->res->replayed = 0;
    }
    return rc;
}

static int sq_append(convo_backend *b, const char *thread_id, const convo_message_in *msgs,
                     size_t n, const convo_append_opts *opts, convo_append_result *res,
                     convo_error *err)
{
    append_args a = {thread_id, msgs, n, opts, res};
    return run_tx(b, 1, append_tx, &a, err);
}

/* ---- load ---- */

typedef struct load_args {
    const char *thread_id;
    const convo_load_opts *opts;
    convo_history *h;
} load_args;

/* Adds messages [from, to) of thread num to h, checking that none is missing. */
static int load_range(sq_conn *c, int64_t num, int64_t from, int64_t to, convo_history *h,
                      convo_error *err)
{
    sqlite3_stmt *st;
    int rc = stmt_get(c, ST_MSG_RANGE, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, key_of(num, from));
    sqlite3_bind_int64(st, 2, key_of(num, to));
    int64_t seq = from;
    while ((rc = stmt_step(c, st, "loading messages", err)) == 1) {
        const char *role = (const char *)sqlite3_column_text(st, 1);
        const void *body = sqlite3_column_blob(st, 3);
        size_t len = (size_t)sqlite3_column_bytes(st, 3);
        if (sqlite3_column_int64(st, 0) != key_of(num, seq) || !role) {
            stmt_done(st);
            return convo__error(err, CONVO_ECORRUPT, NULL,
                                "sqlite: message %lld of the thread is missing or damaged",
                                (long long)seq);
        }
        if (convo__history_add(h, body ? body : "", len, role, seq,
                               sqlite3_column_int64(st, 2)) != 0) {
            stmt_done(st);
            return no_memory(err);
        }
        seq++;
    }
    if (rc == 0 && seq != to)
        rc = convo__error(err, CONVO_ECORRUPT, NULL,
                          "sqlite: thread should have %lld messages but has %lld", (long long)to,
                          (long long)seq);
    return rc;
}

static int load_tx(sq_conn *c, void *arg, convo_error *err)
{
    load_args *a = arg;
    thread_row t;
    char *extra = NULL;
    size_t extra_len = 0;
    int rc = a->opts->with_extra ? thread_find_extra(c, a->thread_id, &t, &extra, &extra_len, err)
                                 : thread_find(c, a->thread_id, &t, err);
    if (rc <= 0)
        return rc < 0 ? rc : convo__error(err, CONVO_ENOTFOUND, NULL, "thread not found");
    rc = extra && convo__history_set_extra(a->h, extra, extra_len) != 0 ? no_memory(err) : 0;
    free(extra);
    if (rc == 0 && a->opts->with_extra)
        rc = thread_length(c, t.num, &t.length, err);
    if (rc)
        return rc;
    int64_t from, to;
    convo__load_range(a->opts, t.length, &from, &to);
    convo__history_set_length(a->h, t.length);
    if (convo__history_reserve(a->h, (size_t)(to - from)) != 0)
        return no_memory(err);
    return from < to ? load_range(c, t.num, from, to, a->h, err) : 0;
}

static int sq_load(convo_backend *b, const char *thread_id, const convo_load_opts *opts,
                   convo_history **out, convo_error *err)
{
    load_args a = {thread_id, opts, convo__history_new()};
    if (!a.h)
        return no_memory(err);
    int rc = run_tx(b, 0, load_tx, &a, err);
    if (rc) {
        convo_history_free(a.h);
        return rc;
    }
    *out = a.h;
    return 0;
}

/* ---- extra ---- */

typedef struct extra_args {
    convo_backend *b;
    const char *thread_id;
    const char *patch;
} extra_args;

/* Reads, merges and writes back in one write transaction, so concurrent
 * patches with different keys all survive. */
static int save_extra_tx(sq_conn *c, void *arg, convo_error *err)
{
    extra_args *a = arg;
    thread_row t;
    char *current, *merged;
    size_t current_len, merged_len;
    int found = thread_find_extra(c, a->thread_id, &t, &current, &current_len, err);
    if (found < 0)
        return found;
    int rc = convo__extra_merge(current, current_len, a->patch, a->b->limits.max_extra_bytes,
                                &merged, &merged_len, err);
    free(current);
    if (rc)
        return rc;
    rc = found ? thread_set_extra(c, t.num, merged, merged_len, err)
               : thread_insert(c, a->thread_id, convo__now_micros(), merged, merged_len, &t.num,
                               err);
    free(merged);
    return rc;
}

static int sq_save_extra(convo_backend *b, const char *thread_id, const char *patch,
                         void *patch_obj, convo_error *err)
{
    extra_args a = {b, thread_id, patch};
    return run_tx(b, 1, save_extra_tx, &a, err);
}

/* ---- threads ---- */

static int delete_tx(sq_conn *c, void *arg, convo_error *err)
{
    thread_row t;
    int rc = thread_find(c, arg, &t, err);
    if (rc <= 0)
        return rc < 0 ? rc : convo__error(err, CONVO_ENOTFOUND, NULL, "thread not found");
    rc = run_with_ints(c, ST_MSG_DELETE, 2, key_of(t.num, 0), key_of(t.num, MAX_LENGTH), 0,
                       "deleting messages", err);
    if (rc == 0)
        rc = run_with_ints(c, ST_IDEM_DELETE, 1, t.num, 0, 0, "deleting idempotency keys", err);
    if (rc == 0)
        rc = run_with_ints(c, ST_THREAD_DELETE, 1, t.num, 0, 0, "deleting a thread", err);
    return rc;
}

static int sq_thread_delete(convo_backend *b, const char *thread_id, convo_error *err)
{
    return run_tx(b, 1, delete_tx, (void *)thread_id, err);
}

typedef struct list_args {
    const char *after;
    size_t limit;
    convo_thread_page *p;
} list_args;

static int list_tx(sq_conn *c, void *arg, convo_error *err)
{
    list_args *a = arg;
    sqlite3_stmt *st;
    int rc = stmt_get(c, ST_THREAD_LIST, &st, err);
    if (rc)
        return rc;
    /* every id is non-empty, so "" sorts before all of them */
    sqlite3_bind_text(st, 1, a->after ? a->after : "", -1, SQLITE_STATIC);
    /* one row more than asked tells whether a next page exists */
    sqlite3_bind_int64(st, 2, (int64_t)a->limit + 1);
    size_t rows = 0;
    while ((rc = stmt_step(c, st, "listing threads", err)) == 1) {
        if (++rows > a->limit)
            continue;
        const char *id = (const char *)sqlite3_column_text(st, 0);
        if (!id || convo__thread_page_add(a->p, id, (size_t)sqlite3_column_bytes(st, 0)) != 0) {
            stmt_done(st);
            return no_memory(err);
        }
    }
    if (rc == 0 && rows > a->limit &&
        convo__thread_page_set_next(a->p, convo_thread_page_id(a->p, a->limit - 1)) != 0)
        rc = no_memory(err);
    return rc;
}

static int sq_thread_list(convo_backend *b, const char *after, size_t limit,
                          convo_thread_page **out, convo_error *err)
{
    list_args a = {after, limit, convo__thread_page_new()};
    if (!a.p)
        return no_memory(err);
    int rc = run_tx(b, 0, list_tx, &a, err);
    if (rc) {
        convo_thread_page_free(a.p);
        return rc;
    }
    *out = a.p;
    return 0;
}

typedef struct fork_args {
    const char *src, *dst;
    int64_t upto;
} fork_args;

/* The destination must be new and upto within the source (whose length it fills). */
static int fork_check(sq_conn *c, const fork_args *a, thread_row *s, convo_error *err)
{
    thread_row d;
    int rc = thread_length(c, s->num, &s->length, err);
    if (rc == 0 && (rc = thread_find(c, a->dst, &d, err)) > 0)
        rc = convo__error(err, CONVO_ECONFLICT, NULL, "destination thread already exists");
    if (rc == 0 && a->upto > s->length)
        rc = convo__error(err, CONVO_EINVAL, NULL, "fork upto %lld is past the end (%lld)",
                          (long long)a->upto, (long long)s->length);
    return rc;
}

static int fork_tx(sq_conn *c, void *arg, convo_error *err)
{
    fork_args *a = arg;
    thread_row s;
    int64_t dst;
    char *extra;
    size_t extra_len;
    int rc = thread_find_extra(c, a->src, &s, &extra, &extra_len, err);
    if (rc <= 0)
        return rc < 0 ? rc : convo__error(err, CONVO_ENOTFOUND, NULL, "source thread not found");
    rc = fork_check(c, a, &s, err);
    int64_t n = a->upto < 0 ? s.length : a->upto;
    if (rc == 0)
        rc = thread_insert(c, a->dst, convo__now_micros(), extra, extra_len, &dst, err);
    free(extra);
    if (rc == 0 && n > 0)
        rc = run_with_ints(c, ST_MSG_COPY, 3, key_of(s.num, 0), key_of(s.num, n), key_of(dst, 0),
                           "copying messages", err);
    return rc;
}

static int sq_thread_fork(convo_backend *b, const char *src, const char *dst, int64_t upto,
                          convo_error *err)
{
    fork_args a = {src, dst, upto};
    return run_tx(b, 1, fork_tx, &a, err);
}

/* ---- restoring a dump ---- */

typedef struct import_args {
    const char *thread_id;
    int64_t first_seq;
    const convo_message_in *msgs;
    const int64_t *created_at;
    size_t n;
    int *skipped;
} import_args;

static int import_tx(sq_conn *c, void *arg, convo_error *err)
{
    import_args *a = arg;
    thread_row t = {0, 0};
    int found = thread_find(c, a->thread_id, &t, err);
    if (found < 0)
        return found;
    *a->skipped = t.length >= a->first_seq + (int64_t)a->n; /* the same dump again */
    if (*a->skipped)
        return 0;
    if (t.length != a->first_seq)
        return convo__error(err, CONVO_ECONFLICT, NULL,
                            "thread has %lld messages, the dump continues at %lld",
                            (long long)t.length, (long long)a->first_seq);
    if (t.length + (int64_t)a->n > MAX_LENGTH)
        return convo__error(err, CONVO_ETOOLARGE, NULL,
                            "sqlite: a thread holds at most %lld messages", (long long)MAX_LENGTH);
    int64_t now = convo__now_micros();
    int rc = found ? 0 : thread_insert(c, a->thread_id, now, NULL, 0, &t.num, err);
    return rc ? rc : messages_insert(c, t.num, t.length, a->msgs, a->n, now, a->created_at, err);
}

static int sq_thread_import(convo_backend *b, const char *thread_id, int64_t first_seq,
                            const convo_message_in *msgs, const int64_t *created_at, size_t n,
                            int *skipped, convo_error *err)
{
    import_args a = {thread_id, first_seq, msgs, created_at, n, skipped};
    *skipped = 0;
    return run_tx(b, 1, import_tx, &a, err);
}

/* ---- measuring ---- */

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* n transactions of one bare INSERT each into a scratch table, dropped after. */
static int bench_on(sq_conn *c, const char *table, const char *payload, size_t len, size_t n,
                    double *seconds, convo_error *err)
{
    char sql[128];
    sqlite3_stmt *ins = NULL;
    snprintf(sql, sizeof sql, "INSERT INTO %s(body) VALUES(?1)", table);
    int rc = sqlite3_prepare_v2(c->db, sql, -1, &ins, NULL);
    if (rc != SQLITE_OK)
        return conn_error(c, rc, err, "preparing the benchmark");
    double t0 = seconds_now();
    int out = 0;
    for (size_t i = 0; i < n && out == 0; i++) {
        out = exec_id(c, ST_BEGIN_IMMEDIATE, "starting a transaction", err);
        if (out == 0) {
            sqlite3_bind_blob64(ins, 1, payload, len, SQLITE_STATIC);
            out = stmt_run(c, ins, "inserting", err);
        }
        if (out == 0)
            out = exec_id(c, ST_COMMIT, "committing", err);
    }
    *seconds = seconds_now() - t0;
    sqlite3_finalize(ins);
    if (!sqlite3_get_autocommit(c->db))
        exec_id(c, ST_ROLLBACK, "rolling back", NULL);
    return out;
}

static int sq_bench_raw(convo_backend *b, const char *payload, size_t payload_len, size_t n,
                        double *seconds, convo_error *err)
{
    void *p;
    int rc = convo__pool_acquire(b->pool, &p, err);
    if (rc)
        return rc;
    sq_conn *c = p;
    char table[64], sql[128];
    snprintf(table, sizeof table, "convo_bench_scratch_%ld", (long)getpid());
    snprintf(sql, sizeof sql, "CREATE TABLE IF NOT EXISTS %s(id INTEGER PRIMARY KEY, body BLOB)",
             table);
    rc = exec_sql(c, sql, "creating the benchmark table", err);
    if (rc == 0) {
        rc = bench_on(c, table, payload, payload_len, n, seconds, err);
        snprintf(sql, sizeof sql, "DROP TABLE IF EXISTS %s", table);
        int dropped = exec_sql(c, sql, "dropping the benchmark table", err);
        rc = rc ? rc : dropped;
    }
    convo__pool_release(b->pool, c, !b->memory && !sqlite3_get_autocommit(c->db));
    return rc;
}

static int pragma_int(sq_conn *c, const char *sql, int64_t *out, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(c->db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        *out = sqlite3_column_int64(st, 0);
        rc = SQLITE_OK;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_OK ? 0 : conn_error(c, rc, err, "reading the database size");
}

/* The size of the database once the WAL is checkpointed into it: pages x page size. */
static int sq_stored_bytes(convo_backend *b, int64_t *bytes, convo_error *err)
{
    void *p;
    int rc = convo__pool_acquire(b->pool, &p, err);
    if (rc)
        return rc;
    sq_conn *c = p;
    int64_t pages = 0, page_size = 0;
    if (!b->memory)
        sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_PASSIVE, NULL, NULL);
    rc = pragma_int(c, "PRAGMA page_count", &pages, err);
    if (rc == 0)
        rc = pragma_int(c, "PRAGMA page_size", &page_size, err);
    convo__pool_release(b->pool, c, false);
    if (rc == 0)
        *bytes = pages * page_size;
    return rc;
}

/* ---- schema ---- */

/* The layout version stored in the file; 0 for a file convo never touched. */
static int schema_version(sq_conn *c, int *version, convo_error *err)
{
    static const char sql[] =
        "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'convo_meta'";
    static const char read_sql[] = "SELECT value FROM convo_meta WHERE key = 'schema_version'";
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(c->db, sql, -1, &st, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW)
        rc = SQLITE_OK;
    int has_meta = rc == SQLITE_OK && sqlite3_column_int(st, 0) > 0;
    sqlite3_finalize(st);
    *version = 0;
    if (rc != SQLITE_OK || !has_meta)
        return rc == SQLITE_OK ? 0 : conn_error(c, rc, err, "reading the schema version");
    if ((rc = sqlite3_prepare_v2(c->db, read_sql, -1, &st, NULL)) == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
            *version = sqlite3_column_int(st, 0);
        rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_OK ? 0 : conn_error(c, rc, err, "reading the schema version");
}

static int too_new(int version, convo_error *err)
{
    return convo__error(err, CONVO_ENOTSUP, NULL,
                        "sqlite: the database has convo schema version %d, newer than the %d this"
                        " libconvo understands; use a newer libconvo",
                        version, SCHEMA_VERSION);
}

/* Applies the missing migrations under the write lock; another process may
 * have done it meanwhile, so the version is read again once locked. */
static int migrate_locked(sq_conn *c, convo_error *err)
{
    int version;
    int rc = schema_version(c, &version, err);
    if (rc)
        return rc;
    if (version > SCHEMA_VERSION)
        return too_new(version, err);
    for (; version < SCHEMA_VERSION && rc == 0; version++)
        rc = exec_sql(c, migrations[version], "migrating the schema", err);
    if (rc)
        return rc;
    char sql[96];
    snprintf(sql, sizeof sql,
             "INSERT OR REPLACE INTO convo_meta(key, value) VALUES('schema_version', '%d')",
             SCHEMA_VERSION);
    return exec_sql(c, sql, "recording the schema version", err);
}

static int migrate(sq_conn *c, convo_error *err)
{
    int version;
    int rc = schema_version(c, &version, err);
    if (rc || version == SCHEMA_VERSION)
        return rc;
    if (version > SCHEMA_VERSION)
        return too_new(version, err);
    if ((rc = exec_sql(c, "BEGIN IMMEDIATE", "locking the database to migrate it", err)) != 0)
        return rc;
    rc = migrate_locked(c, err);
    rc = rc ? rc : exec_sql(c, "COMMIT", "committing the migration", err);
    if (rc)
        sqlite3_exec(c->db, "ROLLBACK", NULL, NULL, NULL);
    return rc;
}

/* ---- connections ---- */

/* One attempt at PRAGMA journal_mode=WAL: SQLITE_OK once the file is in WAL
 * mode, SQLITE_DONE when SQLite refused the mode, else the error code. */
static int try_wal(sq_conn *c)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(c->db, "PRAGMA journal_mode=WAL", -1, &st, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW) {
        const char *mode = (const char *)sqlite3_column_text(st, 0);
        rc = mode && strcasecmp(mode, "wal") == 0 ? SQLITE_OK : SQLITE_DONE;
    }
    sqlite3_finalize(st);
    return rc;
}

/* Switching a new file to WAL needs an exclusive lock and SQLite answers BUSY
 * at once, without the busy handler, while another process holds any lock on
 * it (as when several open a new file together): retry up to busy_timeout. */
static int set_wal(sq_conn *c, convo_error *err)
{
    static const int delays[] = {1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50, 100};
    int waited = 0, rc, i = 0;
    while (((rc = try_wal(c)) & 0xff) == SQLITE_BUSY && waited < c->busy_ms) {
        int ms = delays[i < 11 ? i++ : 11];
        ms = ms < c->busy_ms - waited ? ms : c->busy_ms - waited;
        sqlite3_sleep(ms);
        waited += ms;
    }
    if (rc == SQLITE_DONE)
        return convo__error(err, CONVO_ENOTSUP, NULL,
                            "sqlite: the database could not be switched to WAL mode (a network"
                            " or read-only filesystem?)");
    return rc == SQLITE_OK ? 0 : conn_error(c, rc, err, "switching to WAL mode");
}

static int conn_configure(convo_backend *b, sq_conn *c, convo_error *err)
{
    sqlite3_extended_result_codes(c->db, 1);
    sqlite3_busy_timeout(c->db, b->busy_ms);
#ifdef SQLITE_DBCONFIG_DEFENSIVE
    sqlite3_db_config(c->db, SQLITE_DBCONFIG_DEFENSIVE, 1, (int *)NULL);
#endif
    int rc = b->memory ? 0 : set_wal(c, err);
    if (rc == 0)
        rc = exec_sql(c, b->sync_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL",
                      "setting synchronous", err);
    return rc ? rc : migrate(c, err);
}

static void sq_disconnect(void *ctx, void *conn)
{
    sq_conn *c = conn;
    for (int i = 0; i < ST_COUNT; i++)
        sqlite3_finalize(c->stmts[i]);
    sqlite3_close(c->db);
    free(c);
}

static int sq_connect(void *ctx, void **out, convo_error *err)
{
    convo_backend *b = ctx;
    sq_conn *c = calloc(1, sizeof *c);
    if (!c)
        return no_memory(err);
    c->busy_ms = b->busy_ms;
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

static const convo_pool_ops sq_pool_ops = {sq_connect, sq_disconnect};

/* ---- opening ---- */

static int hexval(int ch)
{
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* The file name from the URL: "sqlite:PATH" or "sqlite://PATH" (so
 * "sqlite:///abs" is "/abs"), percent-decoded. */
static int url_path(const convo_url *url, char **out, convo_error *err)
{
    const char *s = url->rest;
    if (strncmp(s, "//", 2) == 0)
        s += 2;
    size_t n = strlen(s);
    char *path = malloc(n + 1), *o = path;
    if (!path)
        return no_memory(err);
    for (size_t i = 0; i < n; i++) {
        int hi, lo;
        if (s[i] != '%') {
            *o++ = s[i];
        } else if (i + 2 < n && (hi = hexval((unsigned char)s[i + 1])) >= 0 &&
                   (lo = hexval((unsigned char)s[i + 2])) >= 0 && (hi | lo) != 0) {
            *o++ = (char)(hi * 16 + lo);
            i += 2;
        } else {
            free(path);
            return convo__error(err, CONVO_EINVAL, NULL, "sqlite: bad %%-escape in the path");
        }
    }
    *o = '\0';
    if (!*path) {
        free(path);
        return convo__error(err, CONVO_EINVAL, NULL,
                            "sqlite: a path is needed, e.g. sqlite:convo.db or sqlite::memory:");
    }
    *out = path;
    return 0;
}

/* Creates the file mode 0600 if it does not exist yet; an existing file keeps
 * its mode. SQLite then creates -wal and -shm with the mode of this file. */
static int create_private(const char *path, convo_error *err)
{
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        if (errno == EEXIST)
            return 0;
        return convo__error(err, CONVO_EIO, NULL, "sqlite: cannot create %s: %s", path,
                            strerror(errno));
    }
    /* the umask may have taken bits off 0600; the file is ours and empty */
    int rc = fchmod(fd, 0600) != 0 ? convo__error(err, CONVO_EIO, NULL,
                                                  "sqlite: cannot chmod %s: %s", path,
                                                  strerror(errno))
                                   : 0;
    close(fd);
    return rc;
}

/* Integer parameter key in [min, max], def when absent. */
static int int_param(convo_url *url, const char *key, long min, long max, long def, int *out,
                     convo_error *err)
{
    char *v = convo__url_take(url, key), *end;
    if (!v) {
        *out = (int)def;
        return 0;
    }
    errno = 0;
    long n = strtol(v, &end, 10);
    int ok = *v && !*end && errno == 0 && n >= min && n <= max;
    free(v);
    if (!ok)
        return convo__error(err, CONVO_EINVAL, NULL, "sqlite: %s must be an integer in %ld..%ld",
                            key, min, max);
    *out = (int)n;
    return 0;
}

static int sync_param(convo_url *url, int *full, convo_error *err)
{
    char *v = convo__url_take(url, "synchronous");
    int rc = 0;
    *full = 0;
    if (v && strcasecmp(v, "full") == 0)
        *full = 1;
    else if (v && strcasecmp(v, "normal") != 0)
        rc = convo__error(err, CONVO_EINVAL, NULL, "sqlite: synchronous must be normal or full");
    free(v);
    return rc;
}

static int parse_params(convo_backend *b, convo_url *url, int *pool, convo_error *err)
{
    int rc = int_param(url, "busy_timeout", 0, INT_MAX, DEFAULT_BUSY_MS, &b->busy_ms, err);
    if (rc == 0)
        rc = int_param(url, "pool", 1, MAX_POOL, DEFAULT_POOL, pool, err);
    if (rc == 0)
        rc = sync_param(url, &b->sync_full, err);
    return rc ? rc : convo__url_reject_rest(url, err);
}

/* Resolves the path once, so a later chdir() cannot point new connections elsewhere. */
static int set_path(convo_backend *b, char *path, convo_error *err)
{
    if (strcmp(path, ":memory:") == 0) {
        b->memory = 1;
        b->path = path;
        return 0;
    }
    int rc = create_private(path, err);
    if (rc == 0 && !(b->path = realpath(path, NULL)))
        rc = convo__error(err, CONVO_EIO, NULL, "sqlite: cannot resolve %s: %s", path,
                          strerror(errno));
    free(path);
    return rc;
}

static void sq_close(convo_backend *b)
{
    convo__pool_free(b->pool);
    free(b->path);
    free(b);
}

static int sq_open(convo_backend **out, convo_url *url, const convo_limits *limits,
                   convo_error *err)
{
    if (!sqlite3_threadsafe())
        return convo__error(err, CONVO_ENOTSUP, NULL,
                            "sqlite: the SQLite library was built without thread support");
    convo_backend *b = calloc(1, sizeof *b);
    if (!b)
        return no_memory(err);
    b->limits = *limits;
    char *path = NULL;
    int pool = DEFAULT_POOL;
    int rc = parse_params(b, url, &pool, err);
    if (rc == 0 && (rc = url_path(url, &path, err)) == 0)
        rc = set_path(b, path, err);
    if (rc == 0 && convo__pool_new(&b->pool, b->memory ? 1 : (size_t)pool, &sq_pool_ops, b) != 0)
        rc = no_memory(err);
    void *first;
    /* open one connection now: a bad file or a too-new schema fails here */
    if (rc == 0 && (rc = convo__pool_acquire(b->pool, &first, err)) == 0)
        convo__pool_release(b->pool, first, false);
    if (rc) {
        sq_close(b);
        return rc;
    }
    *out = b;
    return 0;
}

static const char *const sq_schemes[] = {"sqlite", NULL};

const convo_driver convo_driver_sqlite = {
    .version = CONVO_DRIVER_VERSION,
    .name = "sqlite",
    .schemes = sq_schemes,
    .open = sq_open,
    .close = sq_close,
    .append = sq_append,
    .load = sq_load,
    .save_extra = sq_save_extra,
    .thread_delete = sq_thread_delete,
    .thread_list = sq_thread_list,
    .thread_fork = sq_thread_fork,
    .bench_raw = sq_bench_raw,
    .stored_bytes = sq_stored_bytes,
    .thread_import = sq_thread_import,
};
