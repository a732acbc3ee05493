/* sqlite-index.c — the SQLite driver's thread index, beyond the conformance
 * cases: a page reads the same number of rows however many threads do not
 * match (the driver's own statements stepped on a file the driver wrote,
 * counting SQLite's virtual machine steps), the migration from layout 4
 * (updated_at from the last message or checkpoint, the declared keys indexed
 * for threads stored before), what ttl, delete and a staged import leave
 * listed, the values the index keeps (numbers as doubles, objects not),
 * the rows a layout-4 writer leaves stale, and the open entry (layout 6: the
 * pages an append writes, listings and cursors around it, a clock behind,
 * the migration from layout 5).
 * `tests/sqlite_index SQLDIR DIR`: SQLDIR is drivers/sqlite of the source
 * tree, DIR a scratch folder; `tests/sqlite_index --check FILE` checks that
 * the index of a store other tests wrote says what its tables say. */
#include "sqlite_file.h"
#include <convo.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const char *sqldir;

/* ------------------------------------------------------------ helpers */

static const char *const MSG = "{\"role\":\"user\",\"content\":\"hi\"}";

/* Opens path (params after '?' when non-NULL) declaring keys (NULL: none). */
static convo_store *open_keys(const char *path, const char *params, const char *const *keys)
{
    char url[640];
    snprintf(url, sizeof url, "sqlite:%s%s%s", path, params ? "?" : "", params ? params : "");
    convo_store_opts so = CONVO_STORE_OPTS_INIT;
    so.indexed_keys = keys;
    convo_store *s = NULL;
    convo_error err;
    int rc = convo_open_ex(&s, url, &so, &err);
    ck_assert_msg(rc == 0, "open %s: %d %s", url, rc, err.message);
    return s;
}

static const char *const USER_ID[] = {"user_id", NULL};

static void save(convo_store *s, const char *tid, const char *patch)
{
    convo_error err;
    int rc = convo_save_extra(s, tid, patch, &err);
    ck_assert_msg(rc == 0, "save_extra %s: %d %s", tid, rc, err.message);
}

static void append1(convo_store *s, const char *tid)
{
    convo_error err;
    int rc = convo_append(s, tid, &MSG, NULL, 1, NULL, NULL, &err);
    ck_assert_msg(rc == 0, "append %s: %d %s", tid, rc, err.message);
}

/* The ids of the first page (up to 100) of the listing, joined by spaces. */
static char *ids_of(convo_store *s, const char *where, int order)
{
    convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
    o.where_json = where;
    o.order = order;
    convo_thread_page *p;
    convo_error err;
    int rc = convo_thread_list_ex(s, &o, &p, &err);
    ck_assert_msg(rc == 0, "list %s: %d %s", where ? where : "-", rc, err.message);
    static char out[4096];
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < convo_thread_page_count(p) && used < sizeof out; i++)
        used += (size_t)snprintf(out + used, sizeof out - used, "%s%s", i ? " " : "",
                                 convo_thread_page_id(p, i));
    convo_thread_page_free(p);
    return out;
}

static void assert_ids(convo_store *s, const char *where, int order, const char *want)
{
    const char *got = ids_of(s, where, order);
    ck_assert_msg(strcmp(got, want) == 0, "where %s order %d: got [%s], want [%s]",
                  where ? where : "-", order, got, want);
}

/* The whole of file sub/name of sqldir (NUL-terminated, malloc'd). */
static char *slurp(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", sqldir, name);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "open %s: %s", path, strerror(errno));
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long size = ftell(f);
    ck_assert(size >= 0);
    rewind(f);
    char *buf = malloc((size_t)size + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_uint_eq(fread(buf, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    buf[size] = '\0';
    return buf;
}

/* The time of the open entry (ACTIVITY_OPEN in drivers/sqlite/sqlite_int.h). */
#define OPEN "9223372036854775807"
/* Thread t's activity time and length, from its row and its last message. */
#define LAST_MESSAGE(t, what)                                                                 \
    "(SELECT " what " FROM convo_messages AS m WHERE m.key BETWEEN " t ".num << 32 AND ("   \
    t ".num << 32) + 4294967295 ORDER BY m.key DESC LIMIT 1)"
#define ACTIVITY(t) "max(" t ".updated_at, coalesce(" LAST_MESSAGE(t, "m.created_at") ", 0))"
#define LENGTH(t) "coalesce(" LAST_MESSAGE(t, "(m.key & 4294967295) + 1") ", 0)"

/* Key k's pair as a thread's key values hold it (layout 16: "LEN:KEY" "LEN:VALUE"). */
#define PAIR(k)                                                                              \
    "length(CAST(" k ".key AS BLOB)) || ':' || " k ".key || length(CAST(" k ".value AS BLOB))" \
    " || ':' || " k ".value"

/* The index says what the tables say: each thread has one entry in the
 * activity order, at the later of its row's updated_at and its last message's
 * created_at, or at the open time (at most one entry, the thread written
 * last, whose activity is past every other entry's); a thread's key values
 * (layout 16) name exactly its rows in the orders by creation and id; each
 * of them but the open thread's has its row in the key's activity order at the same time
 * as the entry, and the open thread has none there (layout 15); the
 * created_at and length they carry are the thread's (the length: but for the
 * open entry's); nothing is left of a removed thread. */
static const char *const consistency_checks[] = {
    "SELECT count(*) FROM convo_activity AS a LEFT JOIN convo_threads AS t ON t.num = a.num"
    " WHERE t.num IS NULL OR t.id <> a.id",
    "SELECT count(*) FROM convo_threads AS t"
    " WHERE (SELECT count(*) FROM convo_activity AS a WHERE a.num = t.num) <> 1",
    "SELECT count(*) FROM convo_activity AS a JOIN convo_threads AS t ON t.num = a.num"
    " WHERE a.updated_at <> " OPEN " AND a.updated_at <> " ACTIVITY("t"),
    "SELECT count(*) FROM convo_activity AS a JOIN convo_threads AS t ON t.num = a.num"
    " WHERE a.created_at <> t.created_at"
    " OR (a.updated_at <> " OPEN " AND a.length <> " LENGTH("t") ")",
    "SELECT max(count(*) - 1, 0) FROM convo_activity WHERE updated_at = " OPEN,
    "SELECT count(*) FROM convo_activity AS o JOIN convo_threads AS t ON t.num = o.num"
    " JOIN convo_activity AS a ON a.updated_at <> " OPEN
    " WHERE o.updated_at = " OPEN " AND a.updated_at >= " ACTIVITY("t"),
    "SELECT count(*) FROM convo_key_threads AS k LEFT JOIN convo_threads AS t"
    " ON t.num = k.thread WHERE t.num IS NULL OR t.id <> k.id OR t.created_at <> k.created_at",
    "SELECT count(*) FROM convo_key_threads AS k JOIN convo_activity AS a ON a.num = k.thread"
    " WHERE a.updated_at <> " OPEN " AND NOT EXISTS (SELECT 1 FROM convo_key_recent AS r"
    " WHERE r.key = k.key AND r.value = k.value AND r.updated_at = a.updated_at"
    " AND r.id = k.id AND r.thread = k.thread)",
    "SELECT (SELECT count(*) FROM convo_key_recent) - (SELECT count(*) FROM convo_key_threads"
    " AS k JOIN convo_activity AS a ON a.num = k.thread WHERE a.updated_at <> " OPEN ")",
    "SELECT count(*) FROM convo_key_recent WHERE updated_at = " OPEN,
    "SELECT count(*) FROM convo_key_threads AS k JOIN convo_threads AS t ON t.num = k.thread"
    " WHERE t.key_values IS NULL OR instr(t.key_values, " PAIR("k") ") = 0",
    "SELECT (SELECT count(*) FROM convo_key_threads) - (SELECT count(*) FROM convo_threads AS t"
    " JOIN convo_indexed_keys AS d ON instr(t.key_values,"
    " length(CAST(d.key AS BLOB)) || ':' || d.key) > 0)",
    "SELECT count(*) FROM convo_key_recent AS r JOIN convo_activity AS a ON a.num = r.thread"
    " WHERE r.created_at <> a.created_at OR r.id <> a.id OR r.length <> a.length",
    "SELECT count(*) FROM convo_key_recent AS r JOIN convo_activity AS a ON a.num = r.thread"
    " WHERE r.updated_at <> a.updated_at",
};

static void assert_index_consistent(const char *path)
{
    for (size_t i = 0; i < sizeof consistency_checks / sizeof *consistency_checks; i++) {
        long long bad = sql_int(path, consistency_checks[i]);
        ck_assert_msg(bad == 0, "%lld rows: %s", bad, consistency_checks[i]);
    }
}

/* `tests/sqlite_index --check FILE`: the same checks on a file other suites
 * wrote (tests/sqlite-extra.sh); prints what fails, exits 1 then. */
static int check_file(const char *path)
{
    sqlite3 *db;
    int failed = 0;
    if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK) {
        fprintf(stderr, "sqlite-index: cannot open %s\n", path);
        return 1;
    }
    for (size_t i = 0; i < sizeof consistency_checks / sizeof *consistency_checks; i++) {
        sqlite3_stmt *st;
        long long bad = -1;
        if (sqlite3_prepare_v2(db, consistency_checks[i], -1, &st, NULL) == SQLITE_OK &&
            sqlite3_step(st) == SQLITE_ROW)
            bad = sqlite3_column_int64(st, 0);
        sqlite3_finalize(st);
        if (bad != 0) {
            fprintf(stderr, "sqlite-index: %s: %lld rows: %s\n", path, bad,
                    consistency_checks[i]);
            failed = 1;
        }
    }
    sqlite3_close(db);
    if (!failed)
        printf("sqlite-index: %s: the thread index is consistent\n", path);
    return failed;
}

/* ------------------------------------------------------------ the index is used */

/* Steps statements/NAME of the driver, as the driver binds it for the first
 * page of one value's newest threads, 21 rows (a page of 20 and the one that
 * says more exist); the number of virtual machine steps that took. */
static int page_steps(const char *path, const char *name, const char *value)
{
    char file[256];
    snprintf(file, sizeof file, "statements/%s", name);
    char *sql = slurp(file);
    sqlite3 *db;
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", name,
                  sqlite3_errmsg(db));
    sqlite3_bind_text(st, 1, "user_id", -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, value, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, INT64_MAX);
    sqlite3_bind_text(st, 4, "", -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 5, 0);
    int rows = 0;
    while (rows < 21 && sqlite3_step(st) == SQLITE_ROW)
        rows++;
    ck_assert_int_eq(rows, 21);
    ck_assert_int_eq(sqlite3_stmt_status(st, SQLITE_STMTSTATUS_FULLSCAN_STEP, 0), 0);
    ck_assert_int_eq(sqlite3_stmt_status(st, SQLITE_STMTSTATUS_SORT, 0), 0);
    int steps = sqlite3_stmt_status(st, SQLITE_STMTSTATUS_VM_STEP, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    free(sql);
    return steps;
}

/* Threads t<from>..t<to - 1>, each of user u<i % users>. */
static void fill(convo_store *s, int from, int to, int users)
{
    for (int i = from; i < to; i++) {
        char tid[32], patch[64];
        snprintf(tid, sizeof tid, "t%05d", i);
        snprintf(patch, sizeof patch, "{\"user_id\":\"u%d\",\"n\":%d}", i % users, i);
        save(s, tid, patch);
    }
}

/* The statements a page runs, each bound for user u0's first page. */
static const char *const page_statements[] = {
    "list-key-recent.sql", "list-key-created.sql", "list-key-id.sql", "list-key-recent-bare.sql",
    "list-recent.sql",     "list-created.sql",     "list-id.sql",     "list-recent-bare.sql"};
enum { NPAGE = sizeof page_statements / sizeof *page_statements };

START_TEST(test_page_cost_flat)
{
    const char *path = db_path("cost");
    convo_store *s = open_keys(path, NULL, USER_ID);
    fill(s, 0, 150, 5); /* u0 has 30 threads among 150 */
    int before[NPAGE];
    for (int i = 0; i < NPAGE; i++)
        before[i] = page_steps(path, page_statements[i], "\"u0\"");
    fill(s, 150, 1500, 5); /* 1,080 more of other users, and 270 more of u0 */
    for (int i = 0; i < NPAGE; i++) {
        int after = page_steps(path, page_statements[i], "\"u0\"");
        ck_assert_msg(after == before[i], "%s: %d steps at 150 threads, %d at 1,500",
                      page_statements[i], before[i], after);
    }
    /* and what the driver lists with them: u0's 20 newest, t01495 first */
    convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
    o.where_json = "{\"user_id\":\"u0\"}";
    o.limit = 20;
    convo_thread_page *p;
    convo_error err;
    ck_assert_int_eq(convo_thread_list_ex(s, &o, &p, &err), 0);
    ck_assert_uint_eq(convo_thread_page_count(p), 20);
    ck_assert_str_eq(convo_thread_page_id(p, 0), "t01495");
    ck_assert_str_eq(convo_thread_page_id(p, 19), "t01400");
    ck_assert_ptr_nonnull(convo_thread_page_next(p));
    convo_thread_page_free(p);
    convo_close(s);
    assert_index_consistent(path);
}
END_TEST

/* A filter on a key the store does not index is answered by walking every
 * thread: right, at a cost that grows with the store (docs/sqlite.md). */
START_TEST(test_unindexed_filter_scans)
{
    const char *path = db_path("scan");
    convo_store *s = open_keys(path, NULL, USER_ID);
    fill(s, 0, 50, 5);
    assert_ids(s, "{\"n\":7}", CONVO_ORDER_ID, "t00007");
    assert_ids(s, "{\"n\":7,\"user_id\":\"u2\"}", CONVO_ORDER_ID, "t00007");
    assert_ids(s, "{\"n\":7,\"user_id\":\"u3\"}", CONVO_ORDER_ID, "");
    assert_ids(s, "{\"user_id\":\"u4\",\"n\":49}", CONVO_ORDER_RECENT, "t00049");
    convo_close(s);
}
END_TEST

/* ------------------------------------------------------------ migration */

/* Layout 4 as migrate-0-1.sql .. migrate-3-4.sql make it, with: thread a
 * (created 50, messages at 100, 200, 300), b (created 70, extra, no message),
 * c (created 60, a message at 100 and a checkpoint put at 400), d (created 80,
 * expired), and a staged import. */
static const char v4_data[] =
    "BEGIN;"
    "INSERT INTO convo_meta(key, value) VALUES('schema_version', '4');"
    "INSERT INTO convo_threads(num, id, created_at, extra, expires_at, generation) VALUES"
    "  (1, 'a', 50, '{\"user_id\":\"u1\"}', NULL, 0),"
    "  (2, 'b', 70, '{\"user_id\":\"u1\",\"title\":\"x\"}', NULL, 2),"
    "  (3, 'c', 60, '{\"user_id\":\"u2\"}', NULL, 0),"
    "  (4, 'd', 80, '{\"user_id\":\"u1\"}', 1, 0),"
    "  (5, '.convo-import-00000000000000aa', 90, '{\"user_id\":\"u1\"}', NULL, 0);"
    "INSERT INTO convo_messages VALUES"
    "  ((1 << 32) | 0, 'user', 100, CAST('{\"role\":\"user\"}' AS BLOB)),"
    "  ((1 << 32) | 1, 'user', 200, CAST('{\"role\":\"user\"}' AS BLOB)),"
    "  ((1 << 32) | 2, 'user', 300, CAST('{\"role\":\"user\",\"n\":2}' AS BLOB)),"
    "  ((3 << 32) | 0, 'user', 100, CAST('{\"role\":\"user\"}' AS BLOB));"
    "INSERT INTO convo_checkpoints(key, thread, ns, id, parent_id, metadata, body_type, body,"
    "  log_length, created_at, put_order) VALUES((3 << 32) | 1, 3, '', 'k', NULL, '{}', NULL,"
    "  NULL, 1, 400, 1);"
    "COMMIT;";

static void make_v4(const char *path)
{
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    for (int v = 0; v < 4; v++) {
        char name[64];
        snprintf(name, sizeof name, "migrate-%d-%d.sql", v, v + 1);
        char *sql = slurp(name);
        exec_db(db, sql);
        free(sql);
    }
    exec_db(db, v4_data);
    sqlite3_close(db);
}

START_TEST(test_migration_4_to_5)
{
    const char *path = db_path("v4");
    make_v4(path);
    convo_store *s = open_keys(path, NULL, NULL);
    ck_assert_int_eq(sql_int(path, "SELECT value FROM convo_meta WHERE key = 'schema_version'"), 17);
    /* the activity time: the last message, the last checkpoint, else created_at */
    ck_assert_int_eq(sql_int(path, "SELECT updated_at FROM convo_activity WHERE id = 'a'"), 300);
    ck_assert_int_eq(sql_int(path, "SELECT updated_at FROM convo_threads WHERE id = 'a'"), 50);
    ck_assert_int_eq(sql_int(path, "SELECT updated_at FROM convo_activity WHERE id = 'b'"), 70);
    ck_assert_int_eq(sql_int(path, "SELECT updated_at FROM convo_activity WHERE id = 'c'"), 400);
    ck_assert_int_eq(sql_int(path, "SELECT updated_at FROM convo_threads WHERE id = 'c'"), 400);
    ck_assert_int_eq(sql_int(path, "SELECT created_at FROM convo_threads WHERE id = 'c'"), 60);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_activity"), 5);
    /* the expired d and the staged import are not listed */
    assert_ids(s, NULL, CONVO_ORDER_RECENT, "c a b");
    assert_ids(s, NULL, CONVO_ORDER_CREATED, "b c a");
    assert_ids(s, NULL, CONVO_ORDER_ID, "a b c");
    assert_ids(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, "a b");
    /* rows: created_at, updated_at, length, the last message */
    convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
    o.with_last_message = 1;
    o.with_extra = 1;
    convo_thread_page *p;
    convo_error err;
    ck_assert_int_eq(convo_thread_list_ex(s, &o, &p, &err), 0);
    ck_assert_uint_eq(convo_thread_page_count(p), 3);
    ck_assert_str_eq(convo_thread_page_id(p, 1), "a");
    ck_assert_int_eq(convo_thread_page_created_at(p, 1), 50);
    ck_assert_int_eq(convo_thread_page_updated_at(p, 1), 300);
    ck_assert_int_eq(convo_thread_page_length(p, 1), 3);
    size_t len;
    ck_assert_str_eq(convo_thread_page_last_message(p, 1, &len), "{\"role\":\"user\",\"n\":2}");
    ck_assert_int_eq(convo_thread_page_length(p, 2), 0);
    ck_assert_ptr_null(convo_thread_page_last_message(p, 2, &len));
    ck_assert_str_eq(convo_thread_page_extra(p, 2), "{\"user_id\":\"u1\",\"title\":\"x\"}");
    convo_thread_page_free(p);
    convo_close(s);
    /* keys declared on the migrated store: its threads are indexed, the
     * expired and staged ones too (never listed all the same) */
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_key_threads"), 0);
    s = open_keys(path, NULL, USER_ID);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_key_threads"), 5);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_key_recent"), 5);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_key_recent WHERE key = 'user_id'"
                                   " AND value = '\"u1\"' AND updated_at = 300 AND id = 'a'"),
                     1);
    assert_ids(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, "a b");
    assert_ids(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_CREATED, "b a");
    assert_ids(s, "{\"user_id\":\"u2\"}", CONVO_ORDER_ID, "c");
    /* a write moves a thread ahead; its entry and key row move with it, and
     * the append leaves its row's updated_at alone */
    append1(s, "b");
    assert_ids(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, "b a");
    assert_ids(s, NULL, CONVO_ORDER_RECENT, "b c a");
    ck_assert_int_eq(sql_int(path, "SELECT updated_at FROM convo_threads WHERE id = 'b'"), 70);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_key_recent AS r"
                                   " JOIN convo_activity AS a ON a.id = r.id"
                                   " WHERE r.updated_at = a.updated_at"),
                     5);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_activity"), 5);
    convo_close(s);
    /* opening again, with the keys or without, changes nothing */
    s = open_keys(path, NULL, NULL);
    assert_ids(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, "b a");
    convo_close(s);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_key_threads"), 5);
    assert_index_consistent(path);
}
END_TEST

/* A layout-4 libconvo that had the file open goes on writing with its own
 * statements: a thread it creates starts at its created_at; an extra it
 * changes takes the thread out of the index (never listed under the old value). */
START_TEST(test_layout4_writer)
{
    const char *path = db_path("old");
    convo_store *s = open_keys(path, NULL, USER_ID);
    save(s, "x", "{\"user_id\":\"u1\"}");
    assert_ids(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, "x");
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    exec_db(db, "UPDATE convo_threads SET extra = '{\"user_id\":\"u2\"}' WHERE id = 'x'");
    exec_db(db, "INSERT INTO convo_threads(id, created_at, extra, expires_at, generation)"
                " VALUES('y', 1234, NULL, NULL, 0)");
    sqlite3_close(db);
    assert_ids(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, "");
    assert_ids(s, "{\"user_id\":\"u2\"}", CONVO_ORDER_RECENT, "");
    ck_assert_int_eq(sql_int(path, "SELECT updated_at FROM convo_threads WHERE id = 'y'"), 1234);
    /* the next save_extra of the key puts it back */
    save(s, "x", "{\"user_id\":\"u2\"}");
    assert_ids(s, "{\"user_id\":\"u2\"}", CONVO_ORDER_RECENT, "x");
    assert_index_consistent(path);
    /* an append of its: the thread's entry is left behind, and the next write
     * repairs it */
    save(s, "z", "{\"user_id\":\"u2\"}");
    assert_ids(s, "{\"user_id\":\"u2\"}", CONVO_ORDER_RECENT, "z x");
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    exec_db(db, "INSERT INTO convo_messages SELECT (num << 32) | 0, 'user', 9000000000000000,"
                " CAST('{\"role\":\"user\"}' AS BLOB) FROM convo_threads WHERE id = 'x'");
    sqlite3_close(db);
    assert_ids(s, "{\"user_id\":\"u2\"}", CONVO_ORDER_RECENT, "z x");
    append1(s, "x");
    assert_ids(s, "{\"user_id\":\"u2\"}", CONVO_ORDER_RECENT, "x z");
    assert_ids(s, NULL, CONVO_ORDER_RECENT, "x z y");
    assert_index_consistent(path);
    convo_error err;
    ck_assert_int_eq(convo_thread_delete(s, "x", &err), 0);
    assert_index_consistent(path);
    convo_close(s);
}
END_TEST

/* ------------------------------------------------------------ what is listed */

START_TEST(test_ttl_and_delete)
{
    const char *path = db_path("ttl");
    convo_store *s = open_keys(path, "ttl=1", USER_ID);
    save(s, "old", "{\"user_id\":\"u1\"}");
    save(s, "gone", "{\"user_id\":\"u1\"}");
    struct timespec nap = {1, 200000000};
    nanosleep(&nap, NULL);
    save(s, "new", "{\"user_id\":\"u1\"}");
    /* old expired: listed nowhere, before any sweep */
    for (int order = CONVO_ORDER_RECENT; order <= CONVO_ORDER_ID; order++) {
        assert_ids(s, "{\"user_id\":\"u1\"}", order, "new");
        assert_ids(s, NULL, order, "new");
    }
    convo_error err;
    ck_assert_int_eq(convo_thread_delete(s, "new", &err), 0);
    assert_ids(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, "");
    assert_ids(s, NULL, CONVO_ORDER_ID, "");
    uint64_t removed;
    ck_assert_int_eq(convo_sweep(s, &removed, &err), 0);
    ck_assert_int_eq(removed, 2);
    /* delete and sweep leave no index row behind */
    ck_assert_int_eq(sql_int(path, "SELECT (SELECT count(*) FROM convo_activity)"
                                   " + (SELECT count(*) FROM convo_key_threads)"
                                   " + (SELECT count(*) FROM convo_key_recent)"),
                     0);
    /* a write to an expired thread starts it afresh: new times */
    save(s, "again", "{\"user_id\":\"u1\"}");
    nanosleep(&nap, NULL);
    save(s, "again", "{\"user_id\":\"u3\"}");
    assert_ids(s, "{\"user_id\":\"u3\"}", CONVO_ORDER_CREATED, "again");
    assert_ids(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_CREATED, "");
    convo_close(s);
    assert_index_consistent(path);
}
END_TEST

START_TEST(test_staged_import_not_listed)
{
    const char *path = db_path("staged");
    convo_store *s = open_keys(path, NULL, USER_ID);
    save(s, ".convo-import-0123456789abcdef", "{\"user_id\":\"u1\"}");
    save(s, ".convo-importer", "{\"user_id\":\"u1\"}");
    for (int order = CONVO_ORDER_RECENT; order <= CONVO_ORDER_ID; order++) {
        assert_ids(s, "{\"user_id\":\"u1\"}", order, ".convo-importer");
        assert_ids(s, NULL, order, ".convo-importer");
    }
    convo_close(s);
}
END_TEST

/* ------------------------------------------------------------ the values kept */

START_TEST(test_index_values)
{
    const char *path = db_path("values");
    convo_store *s = open_keys(path, NULL, USER_ID);
    save(s, "n3", "{\"user_id\":3}");
    save(s, "s3", "{\"user_id\":\"3\"}");
    save(s, "z", "{\"user_id\":-0.0}");
    save(s, "t", "{\"user_id\":true}");
    save(s, "nul", "{\"user_id\":null}");
    save(s, "obj", "{\"user_id\":{\"a\":1,\"b\":2}}");
    /* numbers are one value whatever their spelling, as containment has them */
    assert_ids(s, "{\"user_id\":3.0}", CONVO_ORDER_ID, "n3");
    assert_ids(s, "{\"user_id\":3}", CONVO_ORDER_ID, "n3");
    assert_ids(s, "{\"user_id\":0}", CONVO_ORDER_ID, "z");
    assert_ids(s, "{\"user_id\":\"3\"}", CONVO_ORDER_ID, "s3");
    assert_ids(s, "{\"user_id\":true}", CONVO_ORDER_ID, "t");
    assert_ids(s, "{\"user_id\":null}", CONVO_ORDER_ID, "nul");
    /* an object is not kept in the index (containment is not equality) and
     * is found by a walk */
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_key_threads"), 5);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_key_recent"), 5);
    assert_ids(s, "{\"user_id\":{\"a\":1}}", CONVO_ORDER_ID, "obj");
    /* a value replaced by an object loses its row, and comes back */
    save(s, "n3", "{\"user_id\":[3]}");
    assert_ids(s, "{\"user_id\":3}", CONVO_ORDER_ID, "");
    assert_ids(s, "{\"user_id\":[3]}", CONVO_ORDER_ID, "n3");
    save(s, "n3", "{\"other\":1}");
    assert_ids(s, "{\"user_id\":[3]}", CONVO_ORDER_ID, "n3");
    save(s, "n3", "{\"user_id\":4}");
    assert_ids(s, "{\"user_id\":4}", CONVO_ORDER_ID, "n3");
    /* a text past INDEX_VALUE_MAX is walked to, not indexed */
    char patch[1200], where[1200];
    char long_text[600];
    memset(long_text, 'x', sizeof long_text - 1);
    long_text[sizeof long_text - 1] = '\0';
    snprintf(patch, sizeof patch, "{\"user_id\":\"%s\"}", long_text);
    save(s, "long", patch);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_key_threads"), 5);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_key_recent"), 5);
    snprintf(where, sizeof where, "{\"user_id\":\"%s\"}", long_text);
    assert_ids(s, where, CONVO_ORDER_ID, "long");
    /* a fork has the source's rows, with its own id and times */
    convo_error err;
    ck_assert_int_eq(convo_thread_fork(s, "t", "t2", -1, &err), 0);
    assert_ids(s, "{\"user_id\":true}", CONVO_ORDER_CREATED, "t2 t");
    convo_close(s);
    assert_index_consistent(path);
}

/* The first page in activity order with extra and last message, and without
 * (read from the activity order's B-tree alone): the same rows. */
static void assert_same_rows(convo_store *s, const char *where)
{
    convo_thread_page *p[2];
    for (int full = 0; full < 2; full++) {
        convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
        o.where_json = where;
        o.with_extra = o.with_last_message = full;
        convo_error err;
        ck_assert_int_eq(convo_thread_list_ex(s, &o, &p[full], &err), 0);
    }
    ck_assert_uint_eq(convo_thread_page_count(p[0]), convo_thread_page_count(p[1]));
    ck_assert_uint_gt(convo_thread_page_count(p[0]), 0);
    for (size_t i = 0; i < convo_thread_page_count(p[0]); i++) {
        ck_assert_str_eq(convo_thread_page_id(p[0], i), convo_thread_page_id(p[1], i));
        ck_assert_int_eq(convo_thread_page_created_at(p[0], i),
                         convo_thread_page_created_at(p[1], i));
        ck_assert_int_eq(convo_thread_page_updated_at(p[0], i),
                         convo_thread_page_updated_at(p[1], i));
        ck_assert_int_eq(convo_thread_page_length(p[0], i), convo_thread_page_length(p[1], i));
        ck_assert_str_eq(convo_thread_page_cursor(p[0], i), convo_thread_page_cursor(p[1], i));
    }
    convo_thread_page_free(p[0]);
    convo_thread_page_free(p[1]);
}

/* Every kind of write keeps the index in step, and in the activity order the
 * thread written last comes first. */
START_TEST(test_every_write)
{
    const char *path = db_path("writes");
    convo_store *s = open_keys(path, NULL, USER_ID);
    const char *const order[] = {"appended", "extra", "put", "put-log", "rewritten", "forked",
                                 "imported"};
    for (size_t i = 0; i < sizeof order / sizeof *order; i++)
        save(s, order[i], "{\"user_id\":\"u\"}");
    append1(s, "appended");
    append1(s, "rewritten");
    save(s, "extra", "{\"more\":1}");
    convo_error err;
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = "put";
    cp.checkpoint_id = "c1";
    ck_assert_int_eq(convo_checkpoint_put(s, &cp, &err), 0);
    cp.thread_id = "put-log";
    cp.messages = &MSG;
    cp.nmessages = 1;
    cp.expected_length = 0;
    cp.log_length = 1;
    ck_assert_int_eq(convo_checkpoint_put(s, &cp, &err), 0);
    convo_rewrite_opts ro = CONVO_REWRITE_OPTS_INIT;
    ck_assert_int_eq(convo_replace_tail(s, "rewritten", 0, &MSG, NULL, 1, &ro, NULL, &err), 0);
    ck_assert_int_eq(convo_thread_fork(s, "appended", "forked-2", -1, &err), 0);
    ck_assert_int_eq(convo_thread_delete(s, "forked", &err), 0);
    ck_assert_int_eq(convo_thread_delete(s, "imported", &err), 0);
    append1(s, "fresh"); /* created by an append */
    assert_ids(s, "{\"user_id\":\"u\"}", CONVO_ORDER_RECENT,
               "forked-2 rewritten put-log put extra appended");
    assert_ids(s, NULL, CONVO_ORDER_CREATED,
               "fresh forked-2 rewritten put-log put extra appended");
    assert_index_consistent(path);
    /* the listing of ids and times read from the activity order alone gives
     * the rows the full one gives */
    assert_same_rows(s, NULL);
    assert_same_rows(s, "{\"user_id\":\"u\"}");
    convo_close(s);
}
END_TEST
END_TEST

/* ------------------------------------------------------------ the open entry */

/* The pages (WAL frames) fn(s, tid) writes: the WAL is emptied first, and the
 * frames it then holds counted by a passive checkpoint. */
static int pages_written(const char *path, convo_store *s, const char *tid,
                         void (*fn)(convo_store *, const char *))
{
    sqlite3 *db;
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    exec_db(db, "PRAGMA wal_checkpoint(TRUNCATE)");
    fn(s, tid);
    ck_assert_int_eq(sqlite3_prepare_v2(db, "PRAGMA wal_checkpoint(PASSIVE)", -1, &st, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    ck_assert_int_eq(sqlite3_column_int(st, 0), 0); /* not busy */
    int frames = sqlite3_column_int(st, 1);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return frames;
}

static void save_u1(convo_store *s, const char *tid)
{
    save(s, tid, "{\"user_id\":\"u1\"}");
}

static void save_u2(convo_store *s, const char *tid)
{
    save(s, tid, "{\"user_id\":\"u2\"}");
}

/* An append to the thread written last (its entry opened by its creation or
 * its second write in a row) writes its message's page and nothing of the
 * index; to another thread, the pages of its entries too (the activity
 * order's and its key value's), and the second write in a row once more (the
 * entry opens). */
START_TEST(test_open_entry_one_page)
{
    const char *path = db_path("pages");
    convo_store *s = open_keys(path, NULL, USER_ID);
    save(s, "a", "{\"user_id\":\"u1\"}");
    save(s, "b", "{\"user_id\":\"u1\"}");
    append1(s, "a");
    append1(s, "a");
    ck_assert_int_eq(pages_written(path, s, "a", append1), 1);
    ck_assert_int_eq(pages_written(path, s, "a", append1), 1);
    ck_assert_int_eq(pages_written(path, s, "b", append1), 3);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_activity WHERE id = 'b'"
                                   " AND updated_at = " OPEN),
                     0);
    ck_assert_int_eq(pages_written(path, s, "b", append1), 3);
    ck_assert_int_eq(pages_written(path, s, "b", append1), 1);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_activity WHERE id = 'b'"
                                   " AND updated_at = " OPEN),
                     1);
    /* a save_extra repeating the indexed value rewrites the thread row alone;
     * one that changes it, the key rows and their indexes too */
    ck_assert_int_eq(pages_written(path, s, "b", save_u1), 1);
    ck_assert_int_gt(pages_written(path, s, "b", save_u2), 1);
    assert_ids(s, "{\"user_id\":\"u2\"}", CONVO_ORDER_RECENT, "b");
    assert_ids(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, "a");
    /* the open thread has no row in its key's activity order (layout 15) */
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_key_recent WHERE id = 'b'"), 0);
    convo_close(s);
    assert_index_consistent(path);
}
END_TEST

/* The pages of B-tree `name` (a table or index) that fn(s, tid) writes: the
 * WAL is emptied first, then the page number of each frame fn's commit wrote
 * is read from the -wal file and named by dbstat. */
static int pages_of(const char *path, const char *name, convo_store *s, const char *tid,
                    void (*fn)(convo_store *, const char *))
{
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    exec_db(db, "PRAGMA wal_checkpoint(TRUNCATE)");
    fn(s, tid);
    char wal[600];
    snprintf(wal, sizeof wal, "%s-wal", path);
    FILE *f = fopen(wal, "rb");
    ck_assert_ptr_nonnull(f);
    unsigned char header[24];
    int pages = 0;
    ck_assert_int_eq(fseek(f, 32, SEEK_SET), 0); /* the WAL header */
    while (fread(header, 1, sizeof header, f) == sizeof header) {
        long long page = (long long)header[0] << 24 | header[1] << 16 | header[2] << 8 | header[3];
        sqlite3_stmt *st;
        ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT count(*) FROM dbstat"
                                                " WHERE pageno = ?1 AND name = ?2",
                                            -1, &st, NULL),
                         SQLITE_OK);
        sqlite3_bind_int64(st, 1, page);
        sqlite3_bind_text(st, 2, name, -1, SQLITE_STATIC);
        ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
        pages += sqlite3_column_int(st, 0) > 0;
        sqlite3_finalize(st);
        ck_assert_int_eq(fseek(f, 4096, SEEK_CUR), 0); /* the page (SQLite's default size) */
    }
    fclose(f);
    sqlite3_close(db);
    return pages;
}

/* Threads c0000..c<n-1>, alternately of users u0 and u1: each user's range
 * of the key orders spans leaves of its own. */
static void fill_two_users(convo_store *s, int n)
{
    for (int i = 0; i < n; i++) {
        char tid[32], patch[64];
        snprintf(tid, sizeof tid, "c%04d", i);
        snprintf(patch, sizeof patch, "{\"user_id\":\"u%d\"}", i % 2);
        save(s, tid, patch);
    }
}

static void save_u0(convo_store *s, const char *tid)
{
    save(s, tid, "{\"user_id\":\"u0\"}");
}

/* A thread's creation with a key writes one leaf of the key's activity order
 * (convo_key_recent): the thread it closes gets its row there, in its own
 * user's range, and the new one gets none while it is open (layout 15; it
 * wrote its open row in its user's range too before, a second leaf). */
START_TEST(test_creation_one_key_leaf)
{
    const char *path = db_path("create");
    convo_store *s = open_keys(path, NULL, USER_ID);
    fill_two_users(s, 800); /* c0799, of u1, is open */
    ck_assert_int_eq(pages_of(path, "convo_key_recent", s, "x", save_u0), 1);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_key_recent WHERE id = 'c0799'"),
                     1);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_key_recent WHERE id = 'x'"), 0);
    /* and a save_extra to the open thread that repeats its value writes none */
    ck_assert_int_eq(pages_of(path, "convo_key_recent", s, "x", save_u0), 0);
    convo_close(s);
    assert_index_consistent(path);
}
END_TEST

/* "id@updated_at#length ..." of the whole listing walked a row at a time
 * through the cursors (bare: ids and times only, else with the extra). */
static char *walk(convo_store *s, const char *where, int reverse, int bare)
{
    static char out[2][4096];
    static int n;
    char *b = out[n++ % 2];
    size_t used = 0;
    char after[1024] = "";
    b[0] = '\0';
    for (int pages = 0; pages < 100; pages++) {
        convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
        o.where_json = where;
        o.reverse = reverse;
        o.with_extra = !bare;
        o.limit = 1;
        o.after = after[0] ? after : NULL;
        convo_thread_page *p;
        convo_error err;
        ck_assert_int_eq(convo_thread_list_ex(s, &o, &p, &err), 0);
        if (convo_thread_page_count(p) == 1) {
            used += (size_t)snprintf(b + used, 4096 - used, "%s%s@%lld#%lld", used ? " " : "",
                                     convo_thread_page_id(p, 0),
                                     (long long)convo_thread_page_updated_at(p, 0),
                                     (long long)convo_thread_page_length(p, 0));
            snprintf(after, sizeof after, "%s", convo_thread_page_cursor(p, 0));
        }
        int done = convo_thread_page_count(p) == 0;
        convo_thread_page_free(p);
        if (done)
            return b;
    }
    ck_abort_msg("the walk did not end");
    return NULL;
}

/* Every way of walking a listing gives the same rows, the open entry with its
 * thread's own time and length, once, in its place. */
static void assert_walks_agree(convo_store *s, const char *where, const char *want_ids)
{
    char *first = strdup(walk(s, where, 0, 0));
    ck_assert_str_eq(walk(s, where, 0, 1), first);
    char ids[1024] = "";
    for (char *w = first; *w;) { /* the ids alone */
        size_t len = strcspn(w, "@");
        strncat(ids, w, len);
        w += strcspn(w, " ");
        if (*w)
            strcat(ids, " "), w++;
    }
    ck_assert_msg(strcmp(ids, want_ids) == 0, "where %s: [%s], want [%s]", where ? where : "-",
                  ids, want_ids);
    /* oldest first: the same rows the other way round */
    char *reversed = strdup(walk(s, where, 1, 0)), back[4096] = "";
    ck_assert_str_eq(walk(s, where, 1, 1), reversed);
    for (char *end = reversed + strlen(reversed); end > reversed;) {
        char *start = end;
        while (start > reversed && start[-1] != ' ')
            start--;
        strncat(back, start, (size_t)(end - start));
        end = start > reversed ? start - 1 : reversed;
        if (end > reversed)
            strcat(back, " ");
    }
    ck_assert_str_eq(back, first);
    free(reversed);
    free(first);
}

/* The open entry in listings: appends to it are listed with their time and
 * length; a write to another thread gives it them. */
START_TEST(test_open_entry_listed)
{
    const char *path = db_path("open");
    convo_store *s = open_keys(path, NULL, USER_ID);
    save(s, "a", "{\"user_id\":\"u1\"}");
    save(s, "b", "{\"user_id\":\"u2\"}");
    save(s, "c", "{\"user_id\":\"u1\"}");
    for (int i = 0; i < 3; i++)
        append1(s, "c");
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_activity WHERE id = 'c'"
                                   " AND updated_at = " OPEN),
                     1);
    long long last = sql_int(path, "SELECT max(created_at) FROM convo_messages");
    convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
    convo_thread_page *p;
    convo_error err;
    ck_assert_int_eq(convo_thread_list_ex(s, &o, &p, &err), 0);
    ck_assert_str_eq(convo_thread_page_id(p, 0), "c");
    ck_assert_int_eq(convo_thread_page_updated_at(p, 0), last);
    ck_assert_int_eq(convo_thread_page_length(p, 0), 3);
    convo_thread_page_free(p);
    assert_same_rows(s, NULL);
    assert_same_rows(s, "{\"user_id\":\"u1\"}");
    assert_walks_agree(s, NULL, "c b a");
    assert_walks_agree(s, "{\"user_id\":\"u1\"}", "c a");
    /* b written: c gets its own time back */
    append1(s, "b");
    ck_assert_int_eq(sql_int(path, "SELECT updated_at FROM convo_activity WHERE id = 'c'"), last);
    ck_assert_int_eq(sql_int(path, "SELECT length FROM convo_activity WHERE id = 'c'"), 3);
    ck_assert_int_eq(sql_int(path, "SELECT updated_at FROM convo_key_recent WHERE id = 'c'"),
                     last);
    assert_walks_agree(s, NULL, "b c a");
    assert_walks_agree(s, "{\"user_id\":\"u1\"}", "c a");
    assert_index_consistent(path);
    append1(s, "a");
    assert_walks_agree(s, "{\"user_id\":\"u1\"}", "a c");
    assert_walks_agree(s, NULL, "a b c");
    assert_index_consistent(path);
    /* the open thread deleted, then another written */
    ck_assert_int_eq(convo_thread_delete(s, "a", &err), 0);
    assert_walks_agree(s, NULL, "b c");
    assert_index_consistent(path);
    append1(s, "c");
    assert_walks_agree(s, NULL, "c b");
    assert_walks_agree(s, "{\"user_id\":\"u1\"}", "c");
    convo_close(s);
    assert_index_consistent(path);
}
END_TEST

/* Layout 5 (the layout-4 file through migrate-4-5.sql, as a layout-5 libconvo
 * left it: every entry at its thread's time) opens as layout 6 unchanged; the
 * first write opens an entry. */
START_TEST(test_migration_5_to_6)
{
    const char *path = db_path("v5");
    make_v4(path);
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    char *sql = slurp("migrate-4-5.sql");
    exec_db(db, sql);
    free(sql);
    exec_db(db, "UPDATE convo_meta SET value = '5' WHERE key = 'schema_version'");
    sqlite3_close(db);
    convo_store *s = open_keys(path, NULL, USER_ID);
    ck_assert_int_eq(sql_int(path, "SELECT value FROM convo_meta WHERE key = 'schema_version'"), 17);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_activity WHERE updated_at = " OPEN),
                     0);
    ck_assert_int_eq(sql_int(path, "SELECT updated_at FROM convo_activity WHERE id = 'a'"), 300);
    assert_walks_agree(s, NULL, "c a b");
    assert_walks_agree(s, "{\"user_id\":\"u1\"}", "a b");
    append1(s, "b");
    append1(s, "b");
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_activity WHERE id = 'b'"
                                   " AND updated_at = " OPEN),
                     1);
    assert_walks_agree(s, NULL, "b c a");
    assert_walks_agree(s, "{\"user_id\":\"u1\"}", "b a");
    convo_close(s);
    assert_index_consistent(path);
}
END_TEST

/* A thread whose activity is ahead of the clock (written while the clock was
 * set an hour on): a write to another thread still makes that one the newest,
 * so the open entry is the newest in fact, and the order stays the times'. */
START_TEST(test_open_entry_clock_behind)
{
    const char *path = db_path("clock");
    convo_store *s = open_keys(path, NULL, USER_ID);
    save(s, "x", "{\"user_id\":\"u1\"}");
    append1(s, "x"); /* open: its time is read from its row */
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    exec_db(db, "UPDATE convo_threads SET updated_at = updated_at + 3600000000 WHERE id = 'x'");
    sqlite3_close(db);
    long long x_at = sql_int(path, "SELECT updated_at FROM convo_threads WHERE id = 'x'");
    save(s, "y", "{\"user_id\":\"u1\"}");
    append1(s, "z");
    long long y_at = sql_int(path, "SELECT updated_at FROM convo_threads WHERE id = 'y'");
    long long z_at = sql_int(path, "SELECT m.created_at FROM convo_messages AS m JOIN convo_threads"
                                   " AS t ON t.num = m.key >> 32 WHERE t.id = 'z'");
    ck_assert_int_gt(y_at, x_at);
    ck_assert_int_gt(z_at, y_at);
    assert_walks_agree(s, NULL, "z y x");
    assert_walks_agree(s, "{\"user_id\":\"u1\"}", "y x");
    append1(s, "x");
    assert_walks_agree(s, NULL, "x z y");
    convo_close(s);
    assert_index_consistent(path);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--check") == 0)
        return check_file(argv[2]);
    if (argc != 3) {
        fprintf(stderr, "usage: %s SQLDIR DIR\n", argv[0]);
        return 2;
    }
    sqldir = argv[1];
    dir = argv[2];
    Suite *suite = suite_create("sqlite-index");
    TCase *tc = tcase_create("sqlite-index");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_page_cost_flat);
    tcase_add_test(tc, test_unindexed_filter_scans);
    tcase_add_test(tc, test_migration_4_to_5);
    tcase_add_test(tc, test_layout4_writer);
    tcase_add_test(tc, test_ttl_and_delete);
    tcase_add_test(tc, test_staged_import_not_listed);
    tcase_add_test(tc, test_index_values);
    tcase_add_test(tc, test_every_write);
    tcase_add_test(tc, test_open_entry_one_page);
    tcase_add_test(tc, test_creation_one_key_leaf);
    tcase_add_test(tc, test_open_entry_listed);
    tcase_add_test(tc, test_open_entry_clock_behind);
    tcase_add_test(tc, test_migration_5_to_6);
    suite_add_tcase(suite, tc);
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
