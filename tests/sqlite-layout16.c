/* sqlite-layout16.c — layout 16's key values in the thread row (docs/sqlite.md,
 * "The thread index"): each thread's values at the indexed keys in
 * convo_threads.key_values, the orders by creation and by id as the table
 * convo_key_threads and its index, where convo_thread_keys and its two
 * indexes were; the migration from layout 15 in the open's transaction or not
 * at all; a layout-15 libconvo that had the file open writes nothing to the
 * index; a malformed key_values is CONVO_ECORRUPT, nothing written.
 * `tests/sqlite_layout16 DIR` works in DIR. */
#include "sqlite_layout.h"

#include <stdlib.h>
#include <string.h>

static const char *const KEYS[] = {"project", "user_id", NULL};

static convo_store *open_keys(const char *path)
{
    return open_db_keys(path, KEYS);
}

static int append1(convo_store *s, const char *tid)
{
    const char *msg = "{\"role\":\"user\",\"content\":\"hi\"}";
    size_t len = strlen(msg);
    convo_error err;
    return convo_append(s, tid, &msg, &len, 1, NULL, NULL, &err);
}

/* the ids of where's listing in order, one page of 50 */
static char *ids(convo_store *s, const char *where, int order, int reverse)
{
    static char out[1024];
    convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
    o.where_json = where;
    o.order = order;
    o.reverse = reverse;
    o.limit = 50;
    convo_thread_page *p;
    convo_error err;
    ck_assert_int_eq(convo_thread_list_ex(s, &o, &p, &err), 0);
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < convo_thread_page_count(p); i++)
        used += (size_t)snprintf(out + used, sizeof out - used, "%s%s", i ? " " : "",
                                 convo_thread_page_id(p, i));
    convo_thread_page_free(p);
    return out;
}

/* the key values of thread tid as stored */
static char *key_values(const char *path, const char *tid)
{
    static char out[512];
    sqlite3 *db;
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT coalesce(key_values, 'NULL') FROM"
                                            " convo_threads WHERE id = ?1",
                                        -1, &st, NULL),
                     SQLITE_OK);
    sqlite3_bind_text(st, 1, tid, -1, SQLITE_STATIC);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    snprintf(out, sizeof out, "%s", (const char *)sqlite3_column_text(st, 0));
    sqlite3_finalize(st);
    sqlite3_close(db);
    return out;
}

/* a (u1, p1), b (u2), c (u1, p2), written in that order, c open */
static void fill(const char *path)
{
    convo_store *s = open_keys(path);
    save_ok(s, "a", "{\"user_id\":\"u1\",\"project\":\"p1\",\"title\":\"x\"}");
    ck_assert_int_eq(append1(s, "a"), 0);
    save_ok(s, "b", "{\"user_id\":\"u2\"}");
    save_ok(s, "c", "{\"project\":\"p2\",\"user_id\":\"u1\"}");
    ck_assert_int_eq(append1(s, "c"), 0);
    convo_close(s);
}

/* The values in the row say which rows the thread has; a change of a value,
 * a value the index does not keep, a fork and a delete keep them so. */
START_TEST(test_key_values)
{
    const char *path = db_path("values");
    fill(path);
    ck_assert_str_eq(key_values(path, "a"), "7:project4:\"p1\"7:user_id4:\"u1\"");
    ck_assert_str_eq(key_values(path, "b"), "7:user_id4:\"u2\"");
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_key_threads"), 5);
    convo_store *s = open_keys(path);
    ck_assert_str_eq(ids(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_CREATED, 0), "c a");
    ck_assert_str_eq(ids(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_ID, 1), "c a");
    ck_assert_str_eq(ids(s, "{\"project\":\"p1\"}", CONVO_ORDER_RECENT, 0), "a");
    save_ok(s, "a", "{\"user_id\":\"u2\",\"title\":\"y\"}");
    ck_assert_str_eq(key_values(path, "a"), "7:project4:\"p1\"7:user_id4:\"u2\"");
    ck_assert_str_eq(ids(s, "{\"user_id\":\"u2\"}", CONVO_ORDER_CREATED, 1), "a b");
    ck_assert_str_eq(ids(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, 0), "c");
    save_ok(s, "a", "{\"project\":{\"not\":\"kept\"}}");
    ck_assert_str_eq(key_values(path, "a"), "7:user_id4:\"u2\"");
    ck_assert_str_eq(ids(s, "{\"project\":\"p1\"}", CONVO_ORDER_ID, 0), "");
    save_ok(s, "a", "{\"user_id\":[1]}");
    ck_assert_str_eq(key_values(path, "a"), "NULL");
    convo_error err;
    ck_assert_int_eq(convo_thread_fork(s, "c", "d", -1, &err), 0);
    ck_assert_str_eq(key_values(path, "d"), key_values(path, "c"));
    ck_assert_str_eq(ids(s, "{\"project\":\"p2\"}", CONVO_ORDER_CREATED, 0), "d c");
    ck_assert_int_eq(convo_thread_delete(s, "c", &err), 0);
    ck_assert_str_eq(ids(s, "{\"project\":\"p2\"}", CONVO_ORDER_ID, 0), "d");
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_key_threads"), 3); /* b, d x 2 */
    convo_close(s);
}
END_TEST

/* A layout-15 file (convo_thread_keys) opens as layout 16: the values go
 * into the rows, the rows into convo_key_threads, the listings the same. */
START_TEST(test_migration_15_to_16)
{
    const char *path = db_path("fifteen");
    fill(path);
    exec_raw(path, LAYOUT_16_TO_15 "UPDATE convo_meta SET value = '15' WHERE key = 'schema_version'");
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_thread_keys"), 5);
    convo_store *s = open_db(path);
    ck_assert_int_eq(schema_version_of(path), SQLITE_LAYOUT_NOW);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM sqlite_master"
                                   " WHERE type <> 'trigger' AND name LIKE 'convo_thread_keys%'"),
                     0);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_key_threads"), 5);
    /* the pairs in whatever order the migration wrote them */
    const char *a = key_values(path, "a");
    ck_assert_msg(strcmp(a, "7:project4:\"p1\"7:user_id4:\"u1\"") == 0 ||
                      strcmp(a, "7:user_id4:\"u1\"7:project4:\"p1\"") == 0,
                  "%s", a);
    ck_assert_str_eq(key_values(path, "b"), "7:user_id4:\"u2\"");
    ck_assert_str_eq(ids(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_CREATED, 0), "c a");
    ck_assert_str_eq(ids(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_ID, 0), "a c");
    ck_assert_str_eq(ids(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, 0), "c a");
    ck_assert_int_eq(append1(s, "a"), 0); /* moves a's rows, closes c's entry */
    ck_assert_int_eq(append1(s, "a"), 0);
    save_ok(s, "c", "{\"user_id\":\"u3\"}");
    ck_assert_str_eq(ids(s, "{\"user_id\":\"u1\"}", CONVO_ORDER_RECENT, 0), "a");
    ck_assert_str_eq(ids(s, "{\"user_id\":\"u3\"}", CONVO_ORDER_ID, 0), "c");
    ck_assert_str_eq(ids(s, "{\"project\":\"p2\"}", CONVO_ORDER_RECENT, 0), "c");
    convo_close(s);
    exec_raw(path, "PRAGMA integrity_check");
}
END_TEST

/* The migration runs in the open's one transaction: a layout-15 file where
 * the new table cannot be made (one of its name is there) stays layout 15,
 * without the column, its key rows kept. */
START_TEST(test_migration_fails_whole)
{
    const char *path = db_path("whole");
    fill(path);
    assert_migration_fails_whole(path,
                                 LAYOUT_16_TO_15 "CREATE TABLE convo_key_threads(x);"
                                 "UPDATE convo_meta SET value = '15' WHERE key = 'schema_version'",
                                 15);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM pragma_table_info('convo_threads')"
                                   " WHERE name = 'key_values'"),
                     0);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_thread_keys"), 5);
}
END_TEST

/* A layout-15 libconvo that had the file open when it was migrated: its
 * statements on the key rows (its keys-put.sql, a save_extra's, and its
 * keys-of.sql, which every write that moves or closes an entry reads) name a
 * table that is gone and fail, writing nothing. */
START_TEST(test_layout15_writer_refused)
{
    const char *path = db_path("writer15");
    fill(path);
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    const char *const layout15[] = {
        "INSERT INTO convo_thread_keys(thread, key, value, id, created_at)"
        " SELECT num, 'user_id', '\"u9\"', id, created_at FROM convo_threads WHERE id = 'b'"
        " ON CONFLICT(thread, key) DO UPDATE SET value = excluded.value",
        "SELECT key, value, id FROM convo_thread_keys WHERE thread = 1"};
    for (int i = 0; i < 2; i++) {
        char *msg = NULL;
        ck_assert_int_eq(sqlite3_exec(db, layout15[i], NULL, NULL, &msg), SQLITE_ERROR);
        ck_assert_ptr_nonnull(msg);
        ck_assert_ptr_nonnull(strstr(msg, "no such table"));
        sqlite3_free(msg);
    }
    sqlite3_close(db);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_key_threads"
                                   " WHERE value = '\"u9\"'"),
                     0);
}
END_TEST

/* A thread whose key_values is not pairs of "LEN:TEXT": a write that must
 * move its rows answers CONVO_ECORRUPT and writes nothing. */
START_TEST(test_malformed_key_values)
{
    const char *path = db_path("malformed");
    fill(path);
    const char *const bad[] = {"7:user_id", "7:user_id4:\"u2\"x", "9:user_id4:\"u2\"",
                               "7:user_id99999999999999999999:\"u2\""};
    for (int i = 0; i < 4; i++) {
        char sql[200];
        snprintf(sql, sizeof sql, "UPDATE convo_threads SET key_values = '%s' WHERE id = 'b'",
                 bad[i]);
        exec_raw(path, sql);
        convo_store *s = open_keys(path);
        long long messages = sql_int(path, "SELECT count(*) FROM convo_messages");
        ck_assert_int_eq(append1(s, "b"), CONVO_ECORRUPT); /* b's rows move: read */
        ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_messages"), messages);
        convo_close(s);
    }
}
END_TEST

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    Suite *suite = suite_create("layout16");
    TCase *tc = tcase_create("layout16");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_key_values);
    tcase_add_test(tc, test_migration_15_to_16);
    tcase_add_test(tc, test_migration_fails_whole);
    tcase_add_test(tc, test_layout15_writer_refused);
    tcase_add_test(tc, test_malformed_key_values);
    suite_add_tcase(suite, tc);
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed ? 1 : 0;
}
