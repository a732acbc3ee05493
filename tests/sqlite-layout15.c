/* sqlite-layout15.c — layout 15's open thread kept out of its keys' activity
 * orders (docs/sqlite.md, "The open entry"): the migration from layout 14
 * takes the open rows out of the table it renames convo_key_recent, in the
 * open's transaction or not at all; the listings by a key's value still give
 * the open thread first, with its own time and length; a layout-14 libconvo
 * that had the file open finds its table gone and writes nothing.
 * `tests/sqlite_layout15 DIR` works in DIR. */
#include "sqlite_layout.h"

#include <stdlib.h>
#include <string.h>

#define OPEN "9223372036854775807"
static const char *const USER_ID[] = {"user_id", NULL};

static convo_store *open_keys(const char *path)
{
    return open_db_keys(path, USER_ID);
}

static void append1(convo_store *s, const char *tid)
{
    const char *msg = "{\"role\":\"user\",\"content\":\"hi\"}";
    size_t len = strlen(msg);
    convo_error err;
    ck_assert_msg(convo_append(s, tid, &msg, &len, 1, NULL, NULL, &err) == 0, "append %s: %s",
                  tid, err.message);
}

/* "id#length ..." of the listing of where, in activity order, a row a page */
static char *ids(convo_store *s, const char *where, int reverse)
{
    static char out[1024];
    char after[1024] = "";
    size_t used = 0;
    out[0] = '\0';
    for (;;) {
        convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
        o.where_json = where;
        o.reverse = reverse;
        o.limit = 1;
        o.after = after[0] ? after : NULL;
        convo_thread_page *p;
        convo_error err;
        ck_assert_int_eq(convo_thread_list_ex(s, &o, &p, &err), 0);
        size_t n = convo_thread_page_count(p);
        if (n)
            used += (size_t)snprintf(out + used, sizeof out - used, "%s%s#%lld", used ? " " : "",
                                     convo_thread_page_id(p, 0),
                                     (long long)convo_thread_page_length(p, 0));
        if (n)
            snprintf(after, sizeof after, "%s", convo_thread_page_cursor(p, 0));
        convo_thread_page_free(p);
        if (!n)
            return out;
    }
}

/* a, b of u1 and c of u2 with messages, c written last (open) */
static void fill(const char *path)
{
    convo_store *s = open_keys(path);
    save_ok(s, "a", "{\"user_id\":\"u1\"}");
    append1(s, "a");
    save_ok(s, "b", "{\"user_id\":\"u2\"}");
    save_ok(s, "c", "{\"user_id\":\"u1\"}");
    append1(s, "c");
    append1(s, "c");
    convo_close(s);
}

/* A new store: the open thread has no row in its key's activity order, and
 * is listed first all the same; written past, it gets its row. */
START_TEST(test_open_thread_out_of_key_order)
{
    const char *path = db_path("open");
    fill(path);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_key_recent WHERE id = 'c'"), 0);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_key_recent"), 2);
    convo_store *s = open_keys(path);
    ck_assert_str_eq(ids(s, "{\"user_id\":\"u1\"}", 0), "c#2 a#1");
    ck_assert_str_eq(ids(s, "{\"user_id\":\"u1\"}", 1), "a#1 c#2");
    ck_assert_str_eq(ids(s, "{\"user_id\":\"u2\"}", 0), "b#0");
    append1(s, "b");
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_key_recent WHERE id = 'c'"
                                   " AND updated_at <> " OPEN),
                     1);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_key_recent WHERE id = 'b'"), 1);
    append1(s, "b"); /* b's second write in a row: open, out of its key's order */
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_key_recent WHERE id = 'b'"), 0);
    ck_assert_str_eq(ids(s, "{\"user_id\":\"u2\"}", 0), "b#2");
    ck_assert_str_eq(ids(s, "{\"user_id\":\"u2\"}", 1), "b#2");
    ck_assert_str_eq(ids(s, "{\"user_id\":\"u1\"}", 0), "c#2 a#1");
    convo_close(s);
}
END_TEST

/* The open thread as another store on the file writes: each listing sees
 * the thread written last by whichever store wrote it, the listing store's
 * note of it (list.c, open_holds) renewed when the file changed. */
START_TEST(test_open_thread_of_another_store)
{
    const char *path = db_path("two");
    fill(path);
    convo_store *s = open_keys(path), *other = open_keys(path);
    ck_assert_str_eq(ids(s, "{\"user_id\":\"u1\"}", 0), "c#2 a#1");
    ck_assert_str_eq(ids(s, "{\"user_id\":\"u2\"}", 0), "b#0");
    save_ok(other, "d", "{\"user_id\":\"u2\"}"); /* d open, c closed, by the other store */
    ck_assert_str_eq(ids(s, "{\"user_id\":\"u2\"}", 0), "d#0 b#0");
    ck_assert_str_eq(ids(s, "{\"user_id\":\"u1\"}", 0), "c#2 a#1");
    append1(other, "a");
    append1(other, "a"); /* a open */
    ck_assert_str_eq(ids(s, "{\"user_id\":\"u1\"}", 0), "a#3 c#2");
    ck_assert_str_eq(ids(s, "{\"user_id\":\"u1\"}", 1), "c#2 a#3");
    save_ok(other, "a", "{\"user_id\":\"u2\"}"); /* the open thread's value changes */
    ck_assert_str_eq(ids(s, "{\"user_id\":\"u1\"}", 0), "c#2");
    ck_assert_str_eq(ids(s, "{\"user_id\":\"u2\"}", 0), "a#3 d#0 b#0");
    save_ok(s, "e", "{\"user_id\":\"u1\"}"); /* and by the listing store itself */
    ck_assert_str_eq(ids(s, "{\"user_id\":\"u1\"}", 0), "e#0 c#2");
    ck_assert_str_eq(ids(other, "{\"user_id\":\"u1\"}", 0), "e#0 c#2");
    convo_close(other);
    convo_close(s);
}
END_TEST

/* A layout-14 file (the open thread's rows at the open time, in
 * convo_thread_recent) opens as layout 15: the open rows go, the table is
 * renamed, the listings are the same. */
START_TEST(test_migration_14_to_15)
{
    const char *path = db_path("fourteen");
    fill(path);
    exec_raw(path, LAYOUT_16_TO_15 LAYOUT_15_TO_14 "UPDATE convo_meta SET value = '14' WHERE key = 'schema_version'");
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_thread_recent WHERE id = 'c'"
                                   " AND updated_at = " OPEN),
                     1);
    convo_store *s = open_db(path); /* without declaring the keys: the recorded ones rule */
    ck_assert_int_eq(schema_version_of(path), SQLITE_LAYOUT_NOW);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM sqlite_master"
                                   " WHERE name = 'convo_thread_recent'"),
                     0);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_key_recent"), 2);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_key_recent"
                                   " WHERE updated_at = " OPEN),
                     0);
    ck_assert_str_eq(ids(s, "{\"user_id\":\"u1\"}", 0), "c#2 a#1");
    ck_assert_str_eq(ids(s, "{\"user_id\":\"u1\"}", 1), "a#1 c#2");
    append1(s, "a"); /* c gets its row at its time, a opens */
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_key_recent WHERE id = 'c'"), 1);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_key_recent WHERE id = 'a'"), 1);
    append1(s, "a");
    ck_assert_str_eq(ids(s, "{\"user_id\":\"u1\"}", 0), "a#3 c#2");
    /* the trigger for a layout-4 writer names the new table */
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM sqlite_master WHERE type = 'trigger'"
                                   " AND name = 'convo_thread_keys_stale'"
                                   " AND sql LIKE '%convo_key_recent%'"),
                     1);
    convo_close(s);
    exec_raw(path, "PRAGMA integrity_check");
}
END_TEST

/* The migration runs in the open's one transaction: a layout-14 file where
 * the table cannot be renamed (one of the new name is there) stays layout
 * 14, its open row kept. */
START_TEST(test_migration_fails_whole)
{
    const char *path = db_path("whole");
    fill(path);
    assert_migration_fails_whole(path,
                                 LAYOUT_16_TO_15 LAYOUT_15_TO_14 "CREATE TABLE convo_key_recent(x);"
                                 "UPDATE convo_meta SET value = '14' WHERE key = 'schema_version'",
                                 14);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_thread_recent WHERE id = 'c'"
                                   " AND updated_at = " OPEN),
                     1);
}
END_TEST

/* A layout-14 libconvo that had the file open when it was migrated: its
 * statements on the keys' activity order (here its recent-move.sql, closing
 * the open thread, and its recent-add.sql) name a table that is gone and
 * fail, writing nothing. */
START_TEST(test_layout14_writer_refused)
{
    const char *path = db_path("writer14");
    fill(path);
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    const char *const layout14[] = {
        "UPDATE convo_thread_recent SET updated_at = 5, length = 2"
        " WHERE key = 'user_id' AND value = '\"u1\"' AND updated_at = " OPEN " AND id = 'c'",
        "INSERT INTO convo_thread_recent(key, value, updated_at, id, thread, created_at, length)"
        " SELECT key, value, " OPEN ", id, thread, created_at, 0 FROM convo_thread_keys"
        " WHERE thread = 3"};
    for (int i = 0; i < 2; i++) {
        char *msg = NULL;
        ck_assert_int_eq(sqlite3_exec(db, layout14[i], NULL, NULL, &msg), SQLITE_ERROR);
        ck_assert_ptr_nonnull(msg);
        ck_assert_ptr_nonnull(strstr(msg, "no such table"));
        sqlite3_free(msg);
    }
    sqlite3_close(db);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_key_recent"), 2);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    Suite *suite = suite_create("layout15");
    TCase *tc = tcase_create("layout15");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_open_thread_out_of_key_order);
    tcase_add_test(tc, test_open_thread_of_another_store);
    tcase_add_test(tc, test_migration_14_to_15);
    tcase_add_test(tc, test_migration_fails_whole);
    tcase_add_test(tc, test_layout14_writer_refused);
    suite_add_tcase(suite, tc);
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed ? 1 : 0;
}
