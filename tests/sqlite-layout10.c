/* sqlite-layout10.c — layout 10 of the SQLite driver (docs/sqlite.md, "Layout
 * 10: pending writes in the checkpoint row, a narrower index by id") beyond
 * the conformance suite:
 *   - a checkpoint's pending writes are one record in its row: no other table,
 *     read back exactly in (task id text, idx) order with UUID and other task
 *     ids, an idx >= 0 kept once, a negative one replaced, empty and large
 *     values; a re-put keeps them, a fork copies them, a prune takes them;
 *   - a record that does not decode is CONVO_ECORRUPT for get, list and
 *     put_writes, and nothing is written;
 *   - the index by id holds 6 bytes of a UUID (and the row key): ids sharing
 *     them (and text ids, ids of other threads) are each found;
 *   - a layout-9 file is migrated on open (writes packed into their rows, the
 *     table gone, the index narrowed) and a layout-9 process that had it open
 *     can no longer read or write checkpoints.
 * `tests/sqlite_layout10 DIR`: DIR a scratch folder. */
#include <check.h>
#include <convo.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "sqlite_layout.h"

#define CP1 "1f1ea1bf-f11c-6fd0-8063-654e85edccb8"
#define CP2 "1f1ea1bf-f11c-6fd0-8064-5bd96ac901cb" /* CP1's first 8 bytes, as CP3 */
#define CP3 "1f1ea1bf-f11c-6fd0-8065-7c192acd2557"
#define TASK_A "46f2b824-1007-5938-980a-efe0c0bb8de3"
#define TASK_B "dc5f84fc-65f3-50ef-b0aa-0cc429ae0809"

static void put(convo_store *s, const char *tid, const char *id, const char *parent)
{
    convo_blob v = {"json", "1", 1};
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

static int put_write(convo_store *s, const char *tid, const char *id, const char *task,
                     int64_t idx, const char *value, size_t len, convo_error *err)
{
    convo_write_in w = {idx, idx < 0 ? "__error__" : "messages", {"json", value, len}};
    return convo_checkpoint_put_writes(s, tid, "", id, task, "~path", &w, 1, err);
}

static void write_ok(convo_store *s, const char *tid, const char *id, const char *task,
                     int64_t idx, const char *value)
{
    convo_error err;
    ck_assert_msg(put_write(s, tid, id, task, idx, value, strlen(value), &err) == 0,
                  "write %s %s: %s", id, task, err.message);
}

static convo_checkpoint *get(convo_store *s, const char *tid, const char *id)
{
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_get(s, tid, "", id, &cp, &err) == 0, "get %s: %s", id,
                  err.message);
    ck_assert_str_eq(convo_checkpoint_id(cp), id);
    return cp;
}

/* cp's writes are exactly want[0..n): "task/idx=value" each */
static void assert_writes(const convo_checkpoint *cp, const char *const *want, size_t n)
{
    ck_assert_int_eq(convo_checkpoint_write_count(cp), n);
    for (size_t i = 0; i < n; i++) {
        const char *path, *channel;
        int64_t idx;
        convo_blob v;
        const char *task = convo_checkpoint_write(cp, i, &path, &idx, &channel, &v);
        char got[256];
        snprintf(got, sizeof got, "%s/%lld=%.*s", task, (long long)idx, (int)v.len,
                 (const char *)v.bytes);
        ck_assert_str_eq(got, want[i]);
        ck_assert_str_eq(path, "~path");
        ck_assert_str_eq(channel, idx < 0 ? "__error__" : "messages");
        ck_assert_str_eq(v.type, "json");
    }
}

static const char *const three[] = {TASK_A "/-1=\"replaced\"", TASK_A "/0=\"a0\"",
                                    "a-task/1=", TASK_B "/0=\"b0\"", "zz/0=\"z\""};

/* CP1 of thread tid with the writes of `three` (in another order, some twice) */
static void writes_of_three(convo_store *s, const char *tid)
{
    write_ok(s, tid, CP1, TASK_B, 0, "\"b0\"");
    write_ok(s, tid, CP1, "zz", 0, "\"z\"");
    write_ok(s, tid, CP1, "a-task", 1, "");
    write_ok(s, tid, CP1, TASK_A, 0, "\"a0\"");
    write_ok(s, tid, CP1, TASK_A, 0, "\"kept once\"");
    write_ok(s, tid, CP1, TASK_A, -1, "\"first\"");
    write_ok(s, tid, CP1, TASK_A, -1, "\"replaced\"");
}

/* every record of pending writes: in a row, or (layout 13) waiting apart */
#define RECORDS "(SELECT pending FROM convo_checkpoints WHERE pending IS NOT NULL" \
                " UNION ALL SELECT pending FROM convo_checkpoint_pending)"

START_TEST(test_writes_in_the_row)
{
    const char *path = db_path("writes");
    convo_store *s = open_db(path);
    put(s, "t", CP1, NULL);
    put(s, "t", CP2, CP1);
    writes_of_three(s, "t");
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM sqlite_master"
                                   " WHERE name = 'convo_checkpoint_writes'"), 0);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM " RECORDS), 1);
    /* a group per task: UUID ids as 0x10 and 16 bytes, others 0x00, length,
     * text; a count; per write 5 one-byte varints and the value */
    ck_assert_int_eq(sql_int(path, "SELECT length(pending) FROM " RECORDS),
                     (18 + 5 + 10 + 5 + 4) + (1 + 1 + 6 + 1 + 5) + (18 + 5 + 4) +
                         (1 + 1 + 2 + 1 + 5 + 3));
    convo_checkpoint *cp = get(s, "t", CP1);
    assert_writes(cp, three, 5);
    convo_checkpoint_free(cp);
    assert_writes(cp = get(s, "t", CP2), NULL, 0);
    convo_checkpoint_free(cp);
    /* a large value, and the list reads the same */
    size_t big = 100000;
    char *value = malloc(big);
    ck_assert_ptr_nonnull(value);
    memset(value, '7', big);
    convo_error err;
    ck_assert_int_eq(put_write(s, "t", CP2, "big", 0, value, big, &err), 0);
    cp = get(s, "t", CP2);
    convo_blob v;
    convo_checkpoint_write(cp, 0, NULL, NULL, NULL, &v);
    ck_assert(v.len == big && memcmp(v.bytes, value, big) == 0);
    convo_checkpoint_free(cp);
    free(value);
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = "t";
    convo_checkpoint_set *set = NULL;
    ck_assert_int_eq(convo_checkpoint_list(s, &o, &set, &err), 0);
    ck_assert_int_eq(convo_checkpoint_set_count(set), 2);
    assert_writes(convo_checkpoint_set_get(set, 1), three, 5);
    convo_checkpoint_set_free(set);
    /* a re-put keeps them; a fork copies them; a prune takes them */
    put(s, "t", CP1, NULL);
    assert_writes(cp = get(s, "t", CP1), three, 5);
    convo_checkpoint_free(cp);
    const char *m = "{\"role\":\"user\"}";
    ck_assert_int_eq(convo_append(s, "t", &m, NULL, 1, NULL, NULL, &err), 0);
    convo_fork_opts fo = CONVO_FORK_OPTS_INIT;
    fo.with_checkpoints = 1;
    ck_assert_msg(convo_thread_fork_ex(s, "t", "u", 1, &fo, &err) == 0, "%s", err.message);
    assert_writes(cp = get(s, "u", CP1), three, 5);
    convo_checkpoint_free(cp);
    ck_assert_int_eq(convo_checkpoint_prune(s, "t", 1, &err), 0);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoints WHERE thread = 1"),
                     1);
    /* t's CP2, u's CP1 and CP2 */
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM " RECORDS), 3);
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", CP1, &cp, &err), CONVO_ENOTFOUND);
    convo_close(s);
}
END_TEST

START_TEST(test_undecodable_record_is_corrupt)
{
    const char *path = db_path("corrupt");
    convo_store *s = open_db(path);
    put(s, "t", CP1, NULL);
    write_ok(s, "t", CP1, TASK_A, 0, "1");
    /* a group without its writes, a value longer than the record, a bad tag;
     * in the record waiting apart (layout 13: CP1 is the newest), then in the
     * row */
    const char *bad[] = {"x'10" "46f2b82410075938980aefe0c0bb8de3" "02" "00010203" "0131'",
                         "x'0002" "7a7a" "01" "00010203" "09" "31'", "x'07'"};
    const char *table = "convo_checkpoint_pending";
    for (size_t i = 0; i < 2 * (sizeof bad / sizeof *bad); i++) {
        char sql[256];
        if (i == sizeof bad / sizeof *bad) {
            exec_raw(path, "UPDATE convo_checkpoints SET pending = (SELECT pending FROM"
                           " convo_checkpoint_pending); DELETE FROM convo_checkpoint_pending");
            table = "convo_checkpoints";
        }
        snprintf(sql, sizeof sql, "UPDATE %s SET pending = %s", table,
                 bad[i % (sizeof bad / sizeof *bad)]);
        exec_raw(path, sql);
        convo_checkpoint *cp = NULL;
        convo_error err;
        ck_assert_int_eq(convo_checkpoint_get(s, "t", "", CP1, &cp, &err), CONVO_ECORRUPT);
        convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
        o.thread_id = "t";
        convo_checkpoint_set *set = NULL;
        ck_assert_int_eq(convo_checkpoint_list(s, &o, &set, &err), CONVO_ECORRUPT);
        ck_assert_int_eq(put_write(s, "t", CP1, "x", 0, "1", 1, &err), CONVO_ECORRUPT);
        snprintf(sql, sizeof sql, "SELECT pending = %s FROM %s",
                 bad[i % (sizeof bad / sizeof *bad)], table);
        ck_assert_int_eq(sql_int(path, sql), 1); /* nothing written */
    }
    convo_close(s);
}
END_TEST

START_TEST(test_ids_sharing_the_indexed_bytes)
{
    const char *path = db_path("ids");
    convo_store *s = open_db(path);
    put(s, "t", CP1, NULL);
    put(s, "t", CP2, CP1);
    put(s, "t", CP3, CP2);
    put(s, "t", "1f1ea1bf", CP3); /* text: 8 characters of the UUIDs' hex */
    put(s, "t", "text id", "1f1ea1bf");
    put(s, "u", CP2, NULL);
    ck_assert_int_eq(sql_int(path, "SELECT count(DISTINCT substr(id, 5, 4)) FROM"
                                   " convo_checkpoints WHERE typeof(id) = 'blob'"), 1);
    const char *ids[] = {CP1, CP2, CP3, "1f1ea1bf", "text id"};
    for (int i = 0; i < 5; i++) {
        convo_checkpoint *cp = get(s, "t", ids[i]);
        if (i)
            ck_assert_str_eq(convo_checkpoint_parent_id(cp), ids[i - 1]);
        convo_checkpoint_free(cp);
        write_ok(s, "t", ids[i], TASK_A, 0, ids[i]);
    }
    for (int i = 0; i < 5; i++) {
        convo_checkpoint *cp = get(s, "t", ids[i]);
        const char *want[1];
        char one[128];
        snprintf(one, sizeof one, TASK_A "/0=%s", ids[i]);
        want[0] = one;
        assert_writes(cp, want, 1);
        convo_checkpoint_free(cp);
    }
    convo_checkpoint *cp = get(s, "u", CP2);
    assert_writes(cp, NULL, 0);
    convo_checkpoint_free(cp);
    convo_error err;
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", "1f1ea1bf-f11c-6fd0-8063-000000000000",
                                          &cp, &err),
                     CONVO_ENOTFOUND);
    /* a re-put of a UUID among others sharing its bytes stays one row */
    put(s, "t", CP2, CP1);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoints WHERE thread = 1"),
                     5);
    convo_close(s);
}
END_TEST

START_TEST(test_migration_9_to_10)
{
    const char *path = db_path("nine");
    convo_store *s = open_db(path);
    put(s, "t", CP1, NULL);
    put(s, "t", CP2, CP1);
    put(s, "t", CP3, CP2);
    convo_close(s);
    /* layout-9 rows: writes in their table, task ids as 16 bytes or text */
    exec_raw(path, LAYOUT_16_TO_15 LAYOUT_15_TO_14 LAYOUT_14_TO_13 LAYOUT_13_TO_12 LAYOUT_10_TO_9
                   "INSERT INTO convo_names(name) VALUES('~path'), ('messages'), ('__error__');"
                   "INSERT INTO convo_checkpoint_writes SELECT c.key, x'"
                   "dc5f84fc65f350efb0aa0cc429ae0809', 0, p.num, m.num, j.num, CAST('\"b0\"' AS BLOB)"
                   " FROM convo_checkpoints AS c, convo_names AS p, convo_names AS m,"
                   " convo_names AS j WHERE c.id = x'1f1ea1bff11c6fd08063654e85edccb8'"
                   " AND p.name = '~path' AND m.name = 'messages' AND j.name = 'json';"
                   "INSERT INTO convo_checkpoint_writes SELECT c.key, 'zz', 0, p.num, m.num,"
                   " j.num, CAST('\"z\"' AS BLOB)"
                   " FROM convo_checkpoints AS c, convo_names AS p, convo_names AS m,"
                   " convo_names AS j WHERE c.id = x'1f1ea1bff11c6fd08063654e85edccb8'"
                   " AND p.name = '~path' AND m.name = 'messages' AND j.name = 'json';"
                   "INSERT INTO convo_checkpoint_writes SELECT c.key, x'"
                   "46f2b82410075938980aefe0c0bb8de3', -1, p.num, e.num, j.num, CAST('\"e\"' AS BLOB)"
                   " FROM convo_checkpoints AS c, convo_names AS p, convo_names AS e,"
                   " convo_names AS j WHERE c.id = x'1f1ea1bff11c6fd08063654e85edccb8'"
                   " AND p.name = '~path' AND e.name = '__error__' AND j.name = 'json';"
                   "INSERT INTO convo_checkpoint_writes SELECT c.key, 'zz', 0, p.num, m.num,"
                   " j.num, CAST('\"3\"' AS BLOB)"
                   " FROM convo_checkpoints AS c, convo_names AS p, convo_names AS m,"
                   " convo_names AS j WHERE c.id = x'1f1ea1bff11c6fd080657c192acd2557'"
                   " AND p.name = '~path' AND m.name = 'messages' AND j.name = 'json';"
                   "UPDATE convo_meta SET value = '9' WHERE key = 'schema_version'");
    /* a layout-9 process that has the file open */
    sqlite3 *old;
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_open(path, &old), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(old, "SELECT count(*) FROM convo_checkpoint_writes", -1,
                                        &st, NULL),
                     SQLITE_OK);
    s = open_db(path);
    ck_assert_int_eq(sql_int(path, "SELECT value FROM convo_meta WHERE key = 'schema_version'"),
                     SQLITE_LAYOUT_NOW);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM sqlite_master"
                                   " WHERE name = 'convo_checkpoint_writes'"), 0);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoints"
                                   " WHERE pending IS NOT NULL"), 2);
    ck_assert_int_eq(sql_int(path, "SELECT sql LIKE '%substr(id, 5, 4)%' FROM sqlite_master"
                                   " WHERE name = 'convo_checkpoints_by_id'"), 1);
    const char *one[] = {TASK_A "/-1=\"e\"", TASK_B "/0=\"b0\"", "zz/0=\"z\""};
    convo_checkpoint *cp = get(s, "t", CP1);
    assert_writes(cp, one, 3);
    ck_assert_ptr_null(convo_checkpoint_parent_id(cp));
    convo_checkpoint_free(cp);
    assert_writes(cp = get(s, "t", CP2), NULL, 0);
    ck_assert_str_eq(convo_checkpoint_parent_id(cp), CP1);
    convo_checkpoint_free(cp);
    const char *three_w[] = {"zz/0=\"3\""};
    assert_writes(cp = get(s, "t", CP3), three_w, 1);
    convo_checkpoint_free(cp);
    /* writes after the migration merge into the migrated records */
    write_ok(s, "t", CP1, "zz", 0, "\"ignored\"");
    write_ok(s, "t", CP1, "a-task", 0, "\"a\"");
    const char *more[] = {TASK_A "/-1=\"e\"", "a-task/0=\"a\"", TASK_B "/0=\"b0\"",
                          "zz/0=\"z\""};
    assert_writes(cp = get(s, "t", CP1), more, 4);
    convo_checkpoint_free(cp);
    /* the old process's statement no longer reads, its put no longer writes */
    ck_assert_int_ne(sqlite3_step(st), SQLITE_ROW);
    sqlite3_finalize(st);
    ck_assert_int_eq(sqlite3_exec(old, "INSERT OR REPLACE INTO convo_checkpoints(key, thread, ns,"
                                       " id, parent, meta, log_length, created_at, put_order,"
                                       " channel_list) VALUES(1, 1, '', 'y', 1, '{}', 0, 1, 1,"
                                       " x'')",
                                  NULL, NULL, NULL),
                     SQLITE_ERROR);
    sqlite3_close(old);
    convo_close(s);
    exec_raw(path, "PRAGMA integrity_check");
}
END_TEST

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    Suite *suite = suite_create("layout10");
    TCase *tc = tcase_create("layout10");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_writes_in_the_row);
    tcase_add_test(tc, test_undecodable_record_is_corrupt);
    tcase_add_test(tc, test_ids_sharing_the_indexed_bytes);
    tcase_add_test(tc, test_migration_9_to_10);
    suite_add_tcase(suite, tc);
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
