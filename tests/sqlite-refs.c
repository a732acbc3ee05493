/* sqlite-refs.c — the SQLite driver's put with log references
 * (checkpoint_put_refs) beyond the conformance suite: one write transaction,
 * so a statement failing after a swap leaves the messages, the checkpoint,
 * the swapped values, the raised log_length and the thread's row as they
 * were; the generation condition of a put that appends nothing.
 * `tests/sqlite_refs DIR` works in DIR. */
#include "log_refs.h"
#include "sqlite_layout.h"
#include <stdlib.h>
#include <string.h>

/* What the file holds, read behind the driver's back: one line per table of
 * thread "t" (row, messages, checkpoints with log_length, write values,
 * channel values in rows and in the lists). */
static char *snapshot(const char *path)
{
    static const char *const queries[] = {
        "SELECT num || ' ' || generation || ' ' || updated_at || ' ' || coalesce(expires_at, '')"
        " FROM convo_threads WHERE id = 't'",
        "SELECT group_concat(key || ':' || hex(body), ',') FROM convo_messages",
        "SELECT group_concat(id || ':' || log_length, ',') FROM (SELECT id, log_length FROM"
        " convo_checkpoints ORDER BY key)",
        "SELECT group_concat(hex(pending), ',') FROM (SELECT pending FROM convo_checkpoints"
        " ORDER BY key)", /* layout 10: pending writes in the row */
        "SELECT group_concat(key || ':' || hex(pending), ',') FROM (SELECT key, pending FROM"
        " convo_checkpoint_pending ORDER BY key)", /* layout 13: the newest's, apart */
        "SELECT group_concat(channel || ':' || type || ':' || hex(value), ',') FROM convo_blobs",
        "SELECT group_concat(hex(channel_list), ',') FROM (SELECT channel_list FROM"
        " convo_checkpoints ORDER BY key)", /* layout 11: small values in the lists */
        "SELECT group_concat(updated_at || ':' || length, ',') FROM convo_activity"};
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    size_t cap = 1, len = 0;
    char *out = calloc(1, 1);
    for (size_t i = 0; i < sizeof queries / sizeof *queries; i++) {
        sqlite3_stmt *st;
        ck_assert_msg(sqlite3_prepare_v2(db, queries[i], -1, &st, NULL) == SQLITE_OK, "%s: %s",
                      queries[i], sqlite3_errmsg(db));
        const char *v = "";
        if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
            v = (const char *)sqlite3_column_text(st, 0);
        cap += strlen(v) + 1;
        out = realloc(out, cap);
        ck_assert_ptr_nonnull(out);
        len += (size_t)sprintf(out + len, "%s\n", v);
        sqlite3_finalize(st);
    }
    sqlite3_close(db);
    return out;
}

static int64_t log_length_of(const char *path, const char *id)
{
    sqlite3 *db;
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT log_length FROM convo_checkpoints WHERE id = ?",
                                        -1, &st, NULL),
                     SQLITE_OK);
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    int64_t v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

/* The put appends the answer, turns c1's write into a reference and raises
 * c1's log_length; the last of these failing (an injected trigger) rolls the
 * other two back with it. */
START_TEST(test_put_refs_fails_whole)
{
    const char *path = db_path("refs-whole");
    convo_store *s = open_db(path);
    convo_error err;
    ck_assert_msg(put_items(s, "c1", NULL, &U1, NULL, 1, -1, &err) == 0, "%s", err.message);
    write_answer(s, "c1");
    ck_assert_int_eq(write_seq(s, "c1"), -1);
    ck_assert_int_eq(log_length_of(path, "c1"), 1);
    exec_raw(path, "CREATE TRIGGER test_boom BEFORE UPDATE OF log_length ON convo_checkpoints"
                   " BEGIN SELECT RAISE(ABORT, 'injected'); END");
    char *before = snapshot(path);
    const char *both[] = {U1, A1};
    ck_assert_int_eq(put_items(s, "c2", "c1", both, NULL, 2, -1, &err), CONVO_ERROR);
    ck_assert_ptr_nonnull(strstr(err.message, "injected"));
    char *after = snapshot(path);
    ck_assert_str_eq(after, before);
    free(after);
    free(before);
    ck_assert_int_eq(write_seq(s, "c1"), -1);
    convo_checkpoint *cp = NULL;
    ck_assert_int_eq(convo_checkpoint_get(s, "t", NULL, "c2", &cp, &err), CONVO_ENOTFOUND);
    /* without the trigger the same put goes through whole */
    exec_raw(path, "DROP TRIGGER test_boom");
    ck_assert_msg(put_items(s, "c2", "c1", both, NULL, 2, -1, &err) == 0, "%s", err.message);
    ck_assert_int_eq(write_seq(s, "c1"), 1);
    ck_assert_int_eq(log_length_of(path, "c1"), 2);
    ck_assert_int_eq(log_length_of(path, "c2"), 2);
    convo_close(s);
}
END_TEST

/* A swap statement failing (the write's update: layout 13, of its record
 * waiting apart; or of its record in c1's row, as a layout-12 file holds it)
 * also rolls back the messages appended before it in the transaction. */
static const char *const swap_failures[] = {
    "CREATE TRIGGER test_boom BEFORE INSERT ON convo_checkpoint_pending"
    " BEGIN SELECT RAISE(ABORT, 'injected'); END",
    "UPDATE convo_checkpoints SET pending = (SELECT pending FROM convo_checkpoint_pending);"
    "DELETE FROM convo_checkpoint_pending;"
    "CREATE TRIGGER test_boom BEFORE UPDATE OF pending ON convo_checkpoints"
    " BEGIN SELECT RAISE(ABORT, 'injected'); END"};

START_TEST(test_put_refs_swap_fails)
{
    const char *path = db_path(_i ? "refs-swap-move" : "refs-swap");
    convo_store *s = open_db(path);
    convo_error err;
    ck_assert_msg(put_items(s, "c1", NULL, &U1, NULL, 1, -1, &err) == 0, "%s", err.message);
    write_answer(s, "c1");
    exec_raw(path, swap_failures[_i]);
    char *before = snapshot(path);
    const char *both[] = {U1, A1};
    ck_assert_int_eq(put_items(s, "c2", "c1", both, NULL, 2, -1, &err), CONVO_ERROR);
    ck_assert_ptr_nonnull(strstr(err.message, "injected"));
    char *after = snapshot(path);
    ck_assert_str_eq(after, before);
    free(after);
    free(before);
    convo_close(s);
}
END_TEST

/* A put that appends nothing still meets the generation condition, also on a
 * thread that does not exist (generation 0): nothing written when it fails. */
START_TEST(test_put_refs_generation_without_messages)
{
    const char *path = db_path("refs-generation");
    convo_store *s = open_db(path);
    convo_error err;
    ck_assert_int_eq(put_items(s, "c1", NULL, &U1, NULL, 1, 1, &err), CONVO_ECONFLICT);
    convo_history *h = NULL;
    ck_assert_int_eq(convo_load(s, "t", NULL, &h, &err), CONVO_ENOTFOUND);
    ck_assert_msg(put_items(s, "c1", NULL, &U1, NULL, 1, 0, &err) == 0, "%s", err.message);
    char *before = snapshot(path);
    int64_t known[] = {0};
    ck_assert_int_eq(put_items(s, "c2", "c1", &U1, known, 1, 3, &err), CONVO_ECONFLICT);
    ck_assert_ptr_nonnull(strstr(err.message, "generation 0, expected 3"));
    char *after = snapshot(path);
    ck_assert_str_eq(after, before);
    free(after);
    free(before);
    ck_assert_msg(put_items(s, "c2", "c1", &U1, known, 1, 0, &err) == 0, "%s", err.message);
    ck_assert_int_eq(log_length_of(path, "c2"), 1);
    convo_close(s);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    Suite *suite = suite_create("sqlite-refs");
    TCase *tc = tcase_create("sqlite-refs");
    tcase_add_test(tc, test_put_refs_fails_whole);
    tcase_add_loop_test(tc, test_put_refs_swap_fails, 0,
                        (int)(sizeof swap_failures / sizeof *swap_failures));
    tcase_add_test(tc, test_put_refs_generation_without_messages);
    suite_add_tcase(suite, tc);
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
