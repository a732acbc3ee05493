/* sqlite-layout13.c — layout 13's pending writes of a thread's two newest
 * checkpoints, waiting apart from their rows (docs/sqlite.md, "Layout 13"):
 * they wait in convo_checkpoint_pending and read back from there, the put of
 * the second checkpoint after theirs moves them into the row (the put of the
 * first leaves them: that row is still the page's last), a checkpoint deleted takes them with it, a
 * fork copies them; a statement failing on the way rolls its call back whole;
 * the migration from layout 12 adds the table in the open's transaction.
 * `tests/sqlite_layout13 DIR` works in DIR. */
#include "sqlite_layout.h"

#include <stdlib.h>
#include <string.h>

#define TASK "46f2b824-1007-5938-980a-efe0c0bb8de3"
#define TASK2 "56f2b824-1007-5938-980a-efe0c0bb8de3"

static void put(convo_store *s, const char *tid, const char *id, const char *parent,
                const char *metadata)
{
    convo_blob v = {"json", id, strlen(id)};
    convo_channel_in ch[1] = {{"a", id, &v}};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = tid;
    cp.checkpoint_id = id;
    cp.parent_id = parent;
    cp.metadata_json = metadata ? metadata : "{\"step\":1}";
    cp.channels = ch;
    cp.nchannels = 1;
    convo_error err;
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put %s: %s", id, err.message);
}

static int write_to(convo_store *s, const char *tid, const char *id, const char *task,
                    int64_t idx, const char *value, convo_error *err)
{
    convo_write_in w = {idx, "messages", {"json", value, strlen(value)}};
    return convo_checkpoint_put_writes(s, tid, "", id, task, "~path", &w, 1, err);
}

static void write_one(convo_store *s, const char *tid, const char *id, const char *task,
                      int64_t idx, const char *value)
{
    convo_error err;
    ck_assert_msg(write_to(s, tid, id, task, idx, value, &err) == 0, "write %s: %s", id,
                  err.message);
}

/* checkpoint id of thread tid has exactly the writes values[0..n), in order */
static void assert_writes(convo_store *s, const char *tid, const char *id,
                          const char *const *values, size_t n)
{
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_get(s, tid, "", id, &cp, &err) == 0, "get %s: %s", id,
                  err.message);
    ck_assert_uint_eq(convo_checkpoint_write_count(cp), n);
    for (size_t i = 0; i < n; i++) {
        const char *path, *channel;
        int64_t idx;
        convo_blob v;
        convo_checkpoint_write(cp, i, &path, &idx, &channel, &v);
        ck_assert_msg(v.len == strlen(values[i]) && memcmp(v.bytes, values[i], v.len) == 0,
                      "%s write %zu is %.*s, not %s", id, i, (int)v.len,
                      (const char *)v.bytes, values[i]);
    }
    convo_checkpoint_free(cp);
}

static long long waiting(const char *path)
{
    return sql_int(path, "SELECT count(*) FROM convo_checkpoint_pending");
}

/* the row of checkpoint id (a text id) holds a record of its own */
static long long in_row(const char *path, const char *id)
{
    char sql[200];
    snprintf(sql, sizeof sql, "SELECT pending IS NOT NULL FROM convo_checkpoints WHERE id = '%s'",
             id);
    return sql_int(path, sql);
}

START_TEST(test_newest_writes_wait_apart)
{
    const char *path = db_path("wait");
    convo_store *s = open_db(path);
    put(s, "t", "c1", NULL, NULL);
    write_one(s, "t", "c1", TASK, 0, "\"w1\"");
    write_one(s, "t", "c1", TASK2, 0, "\"w2\"");
    write_one(s, "t", "c1", TASK, 0, "\"ignored\""); /* (task, idx) again: the first stays */
    ck_assert_int_eq(waiting(path), 1);
    ck_assert_int_eq(in_row(path, "c1"), 0);
    const char *both[] = {"\"w1\"", "\"w2\""};
    assert_writes(s, "t", "c1", both, 2);
    /* the next put leaves them apart, c1 one of the two newest: a write to
     * it waits there too */
    put(s, "t", "c2", "c1", NULL);
    ck_assert_int_eq(waiting(path), 1);
    ck_assert_int_eq(in_row(path, "c1"), 0);
    write_one(s, "t", "c1", TASK2, -1, "\"err\"");
    ck_assert_int_eq(waiting(path), 1);
    const char *three[] = {"\"w1\"", "\"err\"", "\"w2\""}; /* (task, idx) order */
    assert_writes(s, "t", "c1", three, 3);
    write_one(s, "t", "c2", TASK, 0, "\"x\"");
    ck_assert_int_eq(waiting(path), 2);
    /* the put after moves c1's into its row, c2's stay */
    put(s, "t", "c3", "c2", NULL);
    ck_assert_int_eq(waiting(path), 1);
    ck_assert_int_eq(in_row(path, "c1"), 1);
    ck_assert_int_eq(in_row(path, "c2"), 0);
    assert_writes(s, "t", "c1", three, 3);
    /* c1 is no longer one of the two newest: a write goes to its row */
    write_one(s, "t", "c1", TASK2, 1, "\"w3\"");
    ck_assert_int_eq(waiting(path), 1);
    const char *four[] = {"\"w1\"", "\"err\"", "\"w2\"", "\"w3\""};
    assert_writes(s, "t", "c1", four, 4);
    /* a put in another thread leaves t's alone */
    put(s, "u", "c1", NULL, NULL);
    ck_assert_int_eq(waiting(path), 1);
    const char *x[] = {"\"x\""};
    assert_writes(s, "t", "c2", x, 1);
    assert_writes(s, "u", "c1", NULL, 0);
    /* a negative idx replaces in the waiting record too */
    write_one(s, "t", "c2", TASK, -1, "\"e1\"");
    write_one(s, "t", "c2", TASK, -1, "\"e2\"");
    const char *x_e2[] = {"\"e2\"", "\"x\""};
    assert_writes(s, "t", "c2", x_e2, 2);
    convo_close(s);
    exec_raw(path, "PRAGMA integrity_check");
}
END_TEST

/* The newest checkpoint put again keeps its place and its waiting writes;
 * its own swaps and the listing read them too. */
START_TEST(test_reput_and_list_keep_waiting)
{
    const char *path = db_path("reput");
    convo_store *s = open_db(path);
    put(s, "t", "c1", NULL, NULL);
    write_one(s, "t", "c1", TASK, 0, "\"w\"");
    put(s, "t", "c1", NULL, NULL);
    ck_assert_int_eq(waiting(path), 1);
    const char *w[] = {"\"w\""};
    assert_writes(s, "t", "c1", w, 1);
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = "t";
    convo_checkpoint_set *set = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_list(s, &o, &set, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(convo_checkpoint_set_count(set), 1);
    ck_assert_uint_eq(convo_checkpoint_write_count(convo_checkpoint_set_get(set, 0)), 1);
    convo_checkpoint_set_free(set);
    convo_close(s);
}
END_TEST

/* A deleted checkpoint takes its waiting writes along: a checkpoint put later
 * under the same key has none; a deleted thread leaves none. A fork copies
 * them into the new thread's rows. */
START_TEST(test_delete_and_fork)
{
    const char *path = db_path("delete");
    convo_store *s = open_db(path);
    convo_error err;
    put(s, "t", "c1", NULL, NULL);
    put(s, "t", "c2", "c1", "{\"run_id\":\"r2\"}");
    write_one(s, "t", "c2", TASK, 0, "\"w\"");
    convo_fork_opts fo = CONVO_FORK_OPTS_INIT;
    fo.with_checkpoints = 1;
    ck_assert_msg(convo_thread_fork_ex(s, "t", "f", -1, &fo, &err) == 0, "%s", err.message);
    const char *w[] = {"\"w\""};
    assert_writes(s, "f", "c2", w, 1);
    ck_assert_int_eq(waiting(path), 1);
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = "t";
    o.filter_json = "{\"run_id\":\"r2\"}";
    uint64_t removed = 0;
    ck_assert_msg(convo_checkpoint_delete(s, &o, &removed, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(removed, 1);
    ck_assert_int_eq(waiting(path), 0);
    put(s, "t", "c3", "c1", NULL); /* c2's key again */
    ck_assert_int_eq(sql_int(path, "SELECT key & 4294967295 FROM convo_checkpoints"
                                   " WHERE id = 'c3'"), 1);
    assert_writes(s, "t", "c3", NULL, 0);
    write_one(s, "t", "c3", TASK, 0, "\"w3\"");
    ck_assert_int_eq(waiting(path), 1);
    ck_assert_int_eq(convo_thread_delete(s, "t", &err), 0);
    ck_assert_int_eq(waiting(path), 0);
    assert_writes(s, "f", "c2", w, 1);
    convo_close(s);
}
END_TEST

/* A write waiting apart that cannot be stored (an injected trigger) fails the
 * call and leaves nothing; a put that cannot move them into the row fails
 * whole: no new checkpoint, the writes still waiting. */
START_TEST(test_failures_roll_back)
{
    const char *path = db_path("fail");
    convo_store *s = open_db(path);
    convo_error err;
    put(s, "t", "c1", NULL, NULL);
    exec_raw(path, "CREATE TRIGGER test_boom BEFORE INSERT ON convo_checkpoint_pending"
                   " BEGIN SELECT RAISE(ABORT, 'injected'); END");
    ck_assert_int_eq(write_to(s, "t", "c1", TASK, 0, "\"w\"", &err), CONVO_ERROR);
    ck_assert_ptr_nonnull(strstr(err.message, "injected"));
    ck_assert_int_eq(waiting(path), 0);
    assert_writes(s, "t", "c1", NULL, 0);
    exec_raw(path, "DROP TRIGGER test_boom;"
                   "CREATE TRIGGER test_boom BEFORE DELETE ON convo_checkpoint_pending"
                   " BEGIN SELECT RAISE(ABORT, 'injected'); END");
    write_one(s, "t", "c1", TASK, 0, "\"w\"");
    convo_blob v = {"json", "2", 1};
    convo_channel_in ch[1] = {{"a", "2", &v}};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = "t";
    cp.checkpoint_id = "c3";
    cp.parent_id = "c2";
    cp.metadata_json = "{}";
    cp.channels = ch;
    cp.nchannels = 1;
    put(s, "t", "c2", "c1", NULL); /* c1's writes still wait: c2 is the row after */
    ck_assert_int_eq(convo_checkpoint_put(s, &cp, &err), CONVO_ERROR);
    ck_assert_ptr_nonnull(strstr(err.message, "injected"));
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoints"), 2);
    ck_assert_int_eq(waiting(path), 1);
    ck_assert_int_eq(in_row(path, "c1"), 0);
    const char *w[] = {"\"w\""};
    assert_writes(s, "t", "c1", w, 1);
    /* the record's move into the row failing: the same */
    exec_raw(path, "DROP TRIGGER test_boom;"
                   "CREATE TRIGGER test_boom BEFORE UPDATE OF pending ON convo_checkpoints"
                   " BEGIN SELECT RAISE(ABORT, 'injected'); END");
    ck_assert_int_eq(convo_checkpoint_put(s, &cp, &err), CONVO_ERROR);
    ck_assert_ptr_nonnull(strstr(err.message, "injected"));
    ck_assert_int_eq(waiting(path), 1);
    exec_raw(path, "DROP TRIGGER test_boom");
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "%s", err.message);
    ck_assert_int_eq(waiting(path), 0);
    ck_assert_int_eq(in_row(path, "c1"), 1);
    assert_writes(s, "t", "c1", w, 1);
    /* a call of no writes on the newest leaves a record of none waiting,
     * which moves into its row as none */
    ck_assert_int_eq(convo_checkpoint_put_writes(s, "t", "", "c3", TASK, "~path", NULL, 0, &err),
                     0);
    put(s, "t", "c4", "c3", NULL);
    put(s, "t", "c5", "c4", NULL);
    ck_assert_int_eq(waiting(path), 0);
    ck_assert_int_eq(in_row(path, "c3"), 0);
    assert_writes(s, "t", "c3", NULL, 0);
    /* more records waiting than there can be (three before the row before
     * the new one) is a corrupt file, and nothing is written */
    exec_raw(path, "INSERT INTO convo_checkpoint_pending SELECT key, NULL FROM convo_checkpoints"
                   " WHERE thread = (SELECT num FROM convo_threads WHERE id = 't')"
                   " AND id IN ('c1', 'c2', 'c3')");
    cp.checkpoint_id = "c6";
    cp.parent_id = "c5";
    ck_assert_int_eq(convo_checkpoint_put(s, &cp, &err), CONVO_ECORRUPT);
    ck_assert_ptr_nonnull(strstr(err.message, "more than two"));
    ck_assert_int_eq(waiting(path), 3);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoints WHERE id = 'c6'"), 0);
    convo_close(s);
}
END_TEST

/* A layout-12 file (no table apart, writes in the rows) opens as layout 13,
 * reads back whole, and its newest checkpoint's next writes wait apart. */
START_TEST(test_migration_12_to_13)
{
    const char *path = db_path("twelve");
    convo_store *s = open_db(path);
    put(s, "t", "c1", NULL, NULL);
    put(s, "t", "c2", "c1", NULL);
    put(s, "t", "c3", "c2", NULL);
    write_one(s, "t", "c1", TASK, 0, "\"w1\""); /* in its row: c3 is after c2 */
    ck_assert_int_eq(in_row(path, "c1"), 1);
    convo_close(s);
    exec_raw(path, LAYOUT_16_TO_15 LAYOUT_15_TO_14 LAYOUT_14_TO_13 LAYOUT_13_TO_12
                   "UPDATE convo_meta SET value = '12' WHERE key = 'schema_version'");
    s = open_db(path);
    ck_assert_int_eq(sql_int(path, "SELECT value FROM convo_meta WHERE key = 'schema_version'"),
                     SQLITE_LAYOUT_NOW);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM sqlite_master WHERE name IN"
                                   " ('convo_checkpoint_pending', 'convo_checkpoint_pending_gone')"),
                     2);
    const char *w1[] = {"\"w1\""};
    assert_writes(s, "t", "c1", w1, 1);
    write_one(s, "t", "c3", TASK, 0, "\"w2\"");
    ck_assert_int_eq(waiting(path), 1);
    const char *w2[] = {"\"w2\""};
    assert_writes(s, "t", "c3", w2, 1);
    convo_close(s);
    exec_raw(path, "PRAGMA integrity_check");
}
END_TEST

/* The migration runs in the open's one transaction: a layout-12 file where
 * the table cannot be made (a table of that name is there) stays layout 12. */
START_TEST(test_migration_fails_whole)
{
    const char *path = db_path("whole");
    convo_store *s = open_db(path);
    put(s, "t", "c1", NULL, NULL);
    convo_close(s);
    assert_migration_fails_whole(path,
                                 LAYOUT_16_TO_15 LAYOUT_15_TO_14 LAYOUT_14_TO_13 LAYOUT_13_TO_12 "CREATE TABLE convo_checkpoint_pending(x);"
                                 "UPDATE convo_meta SET value = '12' WHERE key = 'schema_version'",
                                 12);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM sqlite_master"
                                   " WHERE name = 'convo_checkpoint_pending_gone'"), 0);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    Suite *suite = suite_create("layout13");
    TCase *tc = tcase_create("layout13");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_newest_writes_wait_apart);
    tcase_add_test(tc, test_reput_and_list_keep_waiting);
    tcase_add_test(tc, test_delete_and_fork);
    tcase_add_test(tc, test_failures_roll_back);
    tcase_add_test(tc, test_migration_12_to_13);
    tcase_add_test(tc, test_migration_fails_whole);
    suite_add_tcase(suite, tc);
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
