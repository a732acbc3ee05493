/* sqlite_file.h — what the SQLite checks that look at the database file
 * share (tests/sqlite.c, tests/sqlite-index.c, and tests/sqlite_layout.h's
 * users): a fresh file name in the run's scratch folder, and SQL on the file
 * behind the driver's back that asserts as it goes. Each program sets `dir`
 * from its arguments. */
#ifndef CONVO_TESTS_SQLITE_FILE_H
#define CONVO_TESTS_SQLITE_FILE_H

#include <check.h>
#include <sqlite3.h>
#include <stdio.h>
#include <unistd.h>

static const char *dir; /* the scratch folder */

/* DIR/NAME-PID.db, with any file of that name (and its -wal, -shm) removed.
 * The last four names stay valid. */
static inline const char *db_path(const char *name)
{
    static char buf[4][512];
    static int n;
    char *b = buf[n++ % 4];
    snprintf(b, 512, "%s/%s-%ld.db", dir, name, (long)getpid());
    const char *suffix[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char f[600];
        snprintf(f, sizeof f, "%s%s", b, suffix[i]);
        unlink(f);
    }
    return b;
}

/* The number the query (one integer) gives on the file, read with SQLite
 * itself on a read-only connection. */
static inline long long sql_int(const char *path, const char *sql)
{
    sqlite3 *db;
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    ck_assert_msg(rc == SQLITE_OK, "%s: %s", sql, sqlite3_errmsg(db));
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

/* SQL on an open connection, which must succeed. */
static inline void exec_db(sqlite3 *db, const char *sql)
{
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    ck_assert_msg(rc == SQLITE_OK, "%s: %s", sql, msg ? msg : sqlite3_errstr(rc));
    sqlite3_free(msg);
}

#endif
