/* sqlite-layout12.c — layout 12's narrower index of checkpoints by id
 * (docs/sqlite.md, "Layout 12"): bytes 5-8 of a 16-byte id. Ids that share
 * those bytes but differ in bytes 3-4 (distinct in layout 11's index, one key
 * in layout 12's) are each found, written to, re-put and swapped exactly; the
 * statements still seek the index; the migration from layout 11 rebuilds the
 * index in the open's transaction and a file a layout-11 libconvo wrote reads
 * back whole. `tests/sqlite_layout12 DIR` works in DIR. */
#include "sqlite_layout.h"

#include <stdlib.h>
#include <string.h>

/* bytes 5-8 equal (f11c6fd0), bytes 3-4 different (a1bf, 0000, ffff) */
#define ID_A "1f1ea1bf-f11c-6fd0-8063-654e85edccb8"
#define ID_B "1f1e0000-f11c-6fd0-8064-5bd96ac901cb"
#define ID_C "1f1effff-f11c-6fd0-8065-7c192acd2557"
#define ID_D "1f1effff-f11d-6fd0-8065-7c192acd2557" /* differs from ID_C in byte 5 */
#define TASK "46f2b824-1007-5938-980a-efe0c0bb8de3"

static void put(convo_store *s, const char *tid, const char *id, const char *parent,
                const char *value)
{
    convo_blob v = {"json", value, strlen(value)};
    convo_channel_in ch[1] = {{"a", id, &v}};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = tid;
    cp.checkpoint_id = id;
    cp.parent_id = parent;
    cp.metadata_json = "{\"step\":1}";
    cp.channels = ch;
    cp.nchannels = 1;
    convo_error err;
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put %s: %s", id, err.message);
}

static void write_one(convo_store *s, const char *tid, const char *id, const char *value)
{
    convo_write_in w = {0, "messages", {"json", value, strlen(value)}};
    convo_error err;
    ck_assert_msg(convo_checkpoint_put_writes(s, tid, "", id, TASK, "~path", &w, 1, &err) == 0,
                  "write %s: %s", id, err.message);
}

/* checkpoint id of thread tid: its parent, channel a's value and its one
 * write (NULL: none) */
static void assert_cp(convo_store *s, const char *tid, const char *id, const char *parent,
                      const char *value, const char *write)
{
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_get(s, tid, "", id, &cp, &err) == 0, "get %s: %s", id,
                  err.message);
    ck_assert_str_eq(convo_checkpoint_id(cp), id);
    if (parent)
        ck_assert_str_eq(convo_checkpoint_parent_id(cp), parent);
    else
        ck_assert_ptr_null(convo_checkpoint_parent_id(cp));
    ck_assert_int_eq(convo_checkpoint_channel_count(cp), 1);
    const char *version = NULL;
    convo_blob b = {NULL, NULL, 0};
    ck_assert_str_eq(convo_checkpoint_channel(cp, 0, &version, &b), "a");
    ck_assert_str_eq(version, id);
    ck_assert_msg(b.type && b.len == strlen(value) && memcmp(b.bytes, value, b.len) == 0,
                  "%s: a is %.*s, not %s", id, (int)b.len, (const char *)b.bytes, value);
    ck_assert_int_eq(convo_checkpoint_write_count(cp), write ? 1 : 0);
    if (write) {
        const char *path, *channel;
        int64_t idx;
        convo_blob v;
        ck_assert_str_eq(convo_checkpoint_write(cp, 0, &path, &idx, &channel, &v), TASK);
        ck_assert_msg(v.len == strlen(write) && memcmp(v.bytes, write, v.len) == 0,
                      "%s: the write is %.*s", id, (int)v.len, (const char *)v.bytes);
    }
    convo_checkpoint_free(cp);
}

START_TEST(test_ids_sharing_bytes_5_to_8)
{
    const char *path = db_path("share");
    convo_store *s = open_db(path);
    put(s, "t", ID_A, NULL, "\"a\"");
    put(s, "t", ID_B, ID_A, "\"b\"");
    put(s, "t", ID_C, ID_B, "\"c\"");
    ck_assert_int_eq(sql_int(path, "SELECT count(DISTINCT substr(id, 5, 4)) FROM"
                                   " convo_checkpoints"), 1);
    ck_assert_int_eq(sql_int(path, "SELECT count(DISTINCT substr(id, 3, 6)) FROM"
                                   " convo_checkpoints"), 3);
    write_one(s, "t", ID_B, "\"wb\"");
    write_one(s, "t", ID_A, "\"wa\"");
    assert_cp(s, "t", ID_A, NULL, "\"a\"", "\"wa\"");
    assert_cp(s, "t", ID_B, ID_A, "\"b\"", "\"wb\"");
    assert_cp(s, "t", ID_C, ID_B, "\"c\"", NULL);
    /* an id sharing bytes 1-8 but 5 with one stored is not any of them */
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", ID_D, &cp, &err), CONVO_ENOTFOUND);
    convo_write_in w = {0, "messages", {"json", "1", 1}};
    ck_assert_int_eq(convo_checkpoint_put_writes(s, "t", "", ID_D, TASK, "~path", &w, 1, &err),
                     CONVO_ENOTFOUND);
    /* a re-put of the middle one replaces it under its key, keeping its write */
    put(s, "t", ID_B, ID_A, "\"b\"");
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoints"), 3);
    assert_cp(s, "t", ID_B, ID_A, "\"b\"", "\"wb\"");
    /* the same ids in another thread are other checkpoints */
    put(s, "u", ID_C, NULL, "\"uc\"");
    assert_cp(s, "u", ID_C, NULL, "\"uc\"", NULL);
    assert_cp(s, "t", ID_C, ID_B, "\"c\"", NULL);
    convo_close(s);
}
END_TEST

START_TEST(test_index_entry_is_four_bytes)
{
    const char *path = db_path("entry");
    convo_store *s = open_db(path);
    put(s, "t", ID_A, NULL, "\"a\"");
    put(s, "t", "a text id", ID_A, "\"t\"");
    convo_close(s);
    ck_assert_int_eq(sql_int(path, "SELECT sql LIKE '%substr(id, 5, 4)%' FROM sqlite_master"
                                   " WHERE name = 'convo_checkpoints_by_id'"), 1);
    /* what the index holds: 4 bytes of a UUID id, a text id whole */
    ck_assert_int_eq(sql_int(path, "SELECT sum(length(CASE WHEN typeof(id) = 'blob'"
                                   " THEN substr(id, 5, 4) ELSE id END)) FROM convo_checkpoints"),
                     4 + 9);
    s = open_db(path);
    assert_cp(s, "t", "a text id", ID_A, "\"t\"", NULL);
    convo_close(s);
}
END_TEST

/* A layout-11 file: its index on bytes 3-8. Opened, it is layout 12 with the
 * index on bytes 5-8, and every checkpoint reads back. */
START_TEST(test_migration_11_to_12)
{
    const char *path = db_path("eleven");
    convo_store *s = open_db(path);
    put(s, "t", ID_A, NULL, "\"a\"");
    put(s, "t", ID_B, ID_A, "\"b\"");
    put(s, "t", "text", ID_B, "\"x\"");
    write_one(s, "t", ID_A, "\"wa\""); /* in its row (layout 13: two rows after it) */
    convo_close(s);
    exec_raw(path, LAYOUT_16_TO_15 LAYOUT_15_TO_14 LAYOUT_14_TO_13 LAYOUT_13_TO_12 "DROP INDEX convo_checkpoints_by_id;"
                   "CREATE INDEX convo_checkpoints_by_id ON convo_checkpoints("
                   " CASE WHEN typeof(id) = 'blob' THEN substr(id, 3, 6) ELSE id END);"
                   "UPDATE convo_meta SET value = '11' WHERE key = 'schema_version'");
    ck_assert_int_eq(sql_int(path, "SELECT sql LIKE '%substr(id, 3, 6)%' FROM sqlite_master"
                                   " WHERE name = 'convo_checkpoints_by_id'"), 1);
    s = open_db(path);
    ck_assert_int_eq(sql_int(path, "SELECT value FROM convo_meta WHERE key = 'schema_version'"),
                     SQLITE_LAYOUT_NOW);
    ck_assert_int_eq(sql_int(path, "SELECT sql LIKE '%substr(id, 5, 4)%' FROM sqlite_master"
                                   " WHERE name = 'convo_checkpoints_by_id'"), 1);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM sqlite_master"
                                   " WHERE name = 'convo_checkpoints_by_id'"), 1);
    assert_cp(s, "t", ID_A, NULL, "\"a\"", "\"wa\"");
    assert_cp(s, "t", ID_B, ID_A, "\"b\"", NULL);
    assert_cp(s, "t", "text", ID_B, "\"x\"", NULL);
    put(s, "t", ID_C, "text", "\"c\"");
    assert_cp(s, "t", ID_C, "text", "\"c\"", NULL);
    convo_close(s);
    exec_raw(path, "PRAGMA integrity_check");
}
END_TEST

/* The migration runs in the open's one transaction: a file whose layout-11
 * index cannot be dropped (another index of that name is missing) is left as
 * it was, still layout 11. */
START_TEST(test_migration_fails_whole)
{
    const char *path = db_path("whole");
    convo_store *s = open_db(path);
    put(s, "t", ID_A, NULL, "\"a\"");
    convo_close(s);
    assert_migration_fails_whole(path,
                                 LAYOUT_16_TO_15 LAYOUT_15_TO_14 LAYOUT_14_TO_13 LAYOUT_13_TO_12 "DROP INDEX convo_checkpoints_by_id;"
                                 "UPDATE convo_meta SET value = '11' WHERE key = 'schema_version'",
                                 11);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM sqlite_master"
                                   " WHERE name = 'convo_checkpoints_by_id'"), 0);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    Suite *suite = suite_create("layout12");
    TCase *tc = tcase_create("layout12");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_ids_sharing_bytes_5_to_8);
    tcase_add_test(tc, test_index_entry_is_four_bytes);
    tcase_add_test(tc, test_migration_11_to_12);
    tcase_add_test(tc, test_migration_fails_whole);
    suite_add_tcase(suite, tc);
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
