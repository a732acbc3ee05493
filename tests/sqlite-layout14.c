/* sqlite-layout14.c — layout 14's look-up of a checkpoint by id (docs/sqlite.md,
 * "Layout 14"): a row whose id is greater than those of the rows before it is
 * "ordered" and has no index entry of its own (the ordered rows at positions
 * divisible by 16 bound it); any other row (unordered) keeps its entry. Every
 * checkpoint is found whatever its ids' order, after prunes that take the
 * bounding rows, in a fork, through a re-put; the migration from layout 13
 * marks the rows in the open's transaction, or fails whole.
 * `tests/sqlite_layout14 DIR` works in DIR. */
#include "sqlite_layout.h"

#include <stdlib.h>
#include <string.h>

#define TASK "46f2b824-1007-5938-980a-efe0c0bb8de3"

/* a canonical UUID (stored as 16 bytes) increasing with n */
static const char *uuid(int n)
{
    static char buf[8][40];
    static int next;
    char *b = buf[next++ % 8];
    snprintf(b, 40, "1f0%05x-0000-6000-8000-000000000000", (unsigned)n);
    return b;
}

static void put_ns(convo_store *s, const char *tid, const char *ns, const char *id,
                   const char *parent)
{
    convo_blob v = {"json", "1", 1};
    convo_channel_in ch[1] = {{"a", id, &v}};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = tid;
    cp.checkpoint_ns = ns;
    cp.checkpoint_id = id;
    cp.parent_id = parent;
    cp.metadata_json = "{\"step\":1}";
    cp.channels = ch;
    cp.nchannels = 1;
    convo_error err;
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put %s: %s", id, err.message);
}

static void put(convo_store *s, const char *tid, const char *id, const char *parent)
{
    put_ns(s, tid, "", id, parent);
}

/* get of (tid, ns, id): 0 with the checkpoint's id and namespace checked, or
 * the error code */
static int find_ns(convo_store *s, const char *tid, const char *ns, const char *id)
{
    convo_checkpoint_get_opts o = CONVO_CHECKPOINT_GET_OPTS_INIT;
    o.thread_id = tid;
    o.checkpoint_ns = ns;
    o.checkpoint_id = id;
    convo_checkpoint *cp = NULL;
    convo_error err;
    int rc = convo_checkpoint_get_ex(s, &o, &cp, &err);
    if (rc == 0) {
        ck_assert_str_eq(convo_checkpoint_id(cp), id);
        ck_assert_str_eq(convo_checkpoint_ns(cp), ns);
        convo_checkpoint_free(cp);
    }
    return rc;
}

static int find(convo_store *s, const char *tid, const char *id)
{
    return find_ns(s, tid, "", id);
}

/* a write to (tid, id), then the get sees it */
static void write_and_see(convo_store *s, const char *tid, const char *id)
{
    convo_write_in w = {0, "messages", {"json", "\"w\"", 3}};
    convo_error err;
    ck_assert_msg(convo_checkpoint_put_writes(s, tid, "", id, TASK, "~p", &w, 1, &err) == 0,
                  "write %s: %s", id, err.message);
    convo_checkpoint *cp = NULL;
    ck_assert_int_eq(convo_checkpoint_get(s, tid, "", id, &cp, &err), 0);
    ck_assert_uint_eq(convo_checkpoint_write_count(cp), 1);
    convo_checkpoint_free(cp);
}

/* unordered of the row of id (a text id, or a UUID stored as its 16 bytes)
 * in thread tid: 1, or 0 when NULL */
static long long unordered(const char *path, const char *tid, const char *ns, const char *id)
{
    char sql[400];
    snprintf(sql, sizeof sql,
             "SELECT c.unordered = 1 FROM convo_checkpoints AS c JOIN convo_threads AS t"
             " ON t.num = c.thread WHERE t.id = '%s' AND c.ns = '%s' AND CASE typeof(c.id)"
             " WHEN 'blob' THEN lower(hex(c.id)) ELSE c.id END = replace('%s', '-', '')",
             tid, ns, id);
    return sql_int(path, sql);
}

/* rows with an entry in each index: unordered ones, and the first ordered
 * row of each block of 16 positions */
static long long unordered_rows(const char *path)
{
    return sql_int(path, "SELECT count(*) FROM convo_checkpoints WHERE unordered = 1");
}

static long long bounding_rows(const char *path)
{
    return sql_int(path, "SELECT count(*) FROM convo_checkpoints WHERE unordered = 2");
}

/* LangGraph's ids increase with put order: no row is unordered, one row in
 * 16 is in the index; each is found, and ids that are not there are not. */
START_TEST(test_ordered_ids)
{
    const char *path = db_path("ordered");
    convo_store *s = open_db(path);
    for (int i = 0; i < 40; i++) /* position i: uuid(2i + 2) */
        put(s, "t", uuid(i * 2 + 2), i ? uuid(i * 2) : NULL);
    ck_assert_int_eq(unordered_rows(path), 0);
    ck_assert_int_eq(bounding_rows(path), 3); /* positions 0, 16, 32 */
    for (int i = 0; i < 40; i++)
        ck_assert_int_eq(find(s, "t", uuid(i * 2 + 2)), 0);
    for (int i = 0; i < 41; i++) /* before them all, between them, after them all */
        ck_assert_int_eq(find(s, "t", uuid(i * 2 + 1)), CONVO_ENOTFOUND);
    ck_assert_int_eq(find(s, "u", uuid(2)), CONVO_ENOTFOUND);
    ck_assert_int_eq(find_ns(s, "t", "sub", uuid(2)), CONVO_ENOTFOUND);
    write_and_see(s, "t", uuid(36)); /* position 17: between the bounds at 16 and 32 */
    write_and_see(s, "t", uuid(80)); /* the newest, after the last bound */
    /* a list before an id in the middle starts right below it */
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = "t";
    o.before = uuid(42);
    o.limit = 1;
    convo_checkpoint_set *r = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_list(s, &o, &r, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(convo_checkpoint_set_count(r), 1);
    ck_assert_str_eq(convo_checkpoint_id(convo_checkpoint_set_get(r, 0)), uuid(40));
    convo_checkpoint_set_free(r);
    convo_close(s);
    exec_raw(path, "PRAGMA integrity_check");
}
END_TEST

/* Ids out of order: an id not above the last ordered row's, the same id in
 * another namespace, a text id after UUIDs: each is marked and found; an id
 * above the last ordered row, which is in an earlier block behind 17
 * unordered rows, is ordered (the first of its block) and found; a re-put
 * keeps the mark. */
START_TEST(test_unordered_ids)
{
    const char *path = db_path("unordered");
    convo_store *s = open_db(path);
    put(s, "t", "c5", NULL);
    put(s, "t", "c3", "c5");
    put(s, "t", "c7", "c3");
    put_ns(s, "t", "sub", "c7", NULL);
    char id[16];
    for (int i = 0; i < 17; i++) { /* all below c7 */
        snprintf(id, sizeof id, "b%02d", 99 - i);
        put(s, "t", id, NULL);
    }
    put(s, "t", "d1", NULL); /* above c7, at position 2 of block 0; d1 at 21 */
    put(s, "t", "d2", "d1");
    ck_assert_int_eq(unordered(path, "t", "", "c5"), 0);
    ck_assert_int_eq(unordered(path, "t", "", "c3"), 1);
    ck_assert_int_eq(unordered(path, "t", "", "c7"), 0);
    ck_assert_int_eq(unordered(path, "t", "sub", "c7"), 1);
    ck_assert_int_eq(unordered(path, "t", "", "b99"), 1);
    ck_assert_int_eq(unordered(path, "t", "", "d1"), 0);
    ck_assert_int_eq(unordered(path, "t", "", "d2"), 0);
    ck_assert_int_eq(unordered_rows(path), 19);
    ck_assert_int_eq(bounding_rows(path), 2); /* c5 (block 0), d1 (block 1) */
    const char *ids[] = {"c5", "c3", "c7", "b99", "b90", "b83", "d1", "d2"};
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++)
        ck_assert_int_eq(find(s, "t", ids[i]), 0);
    ck_assert_int_eq(find_ns(s, "t", "sub", "c7"), 0);
    ck_assert_int_eq(find(s, "t", "c4"), CONVO_ENOTFOUND);
    ck_assert_int_eq(find(s, "t", "b82"), CONVO_ENOTFOUND);
    write_and_see(s, "t", "c3");
    write_and_see(s, "t", "c5");
    /* a re-put keeps its key and its mark */
    put(s, "t", "c3", "c5");
    put(s, "t", "c5", NULL);
    ck_assert_int_eq(unordered(path, "t", "", "c3"), 1);
    ck_assert_int_eq(unordered(path, "t", "", "c5"), 0);
    ck_assert_int_eq(find(s, "t", "c3"), 0);
    ck_assert_int_eq(find(s, "t", "c5"), 0);
    /* a text id after UUIDs sorts below them (SQLite's order: text < blob) */
    put(s, "v", uuid(1), NULL);
    put(s, "v", "zzz", uuid(1));
    put(s, "v", uuid(2), "zzz");
    ck_assert_int_eq(unordered(path, "v", "", "zzz"), 1);
    ck_assert_int_eq(find(s, "v", "zzz"), 0);
    ck_assert_int_eq(find(s, "v", uuid(2)), 0);
    convo_close(s);
    exec_raw(path, "PRAGMA integrity_check");
}
END_TEST

/* A prune that takes the first rows of blocks leaves the next ordered row of
 * each the first, so every remaining checkpoint is found; a fork marks its
 * copies the same way, and the new thread takes new ones in order. */
START_TEST(test_prune_and_fork)
{
    const char *path = db_path("prune");
    convo_store *s = open_db(path);
    convo_error err;
    for (int i = 0; i < 40; i++)
        put(s, "t", uuid(i), i ? uuid(i - 1) : NULL);
    put(s, "t", "text", NULL); /* unordered: text sorts below blobs */
    ck_assert_int_eq(convo_checkpoint_prune(s, "t", 11, &err), 0);
    ck_assert_int_eq(bounding_rows(path), 2); /* positions 30 (16-29 gone) and 32 */
    for (int i = 0; i < 40; i++)
        ck_assert_int_eq(find(s, "t", uuid(i)), i >= 30 ? 0 : CONVO_ENOTFOUND);
    ck_assert_int_eq(find(s, "t", "text"), 0);
    ck_assert_int_eq(convo_checkpoint_prune(s, "t", 6, &err), 0);
    ck_assert_int_eq(bounding_rows(path), 1); /* position 35 (32-34 gone) */
    for (int i = 30; i < 40; i++)
        ck_assert_int_eq(find(s, "t", uuid(i)), i >= 35 ? 0 : CONVO_ENOTFOUND);
    ck_assert_int_eq(find(s, "t", "text"), 0);
    write_and_see(s, "t", uuid(36));
    convo_fork_opts fo = CONVO_FORK_OPTS_INIT;
    fo.with_checkpoints = 1;
    ck_assert_msg(convo_thread_fork_ex(s, "t", "f", -1, &fo, &err) == 0, "%s", err.message);
    ck_assert_int_eq(unordered(path, "f", "", "text"), 1);
    ck_assert_int_eq(unordered_rows(path), 2);
    ck_assert_int_eq(bounding_rows(path), 2); /* t's 35, f's 35 */
    for (int i = 35; i < 40; i++)
        ck_assert_int_eq(find(s, "f", uuid(i)), 0);
    ck_assert_int_eq(find(s, "f", "text"), 0);
    ck_assert_int_eq(find(s, "f", uuid(34)), CONVO_ENOTFOUND);
    put(s, "f", uuid(50), uuid(39));
    ck_assert_int_eq(unordered(path, "f", "", uuid(50)), 0);
    ck_assert_int_eq(find(s, "f", uuid(50)), 0);
    convo_close(s);
    exec_raw(path, "PRAGMA integrity_check");
}
END_TEST

/* A layout-13 file (every row indexed by id, no marks) opens as layout 14:
 * a row whose id is not above every id before it in its thread is marked,
 * the others not; all are found and the thread goes on. */
START_TEST(test_migration_13_to_14)
{
    const char *path = db_path("thirteen");
    convo_store *s = open_db(path);
    for (int i = 0; i < 20; i++)
        put(s, "t", uuid(i * 2), NULL);
    put(s, "t", uuid(5), NULL);   /* below uuid(38) */
    put(s, "t", "text", NULL);    /* text: below every blob */
    put(s, "t", uuid(100), NULL); /* above them all */
    put(s, "u", "b", NULL);
    put(s, "u", "a", NULL);
    convo_close(s);
    exec_raw(path, LAYOUT_16_TO_15 LAYOUT_15_TO_14 LAYOUT_14_TO_13 "UPDATE convo_meta SET value = '13' WHERE key = 'schema_version'");
    s = open_db(path);
    ck_assert_int_eq(sql_int(path, "SELECT value FROM convo_meta WHERE key = 'schema_version'"),
                     SQLITE_LAYOUT_NOW);
    ck_assert_int_eq(unordered(path, "t", "", uuid(5)), 1);
    ck_assert_int_eq(unordered(path, "t", "", "text"), 1);
    ck_assert_int_eq(unordered(path, "t", "", uuid(100)), 0);
    ck_assert_int_eq(unordered(path, "u", "", "a"), 1);
    ck_assert_int_eq(unordered_rows(path), 3);
    ck_assert_int_eq(bounding_rows(path), 3); /* t's positions 0 and 16, u's 0 */
    for (int i = 0; i < 20; i++)
        ck_assert_int_eq(find(s, "t", uuid(i * 2)), 0);
    ck_assert_int_eq(find(s, "t", uuid(5)), 0);
    ck_assert_int_eq(find(s, "t", "text"), 0);
    ck_assert_int_eq(find(s, "t", uuid(100)), 0);
    ck_assert_int_eq(find(s, "u", "a"), 0);
    ck_assert_int_eq(find(s, "u", "b"), 0);
    put(s, "t", uuid(101), uuid(100));
    ck_assert_int_eq(unordered(path, "t", "", uuid(101)), 0);
    ck_assert_int_eq(find(s, "t", uuid(101)), 0);
    convo_close(s);
    exec_raw(path, "PRAGMA integrity_check");
}
END_TEST

/* The migration runs in the open's one transaction: a layout-13 file where
 * the new index cannot be made (a table of that name is there) stays layout
 * 13, without the new column. */
START_TEST(test_migration_fails_whole)
{
    const char *path = db_path("whole");
    convo_store *s = open_db(path);
    put(s, "t", "c1", NULL);
    convo_close(s);
    assert_migration_fails_whole(path,
                                 LAYOUT_16_TO_15 LAYOUT_15_TO_14 LAYOUT_14_TO_13 "CREATE TABLE convo_checkpoints_ordered_by_id(x);"
                                 "UPDATE convo_meta SET value = '13' WHERE key = 'schema_version'",
                                 13);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM pragma_table_info('convo_checkpoints')"
                                   " WHERE name = 'unordered'"), 0);
}
END_TEST

/* A layout-13 libconvo that had the file open when it was migrated names no
 * unordered column: its insert is refused, not stored as a row of unknown
 * order; its reads still answer. */
START_TEST(test_layout13_writer_refused)
{
    const char *path = db_path("writer13");
    convo_store *s = open_db(path);
    put(s, "t", "c1", NULL);
    convo_close(s);
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    char *msg = NULL;
    /* layout 13's cp-put.sql, its values filled in */
    int rc = sqlite3_exec(db, "INSERT OR REPLACE INTO convo_checkpoints(key, thread, ns, id,"
                              " parent_id, parent_place, meta, body_type, body, log_length,"
                              " created_at, put_order, channel_list, meta_shape, pending)"
                              " SELECT key + 1, thread, ns, 'c0', NULL, NULL, meta, body_type,"
                              " body, log_length, created_at, put_order + 1, channel_list,"
                              " meta_shape, NULL FROM convo_checkpoints",
                          NULL, NULL, &msg);
    ck_assert_int_eq(rc, SQLITE_CONSTRAINT);
    ck_assert_ptr_nonnull(msg);
    ck_assert_ptr_nonnull(strstr(msg, "layout 14"));
    sqlite3_free(msg);
    sqlite3_close(db);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoints"), 1);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    Suite *suite = suite_create("layout14");
    TCase *tc = tcase_create("layout14");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_ordered_ids);
    tcase_add_test(tc, test_unordered_ids);
    tcase_add_test(tc, test_prune_and_fork);
    tcase_add_test(tc, test_migration_13_to_14);
    tcase_add_test(tc, test_migration_fails_whole);
    tcase_add_test(tc, test_layout13_writer_refused);
    suite_add_tcase(suite, tc);
    SRunner *runner = srunner_create(suite);
    srunner_run_all(runner, CK_NORMAL);
    int failed = srunner_ntests_failed(runner);
    srunner_free(runner);
    return failed ? 1 : 0;
}
