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
#define SCHEMA_VERSION 3

/* A message's row key is (thread number << 32) | seq, and a checkpoint's is
 * (thread number << 32) | its position in put order, so one thread's rows are
 * one contiguous range of each rowid B-tree. A checkpoint's put_order is its
 * place in the order of first put across the whole store. */
#define SEQ_BITS 32
#define MAX_LENGTH INT64_C(0xFFFFFFFF)
#define MAX_THREAD_NUM INT64_C(0x7FFFFFFF)

#define DEFAULT_BUSY_MS 5000
#define DEFAULT_POOL 4
#define MAX_POOL 64
#define SWEEP_BATCH 64 /* expired threads removed per write transaction */

enum stmt_id {
    ST_BEGIN,
    ST_BEGIN_IMMEDIATE,
    ST_COMMIT,
    ST_ROLLBACK,
    ST_THREAD_GET,
    ST_THREAD_INSERT,
    ST_THREAD_SET_EXTRA,
    ST_THREAD_SET_EXPIRY,
    ST_THREAD_DELETE,
    ST_THREAD_LIST,
    ST_THREAD_EXPIRED,
    ST_IDEM_GET,
    ST_IDEM_PUT,
    ST_IDEM_DELETE,
    ST_MSG_INSERT,
    ST_MSG_LAST,
    ST_MSG_RANGE,
    ST_MSG_DELETE,
    ST_MSG_COPY,
    ST_CP_FIND,
    ST_CP_LAST,
    ST_CP_LAST_ORDER,
    ST_CP_PUT,
    ST_CP_GET,
    ST_CP_LATEST,
    ST_CP_LIST_THREAD,
    ST_CP_LIST_ALL,
    ST_CP_LIST_ALL_BEFORE,
    ST_CP_KEYS,
    ST_CP_DELETE,
    ST_CH_INSERT,
    ST_CH_VALUES,
    ST_CH_DELETE,
    ST_BLOB_PUT,
    ST_BLOB_DELETE,
    ST_BLOB_UNUSED,
    ST_WRITE_KEEP,
    ST_WRITE_REPLACE,
    ST_WRITE_LIST,
    ST_WRITE_DELETE,
    ST_COUNT
};

/* The columns of a checkpoint row, in the order cp_from_row() reads them. */
#define CP_COLUMNS "c.key, c.ns, c.id, c.parent_id, c.metadata, c.body_type, c.body," \
                   " c.log_length, c.created_at"

/* Every thread's checkpoints, expired threads left out, with the thread id as
 * column 9; CROSS JOIN keeps the put_order index the outer loop, so that
 * "ORDER BY c.put_order DESC" walks it (newest first) without sorting. */
#define CP_LIST_ALL "SELECT " CP_COLUMNS ", t.id FROM convo_checkpoints AS c" \
                    " CROSS JOIN convo_threads AS t ON t.num = c.thread" \
                    " WHERE (t.expires_at IS NULL OR t.expires_at > ?1)" \
                    " AND (?2 IS NULL OR +c.ns = ?2)"

static const char *const stmt_sql[ST_COUNT] = {
    [ST_BEGIN] = "BEGIN",
    [ST_BEGIN_IMMEDIATE] = "BEGIN IMMEDIATE",
    [ST_COMMIT] = "COMMIT",
    [ST_ROLLBACK] = "ROLLBACK",
    [ST_THREAD_GET] = "SELECT num, expires_at, extra FROM convo_threads WHERE id = ?1",
    [ST_THREAD_INSERT] = "INSERT INTO convo_threads(id, created_at, extra, expires_at)"
                         " VALUES(?1, ?2, ?3, ?4)",
    [ST_THREAD_SET_EXTRA] = "UPDATE convo_threads SET extra = ?2 WHERE num = ?1",
    [ST_THREAD_SET_EXPIRY] = "UPDATE convo_threads SET expires_at = ?2 WHERE num = ?1",
    [ST_THREAD_DELETE] = "DELETE FROM convo_threads WHERE num = ?1",
    [ST_THREAD_LIST] = "SELECT id FROM convo_threads WHERE id > ?1"
                       " AND (expires_at IS NULL OR expires_at > ?3) ORDER BY id LIMIT ?2",
    [ST_THREAD_EXPIRED] = "SELECT num FROM convo_threads WHERE expires_at <= ?1 LIMIT ?2",
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
    [ST_CP_FIND] = "SELECT key, created_at, put_order FROM convo_checkpoints"
                   " WHERE thread = ?1 AND ns = ?2 AND id = ?3",
    [ST_CP_LAST] = "SELECT key FROM convo_checkpoints WHERE key >= ?1 AND key <= ?2"
                   " ORDER BY key DESC LIMIT 1",
    /* one seek to the end of the put_order index */
    [ST_CP_LAST_ORDER] = "SELECT max(put_order) FROM convo_checkpoints",
    /* a replaced checkpoint keeps its key and put_order (its places in the
     * orders) and created_at */
    [ST_CP_PUT] = "INSERT OR REPLACE INTO convo_checkpoints(key, thread, ns, id, parent_id,"
                  " metadata, body_type, body, log_length, created_at, put_order)"
                  " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
    [ST_CP_GET] = "SELECT " CP_COLUMNS " FROM convo_checkpoints AS c"
                  " WHERE c.thread = ?1 AND c.ns = ?2 AND c.id = ?3",
    /* newest first along the key range; "+" keeps the planner on that range */
    [ST_CP_LATEST] = "SELECT " CP_COLUMNS " FROM convo_checkpoints AS c"
                     " WHERE c.key >= ?1 AND c.key <= ?2 AND +c.ns = ?3"
                     " ORDER BY c.key DESC LIMIT 1",
    /* ?4: only those put before that put_order (NULL: all) */
    [ST_CP_LIST_THREAD] = "SELECT " CP_COLUMNS " FROM convo_checkpoints AS c"
                          " WHERE c.key >= ?1 AND c.key < ?2 AND (?3 IS NULL OR +c.ns = ?3)"
                          " AND (?4 IS NULL OR +c.put_order < ?4) ORDER BY c.key DESC",
    [ST_CP_LIST_ALL] = CP_LIST_ALL " ORDER BY c.put_order DESC",
    /* the same from put_order ?3 down, one range of the index */
    [ST_CP_LIST_ALL_BEFORE] = CP_LIST_ALL " AND c.put_order < ?3 ORDER BY c.put_order DESC",
    [ST_CP_KEYS] = "SELECT key, ns FROM convo_checkpoints WHERE key >= ?1 AND key <= ?2"
                   " ORDER BY key DESC",
    [ST_CP_DELETE] = "DELETE FROM convo_checkpoints WHERE key >= ?1 AND key <= ?2",
    [ST_CH_INSERT] = "INSERT INTO convo_checkpoint_channels(checkpoint, channel, version)"
                     " VALUES(?1, ?2, ?3)",
    /* every channel of the snapshot with its value, wherever it was first written */
    [ST_CH_VALUES] = "SELECT ch.channel, ch.version, b.type, b.value"
                     " FROM convo_checkpoint_channels AS ch LEFT JOIN convo_blobs AS b"
                     " ON b.thread = ?2 AND b.ns = ?3 AND b.channel = ch.channel"
                     " AND b.version = ch.version WHERE ch.checkpoint = ?1",
    [ST_CH_DELETE] = "DELETE FROM convo_checkpoint_channels"
                     " WHERE checkpoint >= ?1 AND checkpoint <= ?2",
    [ST_BLOB_PUT] = "INSERT OR IGNORE INTO convo_blobs(thread, ns, channel, version, type, value)"
                    " VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
    [ST_BLOB_DELETE] = "DELETE FROM convo_blobs WHERE thread = ?1",
    /* values no remaining checkpoint of the thread refers to */
    [ST_BLOB_UNUSED] = "DELETE FROM convo_blobs WHERE thread = ?1 AND (ns, channel, version)"
                       " NOT IN (SELECT c.ns, ch.channel, ch.version FROM convo_checkpoints AS c"
                       " JOIN convo_checkpoint_channels AS ch ON ch.checkpoint = c.key"
                       " WHERE c.key >= ?2 AND c.key <= ?3)",
    [ST_WRITE_KEEP] = "INSERT OR IGNORE INTO convo_checkpoint_writes(checkpoint, task_id, idx,"
                      " task_path, channel, type, value) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [ST_WRITE_REPLACE] = "INSERT OR REPLACE INTO convo_checkpoint_writes(checkpoint, task_id,"
                         " idx, task_path, channel, type, value)"
                         " VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7)",
    [ST_WRITE_LIST] = "SELECT task_id, task_path, idx, channel, type, value"
                      " FROM convo_checkpoint_writes WHERE checkpoint = ?1 ORDER BY task_id, idx",
    [ST_WRITE_DELETE] = "DELETE FROM convo_checkpoint_writes"
                        " WHERE checkpoint >= ?1 AND checkpoint <= ?2",
};

/* migrations[v] turns a version-v layout into version v+1, in one transaction. */
static const char *const migrations[SCHEMA_VERSION] = {
    /* 0 -> 1: threads, messages, idempotency keys */
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
    /* 1 -> 2: thread expiry, checkpoints, their channel values and pending writes */
    "ALTER TABLE convo_threads ADD COLUMN expires_at INTEGER;"
    "CREATE INDEX convo_threads_by_expiry ON convo_threads(expires_at)"
    "  WHERE expires_at IS NOT NULL;"
    "CREATE TABLE convo_checkpoints("
    "  key INTEGER PRIMARY KEY,"
    "  thread INTEGER NOT NULL,"
    "  ns TEXT NOT NULL,"
    "  id TEXT NOT NULL,"
    "  parent_id TEXT,"
    "  metadata TEXT NOT NULL,"
    "  body_type TEXT,"
    "  body BLOB,"
    "  log_length INTEGER NOT NULL,"
    "  created_at INTEGER NOT NULL);"
    "CREATE UNIQUE INDEX convo_checkpoints_by_id ON convo_checkpoints(thread, ns, id);"
    "CREATE TABLE convo_checkpoint_channels("
    "  checkpoint INTEGER NOT NULL,"
    "  channel TEXT NOT NULL,"
    "  version TEXT NOT NULL,"
    "  PRIMARY KEY(checkpoint, channel)) WITHOUT ROWID;"
    "CREATE TABLE convo_blobs("
    "  thread INTEGER NOT NULL,"
    "  ns TEXT NOT NULL,"
    "  channel TEXT NOT NULL,"
    "  version TEXT NOT NULL,"
    "  type TEXT NOT NULL,"
    "  value BLOB NOT NULL,"
    "  UNIQUE(thread, ns, channel, version));"
    "CREATE TABLE convo_checkpoint_writes("
    "  checkpoint INTEGER NOT NULL,"
    "  task_id TEXT NOT NULL,"
    "  idx INTEGER NOT NULL,"
    "  task_path TEXT NOT NULL,"
    "  channel TEXT NOT NULL,"
    "  type TEXT NOT NULL,"
    "  value BLOB NOT NULL,"
    "  UNIQUE(checkpoint, task_id, idx));"
    "CREATE VIEW convo_checkpoint_view AS"
    "  SELECT t.id AS thread_id, c.ns AS checkpoint_ns, c.id AS checkpoint_id,"
    "         c.key & 4294967295 AS position, c.parent_id AS parent_id,"
    "         c.metadata AS metadata, c.log_length AS log_length, c.created_at AS created_at"
    "  FROM convo_checkpoints AS c JOIN convo_threads AS t ON t.num = c.thread;",
    /* 2 -> 3: the store-wide put order, so that `before` works across threads;
     * a checkpoint stored before takes its key, which keeps each thread's order */
    "ALTER TABLE convo_checkpoints ADD COLUMN put_order INTEGER;"
    "UPDATE convo_checkpoints SET put_order = key;"
    "CREATE UNIQUE INDEX convo_checkpoints_by_put_order ON convo_checkpoints(put_order);"
    /* a layout-2 libconvo that had the file open before it was migrated still
     * writes rows without put_order: give them the next one */
    "CREATE TRIGGER convo_checkpoints_put_order AFTER INSERT ON convo_checkpoints"
    "  WHEN NEW.put_order IS NULL BEGIN"
    "    UPDATE convo_checkpoints SET put_order ="
    "      (SELECT coalesce(max(put_order), 0) + 1 FROM convo_checkpoints)"
    "    WHERE key = NEW.key;"
    "  END;"
    "DROP VIEW convo_checkpoint_view;"
    "CREATE VIEW convo_checkpoint_view AS"
    "  SELECT t.id AS thread_id, c.ns AS checkpoint_ns, c.id AS checkpoint_id,"
    "         c.key & 4294967295 AS position, c.put_order AS put_order,"
    "         c.parent_id AS parent_id, c.metadata AS metadata,"
    "         c.log_length AS log_length, c.created_at AS created_at"
    "  FROM convo_checkpoints AS c JOIN convo_threads AS t ON t.num = c.thread;",
};

typedef struct sq_conn {
    sqlite3 *db;
    int busy_ms;
    int64_t ttl_us;                /* the store's ttl; 0: threads never expire */
    sqlite3_stmt *stmts[ST_COUNT]; /* prepared on first use, kept until disconnect */
} sq_conn;

struct convo_backend {
    char *path;       /* absolute path of the file, or ":memory:" */
    int memory;       /* one private in-memory database, so one connection */
    int busy_ms;
    int sync_full;    /* PRAGMA synchronous=FULL instead of NORMAL */
    int ttl_s;        /* ttl=S from the URL; 0: none */
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
    int64_t expires_at; /* microseconds since the epoch; 0: never */
} thread_row;

/* How a call treats a thread whose ttl has passed: readers do not see it,
 * writers remove what is left of it first (in their own transaction) and then
 * do not see it either, so they start afresh; RAW sees it as it is. */
enum thread_view { VIEW_READ, VIEW_WRITE, VIEW_RAW };

static int thread_purge(sq_conn *c, int64_t num, convo_error *err);

static int expired(const thread_row *t, int64_t now)
{
    return t->expires_at != 0 && t->expires_at <= now;
}

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

/* Copies text column i of st into *out (malloc'd; NULL for SQL NULL). */
static int column_copy(sqlite3_stmt *st, int i, char **out, size_t *len, convo_error *err)
{
    const char *text = (const char *)sqlite3_column_text(st, i);
    size_t n = (size_t)sqlite3_column_bytes(st, i);
    *out = NULL;
    *len = 0;
    if (sqlite3_column_type(st, i) == SQLITE_NULL)
        return 0;
    if (!text || !(*out = malloc(n + 1)))
        return no_memory(err);
    memcpy(*out, text, n);
    (*out)[n] = '\0';
    *len = n;
    return 0;
}

/* 1 and t->num, t->expires_at filled when the thread exists (as seen through
 * view), 0 when not, < 0 on error. With extra non-NULL, *extra gets a malloc'd
 * copy of the extra text (NULL if none). t->length is not read. */
static int thread_get(sq_conn *c, const char *id, enum thread_view view, thread_row *t,
                      char **extra, size_t *extra_len, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = stmt_get(c, ST_THREAD_GET, &st, err);
    if (extra) {
        *extra = NULL;
        *extra_len = 0;
    }
    if (rc)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    if ((rc = stmt_step(c, st, "reading a thread", err)) != 1)
        return rc;
    t->num = sqlite3_column_int64(st, 0);
    t->expires_at = sqlite3_column_int64(st, 1); /* NULL reads as 0 */
    t->length = 0;
    rc = extra ? column_copy(st, 2, extra, extra_len, err) : 0;
    stmt_done(st);
    if (rc || view == VIEW_RAW || !expired(t, convo__now_micros()))
        return rc ? rc : 1;
    if (extra) {
        free(*extra);
        *extra = NULL;
    }
    return view == VIEW_WRITE && (rc = thread_purge(c, t->num, err)) != 0 ? rc : 0;
}

/* thread_get without extra, and with the thread's length. */
static int thread_find(sq_conn *c, const char *id, enum thread_view view, thread_row *t,
                       convo_error *err)
{
    int rc = thread_get(c, id, view, t, NULL, NULL, err);
    if (rc == 1 && (rc = thread_length(c, t->num, &t->length, err)) == 0)
        rc = 1;
    return rc;
}

/* The deadline a write gives a thread: now + ttl, or none (bound as NULL). */
static void bind_expiry(sq_conn *c, sqlite3_stmt *st, int i, int64_t now)
{
    if (c->ttl_us)
        sqlite3_bind_int64(st, i, now + c->ttl_us);
    else
        sqlite3_bind_null(st, i);
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
    bind_expiry(c, st, 4, now);
    if ((rc = stmt_run(c, st, "creating a thread", err)) != 0)
        return rc;
    *num = sqlite3_last_insert_rowid(c->db);
    if (*num > MAX_THREAD_NUM)
        return convo__error(err, CONVO_ENOTSUP, NULL,
                            "sqlite: this database has used up its %lld thread numbers",
                            (long long)MAX_THREAD_NUM);
    return 0;
}

/* Records a write to an existing thread: with ttl its deadline moves to now +
 * ttl; without, a deadline left by a store with ttl is cleared (the thread is
 * permanent again), so that a row is only rewritten when it has to be. */
static int thread_touch(sq_conn *c, const thread_row *t, convo_error *err)
{
    if (!c->ttl_us && !t->expires_at)
        return 0;
    sqlite3_stmt *st;
    int rc = stmt_get(c, ST_THREAD_SET_EXPIRY, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, t->num);
    bind_expiry(c, st, 2, convo__now_micros());
    return stmt_run(c, st, "recording the thread's expiry", err);
}

/* An existing thread is touched; a missing one is created with no extra. */
static int thread_ensure(sq_conn *c, const char *id, int found, thread_row *t, convo_error *err)
{
    return found ? thread_touch(c, t, err)
                 : thread_insert(c, id, convo__now_micros(), NULL, 0, &t->num, err);
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

static int length_conflict(int64_t length, int64_t expected, convo_error *err)
{
    return convo__error(err, CONVO_ECONFLICT, NULL, "thread has %lld messages, expected %lld",
                        (long long)length, (long long)expected);
}

/* Appends n messages after the t->length there are, to thread t, created
 * first when not found (else touched); created_at as for messages_insert. */
static int log_append(sq_conn *c, const char *thread_id, int found, thread_row *t,
                      const convo_message_in *msgs, size_t n, const int64_t *created_at,
                      convo_error *err)
{
    if (t->length + (int64_t)n > MAX_LENGTH)
        return convo__error(err, CONVO_ETOOLARGE, NULL,
                            "sqlite: a thread holds at most %lld messages", (long long)MAX_LENGTH);
    int rc = thread_ensure(c, thread_id, found, t, err);
    return rc ? rc : messages_insert(c, t->num, t->length, msgs, n, convo__now_micros(),
                                     created_at, err);
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

/* Deletes the checkpoints whose keys lie in [lo, hi] with their channel lists
 * and pending writes (not their values: see ST_BLOB_UNUSED). */
static int checkpoints_delete(sq_conn *c, int64_t lo, int64_t hi, convo_error *err)
{
    int rc = run_with_ints(c, ST_WRITE_DELETE, 2, lo, hi, 0, "deleting pending writes", err);
    if (rc == 0)
        rc = run_with_ints(c, ST_CH_DELETE, 2, lo, hi, 0, "deleting checkpoint channels", err);
    if (rc == 0)
        rc = run_with_ints(c, ST_CP_DELETE, 2, lo, hi, 0, "deleting checkpoints", err);
    return rc;
}

/* Removes thread num and everything keyed by it. */
static int thread_purge(sq_conn *c, int64_t num, convo_error *err)
{
    int64_t lo = key_of(num, 0), hi = key_of(num, MAX_LENGTH);
    int rc = run_with_ints(c, ST_MSG_DELETE, 2, lo, hi, 0, "deleting messages", err);
    if (rc == 0)
        rc = run_with_ints(c, ST_IDEM_DELETE, 1, num, 0, 0, "deleting idempotency keys", err);
    if (rc == 0)
        rc = checkpoints_delete(c, lo, hi, err);
    if (rc == 0)
        rc = run_with_ints(c, ST_BLOB_DELETE, 1, num, 0, 0, "deleting channel values", err);
    if (rc == 0)
        rc = run_with_ints(c, ST_THREAD_DELETE, 1, num, 0, 0, "deleting a thread", err);
    return rc;
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
    thread_row t = {0, 0, 0};
    int found = thread_find(c, a->thread_id, VIEW_WRITE, &t, err);
    if (found < 0)
        return found;
    int rc;
    if (found && key && (rc = idem_find(c, t.num, key, a->res, err)) != 0)
        return rc < 0 ? rc : 0; /* a retry: report the original batch */
    if (a->opts->expected_length >= 0 && a->opts->expected_length != t.length)
        return length_conflict(t.length, a->opts->expected_length, err);
    rc = log_append(c, a->thread_id, found, &t, a->msgs, a->n, NULL, err);
    if (rc == 0 && key)
        rc = idem_put(c, t.num, key, t.length, a->n, convo__now_micros(), err);
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
    int rc = thread_get(c, a->thread_id, VIEW_READ, &t, a->opts->with_extra ? &extra : NULL,
                        &extra_len, err);
    if (rc <= 0)
        return rc < 0 ? rc : convo__error(err, CONVO_ENOTFOUND, NULL, "thread not found");
    rc = extra && convo__history_set_extra(a->h, extra, extra_len) != 0 ? no_memory(err) : 0;
    free(extra);
    if (rc == 0)
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
    thread_row t = {0, 0, 0};
    char *current, *merged;
    size_t current_len = 0, merged_len;
    int found = thread_get(c, a->thread_id, VIEW_WRITE, &t, &current, &current_len, err);
    if (found < 0)
        return found;
    int rc = convo__extra_merge(current, current_len, a->patch, a->b->limits.max_extra_bytes,
                                &merged, &merged_len, err);
    free(current);
    if (rc)
        return rc;
    if (!found)
        rc = thread_insert(c, a->thread_id, convo__now_micros(), merged, merged_len, &t.num,
                           err);
    else if ((rc = thread_touch(c, &t, err)) == 0)
        rc = thread_set_extra(c, t.num, merged, merged_len, err);
    free(merged);
    return rc;
}

static int sq_save_extra(convo_backend *b, const char *thread_id, const char *patch,
                         void *patch_obj, convo_error *err)
{
    (void)patch_obj;
    extra_args a = {b, thread_id, patch};
    return run_tx(b, 1, save_extra_tx, &a, err);
}

/* ---- threads ---- */

typedef struct delete_args {
    const char *thread_id;
    int expired; /* the thread had expired: its remains were removed, yet it was not there */
} delete_args;

static int delete_tx(sq_conn *c, void *arg, convo_error *err)
{
    delete_args *a = arg;
    thread_row t;
    int rc = thread_get(c, a->thread_id, VIEW_RAW, &t, NULL, NULL, err);
    if (rc <= 0)
        return rc < 0 ? rc : convo__error(err, CONVO_ENOTFOUND, NULL, "thread not found");
    a->expired = expired(&t, convo__now_micros());
    return thread_purge(c, t.num, err);
}

static int sq_thread_delete(convo_backend *b, const char *thread_id, convo_error *err)
{
    delete_args a = {thread_id, 0};
    int rc = run_tx(b, 1, delete_tx, &a, err);
    if (rc == 0 && a.expired)
        rc = convo__error(err, CONVO_ENOTFOUND, NULL, "thread not found");
    return rc;
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
    sqlite3_bind_int64(st, 3, convo__now_micros());
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
    if (rc == 0 && (rc = thread_find(c, a->dst, VIEW_WRITE, &d, err)) > 0)
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
    size_t extra_len = 0;
    int rc = thread_get(c, a->src, VIEW_READ, &s, &extra, &extra_len, err);
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
    thread_row t = {0, 0, 0};
    int found = thread_find(c, a->thread_id, VIEW_WRITE, &t, err);
    if (found < 0)
        return found;
    *a->skipped = t.length >= a->first_seq + (int64_t)a->n; /* the same dump again */
    if (*a->skipped)
        return 0;
    if (t.length != a->first_seq)
        return convo__error(err, CONVO_ECONFLICT, NULL,
                            "thread has %lld messages, the dump continues at %lld",
                            (long long)t.length, (long long)a->first_seq);
    return log_append(c, a->thread_id, found, &t, a->msgs, a->n, a->created_at, err);
}

static int sq_thread_import(convo_backend *b, const char *thread_id, int64_t first_seq,
                            const convo_message_in *msgs, const int64_t *created_at, size_t n,
                            int *skipped, convo_error *err)
{
    import_args a = {thread_id, first_seq, msgs, created_at, n, skipped};
    *skipped = 0;
    return run_tx(b, 1, import_tx, &a, err);
}

/* ---- checkpoints ---- */

static int cp_not_found(convo_error *err)
{
    return convo__error(err, CONVO_ENOTFOUND, NULL, "checkpoint not found");
}

/* Binds text, or NULL when s is NULL. */
static void bind_text_or_null(sqlite3_stmt *st, int i, const char *s)
{
    if (s)
        sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
    else
        sqlite3_bind_null(st, i);
}

/* Binds bytes as a BLOB (never NULL, also when empty). */
static void bind_bytes(sqlite3_stmt *st, int i, const void *bytes, size_t len)
{
    sqlite3_bind_blob64(st, i, len ? bytes : "", len, SQLITE_STATIC);
}

/* Where a checkpoint stands: its row key (its place in its thread's order),
 * its place in the store's order, and the time of its first put. */
typedef struct cp_place {
    int64_t key, put_order, created_at;
} cp_place;

/* 1 with *at filled for checkpoint (ns, id) of thread num, 0 if none. */
static int cp_find(sq_conn *c, int64_t num, const char *ns, const char *id, cp_place *at,
                   convo_error *err)
{
    sqlite3_stmt *st;
    int rc = stmt_get(c, ST_CP_FIND, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, num);
    sqlite3_bind_text(st, 2, ns, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, id, -1, SQLITE_STATIC);
    if ((rc = stmt_step(c, st, "reading a checkpoint", err)) == 1) {
        at->key = sqlite3_column_int64(st, 0);
        at->created_at = sqlite3_column_int64(st, 1);
        at->put_order = sqlite3_column_int64(st, 2);
        stmt_done(st);
    }
    return rc;
}

/* The key of a new checkpoint of thread num: after the newest, so the key
 * order is the order of first put. */
static int cp_next_key(sq_conn *c, int64_t num, int64_t *key, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = stmt_get(c, ST_CP_LAST, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, key_of(num, 0));
    sqlite3_bind_int64(st, 2, key_of(num, MAX_LENGTH));
    *key = key_of(num, 0);
    if ((rc = stmt_step(c, st, "reading the newest checkpoint", err)) == 1) {
        *key = sqlite3_column_int64(st, 0) + 1;
        stmt_done(st);
        rc = 0;
    }
    if (rc == 0 && *key > key_of(num, MAX_LENGTH))
        rc = convo__error(err, CONVO_ETOOLARGE, NULL,
                          "sqlite: a thread holds at most %lld checkpoints", (long long)MAX_LENGTH);
    return rc;
}

/* The put_order of a new checkpoint: after every other one of the store (one
 * seek to the end of the put_order index, inside the write transaction). */
static int cp_next_order(sq_conn *c, int64_t *put_order, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = stmt_get(c, ST_CP_LAST_ORDER, &st, err);
    if (rc)
        return rc;
    if ((rc = stmt_step(c, st, "reading the newest checkpoint", err)) != 1)
        return rc < 0 ? rc : convo__error(err, CONVO_ERROR, NULL, "sqlite: max() gave no row");
    *put_order = sqlite3_column_int64(st, 0) + 1; /* NULL (none yet) reads as 0 */
    stmt_done(st);
    return 0;
}

static int cp_row_put(sq_conn *c, int64_t num, const cp_place *at, const convo_checkpoint_in *cp,
                      convo_error *err)
{
    sqlite3_stmt *st;
    int rc = stmt_get(c, ST_CP_PUT, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, at->key);
    sqlite3_bind_int64(st, 2, num);
    sqlite3_bind_text(st, 3, cp->checkpoint_ns, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, cp->checkpoint_id, -1, SQLITE_STATIC);
    bind_text_or_null(st, 5, cp->parent_id);
    sqlite3_bind_text(st, 6, cp->metadata_json, -1, SQLITE_STATIC);
    bind_text_or_null(st, 7, cp->body.type);
    if (cp->body.type)
        bind_bytes(st, 8, cp->body.bytes, cp->body.len);
    sqlite3_bind_int64(st, 9, cp->log_length);
    sqlite3_bind_int64(st, 10, at->created_at);
    sqlite3_bind_int64(st, 11, at->put_order);
    return stmt_run(c, st, "storing a checkpoint", err);
}

/* A value is stored once per (thread, ns, channel, version): a put that
 * brings a version already stored keeps the stored one (INSERT OR IGNORE). */
static int cp_blob_put(sq_conn *c, int64_t num, const char *ns, const convo_channel_in *ch,
                       convo_error *err)
{
    sqlite3_stmt *st;
    int rc = stmt_get(c, ST_BLOB_PUT, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, num);
    sqlite3_bind_text(st, 2, ns, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 3, ch->channel, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, ch->version, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, ch->value->type, -1, SQLITE_STATIC);
    bind_bytes(st, 6, ch->value->bytes, ch->value->len);
    return stmt_run(c, st, "storing a channel value", err);
}

/* The snapshot's channel versions, and the values it brings. */
static int cp_channels_put(sq_conn *c, int64_t num, int64_t key, const convo_checkpoint_in *cp,
                           convo_error *err)
{
    sqlite3_stmt *st;
    int rc = stmt_get(c, ST_CH_INSERT, &st, err);
    for (size_t i = 0; i < cp->nchannels && rc == 0; i++) {
        const convo_channel_in *ch = &cp->channels[i];
        sqlite3_bind_int64(st, 1, key);
        sqlite3_bind_text(st, 2, ch->channel, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, ch->version, -1, SQLITE_STATIC);
        rc = stmt_run(c, st, "storing a checkpoint channel", err);
        if (rc == 0 && ch->value)
            rc = cp_blob_put(c, num, cp->checkpoint_ns, ch, err);
    }
    return rc;
}

/* Stores cp in thread num, which existed before this transaction when found.
 * The same key again replaces the checkpoint in place, keeping its key and
 * put_order (its places in the orders), created_at and pending writes; its
 * channel list is written anew. */
static int cp_store(sq_conn *c, int64_t num, int found, const convo_checkpoint_in *cp,
                    convo_error *err)
{
    cp_place at = {0, 0, convo__now_micros()};
    int old = found ? cp_find(c, num, cp->checkpoint_ns, cp->checkpoint_id, &at, err) : 0;
    if (old < 0)
        return old;
    int rc = old ? run_with_ints(c, ST_CH_DELETE, 2, at.key, at.key, 0, "replacing a checkpoint",
                                 err)
                 : cp_next_key(c, num, &at.key, err);
    if (rc == 0 && !old)
        rc = cp_next_order(c, &at.put_order, err);
    if (rc == 0)
        rc = cp_row_put(c, num, &at, cp, err);
    return rc ? rc : cp_channels_put(c, num, at.key, cp, err);
}

static int cp_put_tx(sq_conn *c, void *arg, convo_error *err)
{
    const convo_checkpoint_in *cp = arg;
    thread_row t = {0, 0, 0};
    int found = thread_get(c, cp->thread_id, VIEW_WRITE, &t, NULL, NULL, err);
    int rc = found < 0 ? found : thread_ensure(c, cp->thread_id, found, &t, err);
    return rc ? rc : cp_store(c, t.num, found, cp, err);
}

static int sq_checkpoint_put(convo_backend *b, const convo_checkpoint_in *cp, convo_error *err)
{
    return run_tx(b, 1, cp_put_tx, (void *)cp, err);
}

typedef struct put_log_args {
    const convo_checkpoint_in *cp;
    const convo_message_in *msgs;
} put_log_args;

/* The messages as append stores them, then the checkpoint as checkpoint_put
 * does, in one write transaction: both are stored or neither. */
static int put_log_tx(sq_conn *c, void *arg, convo_error *err)
{
    const put_log_args *a = arg;
    const convo_checkpoint_in *cp = a->cp;
    thread_row t = {0, 0, 0};
    int found = thread_find(c, cp->thread_id, VIEW_WRITE, &t, err);
    if (found < 0)
        return found;
    if (t.length != cp->expected_length)
        return length_conflict(t.length, cp->expected_length, err);
    int rc = log_append(c, cp->thread_id, found, &t, a->msgs, cp->nmessages, NULL, err);
    return rc ? rc : cp_store(c, t.num, found, cp, err);
}

static int sq_checkpoint_put_log(convo_backend *b, const convo_checkpoint_in *cp,
                                 const convo_message_in *msgs, convo_error *err)
{
    put_log_args a = {cp, msgs};
    return run_tx(b, 1, put_log_tx, &a, err);
}

typedef struct writes_args {
    const char *thread_id, *ns, *checkpoint_id, *task_id, *task_path;
    const convo_write_in *writes;
    size_t n;
} writes_args;

/* idx >= 0 is kept once per (task, idx): the first write stays; a negative
 * idx (errors, interrupts) replaces. */
static int write_put(sq_conn *c, int64_t key, const writes_args *a, const convo_write_in *w,
                     convo_error *err)
{
    sqlite3_stmt *st;
    int rc = stmt_get(c, w->idx >= 0 ? ST_WRITE_KEEP : ST_WRITE_REPLACE, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, key);
    sqlite3_bind_text(st, 2, a->task_id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, w->idx);
    sqlite3_bind_text(st, 4, a->task_path, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 5, w->channel, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 6, w->value.type, -1, SQLITE_STATIC);
    bind_bytes(st, 7, w->value.bytes, w->value.len);
    return stmt_run(c, st, "storing a pending write", err);
}

/* The checkpoint is looked up inside the write transaction, so a concurrent
 * thread_delete either comes first (CONVO_ENOTFOUND) or removes these writes. */
static int writes_tx(sq_conn *c, void *arg, convo_error *err)
{
    writes_args *a = arg;
    thread_row t;
    cp_place at;
    int rc = thread_get(c, a->thread_id, VIEW_READ, &t, NULL, NULL, err);
    if (rc > 0)
        rc = cp_find(c, t.num, a->ns, a->checkpoint_id, &at, err);
    if (rc <= 0)
        return rc < 0 ? rc : cp_not_found(err);
    rc = 0;
    for (size_t i = 0; i < a->n && rc == 0; i++)
        rc = write_put(c, at.key, a, &a->writes[i], err);
    return rc ? rc : thread_touch(c, &t, err);
}

static int sq_checkpoint_put_writes(convo_backend *b, const char *thread_id, const char *ns,
                                    const char *checkpoint_id, const char *task_id,
                                    const char *task_path, const convo_write_in *writes, size_t n,
                                    convo_error *err)
{
    writes_args a = {thread_id, ns, checkpoint_id, task_id, task_path, writes, n};
    return run_tx(b, 1, writes_tx, &a, err);
}

/* Adds every channel of checkpoint key with its value, wherever in the
 * thread's history that value was first stored. */
static int cp_add_channels(sq_conn *c, convo_checkpoint *cp, int64_t key, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = stmt_get(c, ST_CH_VALUES, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, key);
    sqlite3_bind_int64(st, 2, key >> SEQ_BITS);
    sqlite3_bind_text(st, 3, convo_checkpoint_ns(cp), -1, SQLITE_STATIC);
    while ((rc = stmt_step(c, st, "reading checkpoint channels", err)) == 1) {
        const char *type = (const char *)sqlite3_column_text(st, 2);
        const void *value = sqlite3_column_blob(st, 3);
        if (convo__checkpoint_add_channel(cp, (const char *)sqlite3_column_text(st, 0),
                                          (const char *)sqlite3_column_text(st, 1), type,
                                          value ? value : "",
                                          (size_t)sqlite3_column_bytes(st, 3)) != 0) {
            stmt_done(st);
            return no_memory(err);
        }
    }
    return rc;
}

/* Adds the pending writes of checkpoint key in (task_id, idx) order. */
static int cp_add_writes(sq_conn *c, convo_checkpoint *cp, int64_t key, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = stmt_get(c, ST_WRITE_LIST, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, key);
    while ((rc = stmt_step(c, st, "reading pending writes", err)) == 1) {
        const void *value = sqlite3_column_blob(st, 5);
        if (convo__checkpoint_add_write(cp, (const char *)sqlite3_column_text(st, 0),
                                        (const char *)sqlite3_column_text(st, 1),
                                        sqlite3_column_int64(st, 2),
                                        (const char *)sqlite3_column_text(st, 3),
                                        (const char *)sqlite3_column_text(st, 4),
                                        value ? value : "",
                                        (size_t)sqlite3_column_bytes(st, 5)) != 0) {
            stmt_done(st);
            return no_memory(err);
        }
    }
    return rc;
}

/* The whole checkpoint on the current row of st (columns CP_COLUMNS). */
static int cp_from_row(sq_conn *c, sqlite3_stmt *st, const char *thread_id,
                       convo_checkpoint **out, convo_error *err)
{
    int64_t key = sqlite3_column_int64(st, 0);
    const char *body_type = (const char *)sqlite3_column_text(st, 5);
    const void *body = sqlite3_column_blob(st, 6);
    convo_checkpoint *cp = convo__checkpoint_new(
        thread_id, (const char *)sqlite3_column_text(st, 1),
        (const char *)sqlite3_column_text(st, 2), (const char *)sqlite3_column_text(st, 3),
        (const char *)sqlite3_column_text(st, 4), body_type, body ? body : "",
        (size_t)sqlite3_column_bytes(st, 6), sqlite3_column_int64(st, 7),
        sqlite3_column_int64(st, 8));
    if (!cp)
        return no_memory(err);
    int rc = cp_add_channels(c, cp, key, err);
    if (rc == 0)
        rc = cp_add_writes(c, cp, key, err);
    if (rc) {
        convo_checkpoint_free(cp);
        return rc;
    }
    convo__checkpoint_finish(cp);
    *out = cp;
    return 0;
}

typedef struct get_args {
    const char *thread_id, *ns, *checkpoint_id;
    convo_checkpoint *cp;
} get_args;

static int get_tx(sq_conn *c, void *arg, convo_error *err)
{
    get_args *a = arg;
    thread_row t;
    sqlite3_stmt *st;
    int rc = thread_get(c, a->thread_id, VIEW_READ, &t, NULL, NULL, err);
    if (rc <= 0)
        return rc < 0 ? rc : cp_not_found(err);
    if ((rc = stmt_get(c, a->checkpoint_id ? ST_CP_GET : ST_CP_LATEST, &st, err)) != 0)
        return rc;
    if (a->checkpoint_id) {
        sqlite3_bind_int64(st, 1, t.num);
        sqlite3_bind_text(st, 2, a->ns, -1, SQLITE_STATIC);
        sqlite3_bind_text(st, 3, a->checkpoint_id, -1, SQLITE_STATIC);
    } else {
        sqlite3_bind_int64(st, 1, key_of(t.num, 0));
        sqlite3_bind_int64(st, 2, key_of(t.num, MAX_LENGTH));
        sqlite3_bind_text(st, 3, a->ns, -1, SQLITE_STATIC);
    }
    if ((rc = stmt_step(c, st, "reading a checkpoint", err)) <= 0)
        return rc < 0 ? rc : cp_not_found(err);
    rc = cp_from_row(c, st, a->thread_id, &a->cp, err);
    stmt_done(st);
    return rc;
}

static int sq_checkpoint_get(convo_backend *b, const char *thread_id, const char *ns,
                             const char *checkpoint_id, convo_checkpoint **out, convo_error *err)
{
    get_args a = {thread_id, ns, checkpoint_id, NULL};
    int rc = run_tx(b, 0, get_tx, &a, err);
    if (rc) {
        convo_checkpoint_free(a.cp);
        return rc;
    }
    *out = a.cp;
    return 0;
}

typedef struct cp_list_args {
    const convo_checkpoint_list_opts *o;
    void *filter;
    convo_checkpoint_set *set;
} cp_list_args;

/* Adds the checkpoints st yields whose metadata matches, until the set holds
 * limit; thread_id NULL: the thread id is column 9. */
static int list_rows(sq_conn *c, sqlite3_stmt *st, const char *thread_id, cp_list_args *a,
                     convo_error *err)
{
    int rc;
    while ((rc = stmt_step(c, st, "listing checkpoints", err)) == 1) {
        if (a->o->limit && convo_checkpoint_set_count(a->set) >= a->o->limit)
            break;
        const char *metadata = (const char *)sqlite3_column_text(st, 4);
        if (!metadata || !convo__json_contains(metadata, (size_t)sqlite3_column_bytes(st, 4),
                                               a->filter))
            continue;
        convo_checkpoint *cp;
        rc = cp_from_row(c, st, thread_id ? thread_id : (const char *)sqlite3_column_text(st, 9),
                         &cp, err);
        if (rc == 0 && convo__checkpoint_set_add(a->set, cp) != 0)
            rc = no_memory(err);
        if (rc)
            break;
    }
    stmt_done(st);
    return rc < 0 ? rc : 0;
}

/* Checkpoint (before_thread_id, before_ns, before), which the core names in
 * full, in *at with its thread number in *num; CONVO_ENOTFOUND when it does
 * not exist or its thread expired. */
static int before_find(sq_conn *c, const convo_checkpoint_list_opts *o, int64_t *num,
                       cp_place *at, convo_error *err)
{
    thread_row t;
    int rc = thread_get(c, o->before_thread_id, VIEW_READ, &t, NULL, NULL, err);
    if (rc > 0)
        rc = cp_find(c, t.num, o->before_ns, o->before, at, err);
    if (rc <= 0)
        return rc < 0 ? rc : convo__error(err, CONVO_ENOTFOUND, NULL,
                                          "checkpoint '%s' not found", o->before);
    *num = t.num;
    return 0;
}

/* One thread's checkpoints, newest first, put before `before` (NULL: all);
 * before_num is the number of before's thread. */
static int list_thread(sq_conn *c, cp_list_args *a, const cp_place *before, int64_t before_num,
                       convo_error *err)
{
    const convo_checkpoint_list_opts *o = a->o;
    thread_row t;
    int rc = thread_get(c, o->thread_id, VIEW_READ, &t, NULL, NULL, err);
    if (rc <= 0)
        return rc; /* an unknown thread has no checkpoints */
    /* in before's own thread the key order is the put order: stop at its key */
    int64_t end = before && before_num == t.num ? before->key : key_of(t.num, MAX_LENGTH) + 1;
    sqlite3_stmt *st;
    if ((rc = stmt_get(c, ST_CP_LIST_THREAD, &st, err)) != 0)
        return rc;
    sqlite3_bind_int64(st, 1, key_of(t.num, 0));
    sqlite3_bind_int64(st, 2, end);
    bind_text_or_null(st, 3, o->checkpoint_ns);
    if (before)
        sqlite3_bind_int64(st, 4, before->put_order);
    return list_rows(c, st, o->thread_id, a, err);
}

/* Every thread's checkpoints, newest first in the store's put order. */
static int list_all(sq_conn *c, cp_list_args *a, const cp_place *before, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = stmt_get(c, before ? ST_CP_LIST_ALL_BEFORE : ST_CP_LIST_ALL, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, convo__now_micros());
    bind_text_or_null(st, 2, a->o->checkpoint_ns);
    if (before)
        sqlite3_bind_int64(st, 3, before->put_order);
    return list_rows(c, st, NULL, a, err);
}

static int cp_list_tx(sq_conn *c, void *arg, convo_error *err)
{
    cp_list_args *a = arg;
    cp_place at;
    int64_t before_num = 0;
    int rc = a->o->before ? before_find(c, a->o, &before_num, &at, err) : 0;
    if (rc)
        return rc;
    const cp_place *before = a->o->before ? &at : NULL;
    return a->o->thread_id ? list_thread(c, a, before, before_num, err)
                           : list_all(c, a, before, err);
}

static int sq_checkpoint_list(convo_backend *b, const convo_checkpoint_list_opts *o, void *filter,
                              convo_checkpoint_set **out, convo_error *err)
{
    cp_list_args a = {o, filter, convo__checkpoint_set_new()};
    if (!a.set)
        return no_memory(err);
    int rc = run_tx(b, 0, cp_list_tx, &a, err);
    if (rc) {
        convo_checkpoint_set_free(a.set);
        return rc;
    }
    *out = a.set;
    return 0;
}

/* How many checkpoints of each namespace have been seen so far. */
typedef struct ns_count {
    char *ns;
    size_t seen;
} ns_count;

typedef struct prune_plan {
    ns_count *ns;
    size_t nns;
    int64_t *doomed; /* keys of the checkpoints to remove */
    size_t ndoomed, cap;
} prune_plan;

static void prune_plan_free(prune_plan *p)
{
    for (size_t i = 0; i < p->nns; i++)
        free(p->ns[i].ns);
    free(p->ns);
    free(p->doomed);
}

/* Counts one more checkpoint of ns; returns how many were seen before it, or
 * (size_t)-1 when out of memory. */
static size_t ns_seen(prune_plan *p, const char *ns)
{
    for (size_t i = 0; i < p->nns; i++)
        if (strcmp(p->ns[i].ns, ns) == 0)
            return p->ns[i].seen++;
    ns_count *grown = realloc(p->ns, (p->nns + 1) * sizeof *grown);
    if (!grown)
        return (size_t)-1;
    p->ns = grown;
    if (!(p->ns[p->nns].ns = strdup(ns)))
        return (size_t)-1;
    p->ns[p->nns++].seen = 1;
    return 0;
}

static int doom(prune_plan *p, int64_t key)
{
    if (p->ndoomed == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 64;
        int64_t *grown = realloc(p->doomed, cap * sizeof *grown);
        if (!grown)
            return CONVO_ENOMEM;
        p->doomed = grown;
        p->cap = cap;
    }
    p->doomed[p->ndoomed++] = key;
    return 0;
}

/* Newest first, the checkpoints of thread num past the keep_last newest of
 * their namespace. Decided before anything is deleted. */
static int prune_decide(sq_conn *c, int64_t num, size_t keep_last, prune_plan *p,
                        convo_error *err)
{
    sqlite3_stmt *st;
    int rc = stmt_get(c, ST_CP_KEYS, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, key_of(num, 0));
    sqlite3_bind_int64(st, 2, key_of(num, MAX_LENGTH));
    while ((rc = stmt_step(c, st, "reading checkpoints", err)) == 1) {
        const char *ns = (const char *)sqlite3_column_text(st, 1);
        size_t newer = ns ? ns_seen(p, ns) : (size_t)-1;
        if (newer == (size_t)-1 || (newer >= keep_last && doom(p, sqlite3_column_int64(st, 0)))) {
            stmt_done(st);
            return no_memory(err);
        }
    }
    return rc;
}

typedef struct prune_args {
    const char *thread_id;
    size_t keep_last;
} prune_args;

static int prune_tx(sq_conn *c, void *arg, convo_error *err)
{
    prune_args *a = arg;
    thread_row t;
    int rc = thread_get(c, a->thread_id, VIEW_READ, &t, NULL, NULL, err);
    if (rc <= 0)
        return rc < 0 ? rc : convo__error(err, CONVO_ENOTFOUND, NULL, "thread not found");
    prune_plan p = {0};
    rc = prune_decide(c, t.num, a->keep_last, &p, err);
    for (size_t i = 0; i < p.ndoomed && rc == 0; i++)
        rc = checkpoints_delete(c, p.doomed[i], p.doomed[i], err);
    if (rc == 0 && p.ndoomed)
        rc = run_with_ints(c, ST_BLOB_UNUSED, 3, t.num, key_of(t.num, 0),
                           key_of(t.num, MAX_LENGTH), "deleting unused channel values", err);
    prune_plan_free(&p);
    return rc ? rc : thread_touch(c, &t, err);
}

static int sq_checkpoint_prune(convo_backend *b, const char *thread_id, size_t keep_last,
                               convo_error *err)
{
    prune_args a = {thread_id, keep_last};
    return run_tx(b, 1, prune_tx, &a, err);
}

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
    int rc = stmt_get(c, ST_THREAD_EXPIRED, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, convo__now_micros());
    sqlite3_bind_int64(st, 2, SWEEP_BATCH);
    while ((rc = stmt_step(c, st, "finding expired threads", err)) == 1)
        if (n < SWEEP_BATCH) /* LIMIT says so; the check keeps the array safe */
            nums[n++] = sqlite3_column_int64(st, 0);
    for (size_t i = 0; i < n && rc == 0; i++)
        rc = thread_purge(c, nums[i], err);
    a->removed += rc == 0 ? n : 0;
    a->more = rc == 0 && n == SWEEP_BATCH;
    return rc;
}

/* In batches, so other writers get the lock in between. Any store sweeps what
 * stores with ttl left behind; a file never written with ttl has nothing to sweep. */
static int sq_sweep(convo_backend *b, uint64_t *removed, convo_error *err)
{
    sweep_args a = {0, 1};
    int rc = 0;
    while (rc == 0 && a.more)
        rc = run_tx(b, 1, sweep_tx, &a, err);
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

/* The pages in use once the WAL is checkpointed into the file and truncated:
 * (page_count - freelist_count) x page_size. Free pages (left by deletes, reused
 * by later writes) are not counted, so a measurement does not depend on what was
 * deleted before it. */
static int sq_stored_bytes(convo_backend *b, int64_t *bytes, convo_error *err)
{
    void *p;
    int rc = convo__pool_acquire(b->pool, &p, err);
    if (rc)
        return rc;
    sq_conn *c = p;
    int64_t pages = 0, free_pages = 0, page_size = 0;
    if (!b->memory) /* best effort: a busy reader only makes the file look bigger */
        sqlite3_wal_checkpoint_v2(c->db, NULL, SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
    rc = pragma_int(c, "PRAGMA page_count", &pages, err);
    if (rc == 0)
        rc = pragma_int(c, "PRAGMA freelist_count", &free_pages, err);
    if (rc == 0)
        rc = pragma_int(c, "PRAGMA page_size", &page_size, err);
    convo__pool_release(b->pool, c, false);
    if (rc == 0)
        *bytes = (pages - free_pages) * page_size;
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
    if (rc == SQLITE_OK && *version < 0)
        return convo__error(err, CONVO_ECORRUPT, NULL,
                            "sqlite: the database records convo schema version %d; versions"
                            " start at 1", *version);
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
    long long n = def;
    int rc = convo__url_take_int(url, key, min, max, &n, err);
    *out = (int)n;
    return rc;
}

static int take_ttl(convo_url *url, int *ttl_s, convo_error *err)
{
    int64_t seconds;
    int rc = convo__url_take_ttl(url, &seconds, err);
    *ttl_s = (int)seconds; /* CONVO_MAX_TTL_SECONDS is INT32_MAX */
    return rc;
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
        rc = take_ttl(url, &b->ttl_s, err);
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
    .checkpoint_put = sq_checkpoint_put,
    .checkpoint_put_writes = sq_checkpoint_put_writes,
    .checkpoint_get = sq_checkpoint_get,
    .checkpoint_list = sq_checkpoint_list,
    .checkpoint_prune = sq_checkpoint_prune,
    .bench_raw = sq_bench_raw,
    .stored_bytes = sq_stored_bytes,
    .thread_import = sq_thread_import,
    .sweep = sq_sweep,
    .checkpoint_put_log = sq_checkpoint_put_log,
};
