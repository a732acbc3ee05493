/* sqlite_layout.h — what the SQLite layout checks (tests/sqlite-layout7.c to
 * tests/sqlite-layout16.c; one program each) and the other checks on a file
 * (tests/sqlite-refs.c, tests/sqlite-wait.c) share: with tests/sqlite_file.h
 * (a fresh database file in the run's scratch folder, SQL on it), a store on
 * the file and SQL run on it in a connection of its own. Each program sets
 * `dir` from its arguments. */
#ifndef CONVO_TESTS_SQLITE_LAYOUT_H
#define CONVO_TESTS_SQLITE_LAYOUT_H

#include "sqlite_file.h"
#include <convo.h>

/* 0 (the checks of older layouts and of the rows' own columns): open_db's
 * stores seal nothing (seal=0), so their rows stay as those layouts store
 * them; 1: layout 17's hot and sealed checkpoints (tests/sqlite-segments.c) */
static int layout_seal;

/* The store of the file at path, declaring keys as its indexed keys (NULL:
 * none), which must open. */
static inline convo_store *open_db_keys(const char *path, const char *const *keys)
{
    char url[600];
    snprintf(url, sizeof url, "sqlite:%s%s", path, layout_seal ? "" : "?seal=0");
    convo_store_opts o = CONVO_STORE_OPTS_INIT;
    o.indexed_keys = keys;
    convo_store *s = NULL;
    convo_error err;
    ck_assert_msg(convo_open_ex(&s, url, &o, &err) == 0, "open %s: %s", url, err.message);
    return s;
}

static inline convo_store *open_db(const char *path)
{
    return open_db_keys(path, NULL);
}

/* save_extra of patch to tid, which must succeed */
static inline void save_ok(convo_store *s, const char *tid, const char *patch)
{
    convo_error err;
    ck_assert_msg(convo_save_extra(s, tid, patch, &err) == 0, "save_extra %s: %s", tid,
                  err.message);
}

/* SQL on the file, in a connection of its own, which must succeed. */
static inline void exec_raw(const char *path, const char *sql)
{
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    exec_db(db, sql);
    sqlite3_close(db);
}

/* the layout version the file records */
static inline long long schema_version_of(const char *path)
{
    return sql_int(path, "SELECT value FROM convo_meta WHERE key = 'schema_version'");
}

/* A migration runs in the open's one transaction: after breaking_sql (which
 * steps a file back to layout `from` in a way its migration cannot finish),
 * an open fails and the file still records layout `from`. The caller checks
 * what the migration would have made is not there. */
static inline void assert_migration_fails_whole(const char *path, const char *breaking_sql,
                                                int from)
{
    exec_raw(path, breaking_sql);
    char url[600];
    snprintf(url, sizeof url, "sqlite:%s", path);
    convo_store *s = NULL;
    convo_error err;
    ck_assert_int_ne(convo_open(&s, url, &err), 0);
    ck_assert_int_eq(schema_version_of(path), from);
}

/* The layout this libconvo writes (drivers/sqlite/sqlite_int.h, SCHEMA_VERSION). */
#define SQLITE_LAYOUT_NOW 17

/* SQL turning a layout-17 file with no hot or sealed checkpoint (written with
 * seal=0) back into layout 16's tables. */
#define LAYOUT_17_TO_16                                                                      \
    "DROP TRIGGER convo_checkpoints_sealed_kept;"                                            \
    "DROP TRIGGER convo_checkpoint_segment_gone;"                                            \
    "DROP TRIGGER convo_checkpoint_hot_gone;"                                                \
    "DROP TABLE convo_checkpoint_segments;"                                                  \
    "DROP TABLE convo_checkpoint_hot;"                                                       \
    "ALTER TABLE convo_checkpoints DROP COLUMN sealed;"

/* SQL turning a layout-17 file (as LAYOUT_17_TO_16 takes it) back into layout
 * 15's (a thread's key values in convo_thread_keys and its two indexes again),
 * for the migration checks of older layouts (run before their own steps back). */
#define LAYOUT_16_TO_15                                                                      \
    LAYOUT_17_TO_16                                                                          \
    "DROP TRIGGER convo_thread_keys_stale;"                                                  \
    "CREATE TABLE convo_thread_keys(thread INTEGER NOT NULL, key TEXT NOT NULL,"             \
    " value TEXT NOT NULL, id TEXT NOT NULL, created_at INTEGER NOT NULL,"                   \
    " PRIMARY KEY(thread, key)) WITHOUT ROWID;"                                              \
    "INSERT INTO convo_thread_keys(thread, key, value, id, created_at)"                      \
    " SELECT thread, key, value, id, created_at FROM convo_key_threads;"                     \
    "CREATE INDEX convo_thread_keys_by_created"                                              \
    " ON convo_thread_keys(key, value, created_at, id);"                                     \
    "CREATE INDEX convo_thread_keys_by_id ON convo_thread_keys(key, value, id);"             \
    "DROP TABLE convo_key_threads;"                                                          \
    "ALTER TABLE convo_threads DROP COLUMN key_values;"                                      \
    "CREATE TRIGGER convo_thread_keys_stale AFTER UPDATE OF extra ON convo_threads"          \
    " WHEN NEW.updated_at = OLD.updated_at BEGIN"                                            \
    " DELETE FROM convo_key_recent WHERE (key, value, id) IN"                                \
    " (SELECT key, value, id FROM convo_thread_keys WHERE thread = NEW.num);"                \
    " DELETE FROM convo_thread_keys WHERE thread = NEW.num; END;"

/* SQL turning a layout-15 file back into layout 14's (the open thread's key
 * rows in the keys' activity orders at the open time again, under the table's
 * old name), for the migration checks of older layouts (run before their own
 * steps back). */
#define LAYOUT_15_TO_14                                                                      \
    "DROP TRIGGER convo_thread_keys_stale;"                                                  \
    "ALTER TABLE convo_key_recent RENAME TO convo_thread_recent;"                             \
    "INSERT INTO convo_thread_recent(key, value, updated_at, id, thread, created_at, length)" \
    " SELECT k.key, k.value, a.updated_at, k.id, k.thread, k.created_at, a.length"           \
    " FROM convo_activity AS a JOIN convo_thread_keys AS k ON k.thread = a.num"              \
    " WHERE a.updated_at = 9223372036854775807;"                                             \
    "CREATE TRIGGER convo_thread_keys_stale AFTER UPDATE OF extra ON convo_threads"          \
    " WHEN NEW.updated_at = OLD.updated_at BEGIN"                                            \
    " DELETE FROM convo_thread_recent WHERE (key, value, id) IN"                             \
    " (SELECT key, value, id FROM convo_thread_keys WHERE thread = NEW.num);"                \
    " DELETE FROM convo_thread_keys WHERE thread = NEW.num; END;"

/* SQL turning a layout-14 file back into layout 13's (every row indexed by id
 * again), for the migration checks of older layouts (run before their own
 * steps back). */
#define LAYOUT_14_TO_13                                                                      \
    "DROP TRIGGER convo_checkpoints_first_gone;"                                             \
    "DROP TRIGGER convo_checkpoints_unordered_needed;"                                       \
    "DROP INDEX convo_checkpoints_ordered_by_id;"                                            \
    "DROP INDEX convo_checkpoints_by_id;"                                                    \
    "ALTER TABLE convo_checkpoints DROP COLUMN unordered;"                                   \
    "CREATE INDEX convo_checkpoints_by_id ON convo_checkpoints("                             \
    " CASE WHEN typeof(id) = 'blob' THEN substr(id, 5, 4) ELSE id END);"

/* SQL turning a layout-13 file back into layout 12's tables (its pending
 * writes waiting apart are lost: the checks run it with none waiting), for the
 * migration checks of older layouts (run before their own steps back). */
#define LAYOUT_13_TO_12                                                                      \
    "DROP TRIGGER convo_checkpoint_pending_gone;"                                            \
    "DROP TABLE convo_checkpoint_pending;"

/* SQL turning a layout-10 file whose checkpoints have no pending writes back
 * into layout 9's tables, for the migration checks of older layouts (run
 * before their own steps back). */
#define LAYOUT_10_TO_9                                                                       \
    "DROP INDEX convo_checkpoints_by_id;"                                                    \
    "ALTER TABLE convo_checkpoints DROP COLUMN pending;"                                     \
    "ALTER TABLE convo_checkpoints RENAME COLUMN parent_place TO parent;"                    \
    "CREATE UNIQUE INDEX convo_checkpoints_by_id ON convo_checkpoints(thread, ns, id);"      \
    "CREATE TABLE convo_checkpoint_writes(checkpoint INTEGER NOT NULL,"                      \
    " task_id BLOB NOT NULL, idx INTEGER NOT NULL,"                                          \
    " task_path INTEGER NOT NULL CHECK (typeof(task_path) = 'integer'),"                     \
    " channel INTEGER NOT NULL CHECK (typeof(channel) = 'integer'),"                         \
    " type INTEGER NOT NULL CHECK (typeof(type) = 'integer'), value BLOB NOT NULL,"          \
    " PRIMARY KEY(checkpoint, task_id, idx)) WITHOUT ROWID;"

#endif
