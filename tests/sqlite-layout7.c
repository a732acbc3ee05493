/* sqlite-layout7.c — layout 7 of the SQLite driver (docs/sqlite.md, "Layout 7:
 * checkpoints stored densely") beyond the conformance suite:
 *   - channel names, value types and task paths are kept once (convo_names);
 *   - a parent put shortly before its child is named by place, a farther one
 *     by id, and a child keeps its parent's id when the parent goes (delete,
 *     prune, a rewrite dropping checkpoints) or is not copied with it;
 *   - canonical UUID ids (checkpoint, parent, task) are stored as 16 bytes and
 *     come back as the same text through get, get by id, list, `before`,
 *     writes, prune and delete; any other id (an upper-case UUID, a short
 *     name) is stored as its text; writes come back in task id text order
 *     whichever way their ids are stored;
 *   - channel versions of every form come back exactly, in the channel list
 *     and as the key of their values (numbers, zero-padded JS and Python
 *     LangGraph versions, UUIDs, leading zeros that are not padding, text);
 *   - a layout-6 file, made by the migrations of the source tree with rows of
 *     each kind, is migrated on open and reads back as it was stored.
 * `tests/sqlite_layout7 SQLDIR DIR`: SQLDIR is drivers/sqlite of the source
 * tree, DIR a scratch folder. */
#include <check.h>
#include <convo.h>
#include <sqlite3.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "sqlite_layout.h"

static const char *sqldir;

#define CP1 "1f1e9d80-3eda-6630-837f-58595672227b"
#define CP2 "1f1e9d80-3ef5-63e0-8380-5c8b846e6a1b"
#define CP3 "1f1e9d80-3efa-6200-8381-d4a3140c35ea"
#define TASK_A "46f2b824-1007-5938-980a-efe0c0bb8de3"
#define TASK_B "dc5f84fc-65f3-50ef-b0aa-0cc429ae0809"
#define UPPER "1F1E9D80-3EFF-6020-8382-FC0644D73835"
/* layout 10: a pending write's task id in its checkpoint's record, 0x10 and
 * its 16 bytes (drivers/sqlite/pending.c) */
#define TASK_A_STORED "x'1046f2b8241007593898' || x'0aefe0c0bb8de3'"
#define TASK_B_STORED "x'10dc5f84fc65f350efb0' || x'aa0cc429ae0809'"

/* The whole of a file of the source tree (malloc'd). */
static char *slurp(const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", sqldir, name);
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "open %s: %s", path, strerror(errno));
    ck_assert_int_eq(fseek(f, 0, SEEK_END), 0);
    long n = ftell(f);
    rewind(f);
    char *buf = malloc((size_t)n + 1);
    ck_assert_ptr_nonnull(buf);
    ck_assert_int_eq(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Checkpoint id of thread "t" with parent, channels "a" and "b" at versions
 * va and vb, each with the value "va"/"vb" as JSON text. */
static void put_cp(convo_store *s, const char *id, const char *parent, const char *va,
                   const char *vb)
{
    char ja[128], jb[128];
    snprintf(ja, sizeof ja, "\"%s\"", va);
    snprintf(jb, sizeof jb, "\"%s\"", vb);
    convo_blob ba = {"json", ja, strlen(ja)}, bb = {"json", jb, strlen(jb)};
    convo_channel_in ch[2] = {{"b", vb, &bb}, {"a", va, &ba}};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = "t";
    cp.checkpoint_id = id;
    cp.parent_id = parent;
    cp.metadata_json = "{\"source\":\"loop\"}";
    cp.channels = ch;
    cp.nchannels = 2;
    convo_error err;
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put %s: %s", id, err.message);
}

static void put_write(convo_store *s, const char *cp, const char *task, int64_t idx)
{
    convo_write_in w = {idx, "messages", {"json", "1", 1}};
    convo_error err;
    ck_assert_msg(convo_checkpoint_put_writes(s, "t", "", cp, task, "~path", &w, 1, &err) == 0,
                  "%s", err.message);
}

/* Checks that checkpoint cp has id, parent, the values of "a" and "b" at
 * versions va and vb. */
static void check_cp(const convo_checkpoint *cp, const char *id, const char *parent,
                     const char *va, const char *vb)
{
    ck_assert_ptr_nonnull(cp);
    ck_assert_str_eq(convo_checkpoint_id(cp), id);
    if (parent)
        ck_assert_str_eq(convo_checkpoint_parent_id(cp), parent);
    else
        ck_assert_ptr_null(convo_checkpoint_parent_id(cp));
    ck_assert_int_eq(convo_checkpoint_channel_count(cp), 2);
    const char *want[2] = {va, vb};
    for (size_t i = 0; i < 2; i++) {
        const char *version;
        convo_blob value;
        const char *name = convo_checkpoint_channel(cp, i, &version, &value);
        ck_assert_str_eq(name, i ? "b" : "a");
        ck_assert_str_eq(version, want[i]);
        char json[128];
        snprintf(json, sizeof json, "\"%s\"", want[i]);
        ck_assert_msg(value.type && value.len == strlen(json) && !memcmp(value.bytes, json,
                                                                          value.len),
                      "value of %s at %s", name, version);
    }
}

static convo_checkpoint *get(convo_store *s, const char *id)
{
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_get(s, "t", "", id, &cp, &err) == 0, "get %s: %s",
                  id ? id : "latest", err.message);
    return cp;
}

START_TEST(test_uuid_ids)
{
    const char *path = db_path("uuids");
    convo_store *s = open_db(path);
    put_cp(s, CP1, NULL, "1", "1");
    put_cp(s, CP2, CP1, "2", "1");
    put_cp(s, UPPER, CP2, "3", "1");
    put_cp(s, "short", UPPER, "4", "1");
    put_cp(s, CP3, "short", "5", "1");
    /* canonical UUIDs in 16 bytes; the upper-case one and the name as text */
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoints"
                                   " WHERE typeof(id) = 'blob' AND length(id) = 16"), 3);
    /* each parent is the checkpoint put just before: named by place */
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoints"
                                   " WHERE parent_place = 1 AND parent_id IS NULL"), 4);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoints"
                                   " WHERE typeof(id) = 'text'"), 2);
    /* the view shows the text */
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoint_view"
                                   " WHERE checkpoint_id = '" CP2 "' AND parent_id = '" CP1 "'"),
                     1);
    convo_checkpoint *cp = get(s, CP2);
    check_cp(cp, CP2, CP1, "2", "1");
    convo_checkpoint_free(cp);
    check_cp(cp = get(s, UPPER), UPPER, CP2, "3", "1");
    convo_checkpoint_free(cp);
    check_cp(cp = get(s, "short"), "short", UPPER, "4", "1");
    convo_checkpoint_free(cp);
    check_cp(cp = get(s, NULL), CP3, "short", "5", "1");
    convo_checkpoint_free(cp);
    /* the lower-case text of UPPER is another id */
    convo_error err;
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", "1f1e9d80-3eff-6020-8382-fc0644d73835", &cp,
                                          &err),
                     CONVO_ENOTFOUND);
    /* list and before */
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = "t";
    o.before = UPPER;
    convo_checkpoint_set *set;
    ck_assert_int_eq(convo_checkpoint_list(s, &o, &set, &err), 0);
    ck_assert_int_eq(convo_checkpoint_set_count(set), 2);
    check_cp(convo_checkpoint_set_get(set, 0), CP2, CP1, "2", "1");
    check_cp(convo_checkpoint_set_get(set, 1), CP1, NULL, "1", "1");
    convo_checkpoint_set_free(set);
    /* writes: UUID task ids in 16 bytes, in text order with a text one */
    put_write(s, CP3, TASK_B, 0);
    put_write(s, CP3, "a-task", 1);
    put_write(s, CP3, TASK_A, 0);
    put_write(s, CP3, TASK_A, -1);
    put_write(s, CP3, TASK_A, 0); /* idx >= 0 stays once */
    put_write(s, CP3, "zz", 0);
    ck_assert_int_eq(sql_int(path, "SELECT instr(pending, " TASK_A_STORED ") > 0"
                                   " AND instr(pending, " TASK_B_STORED ") > 0"
                                   " FROM (SELECT pending FROM convo_checkpoints WHERE pending"
                                   " IS NOT NULL UNION ALL SELECT pending FROM"
                                   " convo_checkpoint_pending)"), 1); /* layout 13 */
    /* channel names, types and task paths are kept once: a, b, json, ~path,
     * messages; and (layout 8) the metadata's shape */
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_names"), 6);
    /* byte order of the texts: TASK_A "46f2..." < "a-task" < TASK_B "dc5f..."
     * < "zz" (SQLite itself would order every text before every BLOB) */
    cp = get(s, CP3);
    const char *want[] = {TASK_A, TASK_A, "a-task", TASK_B, "zz"};
    const int64_t want_idx[] = {-1, 0, 1, 0, 0};
    ck_assert_int_eq(convo_checkpoint_write_count(cp), 5);
    for (size_t i = 0; i < 5; i++) {
        const char *task_path, *channel;
        int64_t idx;
        convo_blob v;
        const char *task = convo_checkpoint_write(cp, i, &task_path, &idx, &channel, &v);
        ck_assert_str_eq(task, want[i]);
        ck_assert_int_eq(idx, want_idx[i]);
        ck_assert_str_eq(task_path, "~path");
    }
    convo_checkpoint_free(cp);
    /* delete by a filter and prune keep the others readable with their values */
    convo_checkpoint_list_opts d = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    d.thread_id = "t";
    d.filter_json = "{\"source\":\"loop\"}";
    d.before = CP2;
    uint64_t removed = 0;
    ck_assert_int_eq(convo_checkpoint_delete(s, &d, &removed, &err), 0);
    ck_assert_int_eq(removed, 1); /* CP1 */
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", CP1, &cp, &err), CONVO_ENOTFOUND);
    ck_assert_int_eq(convo_checkpoint_prune(s, "t", 2, &err), 0);
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", CP2, &cp, &err), CONVO_ENOTFOUND);
    check_cp(cp = get(s, "short"), "short", UPPER, "4", "1");
    convo_checkpoint_free(cp);
    check_cp(cp = get(s, CP3), CP3, "short", "5", "1");
    ck_assert_int_eq(convo_checkpoint_write_count(cp), 5);
    convo_checkpoint_free(cp);
    /* the values a 4, 5 and b 1 stay, read above from the list entries of the
     * rows that remain (layout 11: small values are not in convo_blobs) */
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_blobs"), 0);
    convo_close(s);
}
END_TEST

/* Checkpoint id of thread "p" with parent and log_length, no channels. */
static void put_at(convo_store *s, const char *id, const char *parent, int64_t log_length)
{
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = "p";
    cp.checkpoint_id = id;
    cp.parent_id = parent;
    cp.metadata_json = "{}";
    cp.log_length = log_length;
    convo_error err;
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put %s: %s", id, err.message);
}

static void check_parent(convo_store *s, const char *thread, const char *id, const char *parent)
{
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_get(s, thread, "", id, &cp, &err) == 0, "get %s: %s", id,
                  err.message);
    ck_assert_str_eq(convo_checkpoint_parent_id(cp), parent);
    convo_checkpoint_free(cp);
}

START_TEST(test_parent_by_place)
{
    const char *path = db_path("parents");
    convo_store *s = open_db(path);
    const char *m[6];
    for (int i = 0; i < 6; i++)
        m[i] = "{\"role\":\"user\",\"content\":\"x\"}";
    convo_error err;
    ck_assert_int_eq(convo_append(s, "p", m, NULL, 6, NULL, NULL, &err), 0);
    put_at(s, CP1, NULL, 0);
    put_at(s, CP2, CP1, 6); /* the parent refers to more messages than its child */
    put_at(s, CP3, CP2, 2);
    char id[32];
    for (int i = 0; i < 20; i++) {
        snprintf(id, sizeof id, "filler-%d", i);
        put_at(s, id, NULL, 0);
    }
    put_at(s, "far", CP1, 0);      /* 23 places after its parent: by id */
    put_at(s, "unknown", "nowhere", 0);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoints WHERE parent_place = 1"), 2);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoints"
                                   " WHERE parent_place IS NULL AND parent_id IS NOT NULL"), 2);
    check_parent(s, "p", "far", CP1);
    check_parent(s, "p", "unknown", "nowhere");
    /* a copy of the first 3 messages takes CP1 and CP3, not CP2: CP3 names it by id */
    convo_fork_opts fo = CONVO_FORK_OPTS_INIT;
    fo.with_checkpoints = 1;
    ck_assert_int_eq(convo_thread_fork_ex(s, "p", "q", 3, &fo, &err), 0);
    check_parent(s, "q", CP3, CP2);
    check_parent(s, "q", "far", CP1);
    convo_checkpoint *none = NULL;
    ck_assert_int_eq(convo_checkpoint_get(s, "q", "", CP2, &none, &err), CONVO_ENOTFOUND);
    /* a rewrite keeping 3 messages drops CP2; CP3 keeps naming it */
    convo_rewrite_opts ro = CONVO_REWRITE_OPTS_INIT;
    ro.drop_checkpoints = 1;
    convo_rewrite_result r;
    ck_assert_int_eq(convo_replace_tail(s, "p", 3, NULL, NULL, 0, &ro, &r, &err), 0);
    ck_assert_int_eq(convo_checkpoint_get(s, "p", "", CP2, &none, &err), CONVO_ENOTFOUND);
    check_parent(s, "p", CP3, CP2);
    /* the list shows the same parents */
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = "p";
    convo_checkpoint_set *set;
    ck_assert_int_eq(convo_checkpoint_list(s, &o, &set, &err), 0);
    ck_assert_int_eq(convo_checkpoint_set_count(set), 24);
    ck_assert_str_eq(convo_checkpoint_parent_id(convo_checkpoint_set_get(set, 22)), CP2);
    convo_checkpoint_set_free(set);
    convo_close(s);
}
END_TEST

/* Versions of every form, as channel versions and as the keys of values. */
START_TEST(test_versions_exact)
{
    static const char *const versions[] = {
        "0", "7", "42", "999999999999999999", "1000000000000000000", "007", "00",
        "0000000000000900.h1ethx6m0p",
        "00000000000000000000000000000005.0.8372618274892734",
        "00000000000000000000000000000005.0.83726182748927341234567890123456789",
        "0000000000000000000000000000000000000000000000000000000000000000000000001x",
        CP1, UPPER, "1.5", "v1", "-3", "0x10", "12abc", "ünïcode"};
    const size_t n = sizeof versions / sizeof *versions;
    const char *path = db_path("versions");
    convo_store *s = open_db(path);
    char id[32];
    for (size_t i = 0; i < n; i++) {
        snprintf(id, sizeof id, "c%zu", i);
        put_cp(s, id, NULL, versions[i], versions[(i + 1) % n]);
    }
    /* distinct versions are distinct values: one value per (channel, version),
     * each read back below; since layout 11 in the list entry of the checkpoint
     * that brought it (none over 4,096 bytes here), not in convo_blobs */
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_blobs"), 0);
    for (size_t i = 0; i < n; i++) {
        snprintf(id, sizeof id, "c%zu", i);
        convo_checkpoint *cp = get(s, id);
        check_cp(cp, id, NULL, versions[i], versions[(i + 1) % n]);
        convo_checkpoint_free(cp);
    }
    /* a channel named twice is refused, nothing written */
    convo_channel_in twice[2] = {{"a", "1", NULL}, {"a", "2", NULL}};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = "t";
    cp.checkpoint_id = "twice";
    cp.metadata_json = "{}";
    cp.channels = twice;
    cp.nchannels = 2;
    convo_error err;
    ck_assert_int_ne(convo_checkpoint_put(s, &cp, &err), 0);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoints"), (long long)n);
    convo_close(s);
}
END_TEST

/* A layout-6 file: two threads' checkpoints with UUID and other ids, channel
 * rows, values and pending writes as a layout-6 libconvo stored them. */
static const char v6_rows[] =
    "INSERT INTO convo_threads(num, id, created_at, updated_at) VALUES(1, 't', 1, 1);"
    "INSERT INTO convo_threads(num, id, created_at, updated_at) VALUES(2, 'u', 1, 1);"
    "INSERT INTO convo_checkpoints VALUES((1 << 32) | 0, 1, '', '" CP1 "', NULL,"
    "  '{\"step\":1}', 'json', CAST('{}' AS BLOB), 0, 10, 1);"
    "INSERT INTO convo_checkpoints VALUES((1 << 32) | 1, 1, '', '" CP2 "', '" CP1 "',"
    "  '{\"step\":2}', NULL, NULL, 0, 11, 2);"
    "INSERT INTO convo_checkpoints VALUES((2 << 32) | 0, 2, 'sub', 'named', '" UPPER "',"
    "  '{}', NULL, NULL, 0, 12, 3);"
    "INSERT INTO convo_checkpoint_channels VALUES((1 << 32) | 0, 'b', '1');"
    "INSERT INTO convo_checkpoint_channels VALUES((1 << 32) | 0, 'a', "
    "  '0000000000000001.h1ethx6m0p');"
    "INSERT INTO convo_checkpoint_channels VALUES((1 << 32) | 1, 'a', "
    "  '00000000000000000000000000000002.0.8372618274892734');"
    "INSERT INTO convo_checkpoint_channels VALUES((1 << 32) | 1, 'b', '1');"
    "INSERT INTO convo_checkpoint_channels VALUES((2 << 32) | 0, 'a', '" CP1 "');"
    "INSERT INTO convo_checkpoint_channels VALUES((2 << 32) | 0, 'b', 'x');"
    "INSERT INTO convo_blobs VALUES(1, '', 'a', '0000000000000001.h1ethx6m0p', 'json',"
    "  CAST('\"0000000000000001.h1ethx6m0p\"' AS BLOB));"
    "INSERT INTO convo_blobs VALUES(1, '', 'a', "
    "  '00000000000000000000000000000002.0.8372618274892734', 'json',"
    "  CAST('\"00000000000000000000000000000002.0.8372618274892734\"' AS BLOB));"
    "INSERT INTO convo_blobs VALUES(1, '', 'b', '1', 'json', CAST('\"1\"' AS BLOB));"
    "INSERT INTO convo_blobs VALUES(2, 'sub', 'a', '" CP1 "', 'json',"
    "  CAST('\"" CP1 "\"' AS BLOB));"
    "INSERT INTO convo_blobs VALUES(2, 'sub', 'b', 'x', 'json', CAST('\"x\"' AS BLOB));"
    "INSERT INTO convo_checkpoint_writes VALUES((1 << 32) | 1, '" TASK_B "', 0, '~p', 'a',"
    "  'json', CAST('1' AS BLOB));"
    "INSERT INTO convo_checkpoint_writes VALUES((1 << 32) | 1, 'plain', 0, '~p', 'a',"
    "  'json', CAST('2' AS BLOB));"
    "INSERT INTO convo_checkpoint_writes VALUES((1 << 32) | 1, '" TASK_A "', -1, '~p', 'a',"
    "  'json', CAST('3' AS BLOB));";

START_TEST(test_migration_6_to_7)
{
    const char *path = db_path("v6");
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    char *msg = NULL;
    for (int v = 0; v < 6; v++) {
        char name[32];
        snprintf(name, sizeof name, "migrate-%d-%d.sql", v, v + 1);
        char *sql = slurp(name);
        ck_assert_msg(sqlite3_exec(db, sql, NULL, NULL, &msg) == SQLITE_OK, "%s: %s", name, msg);
        free(sql);
    }
    ck_assert_msg(sqlite3_exec(db, "INSERT OR REPLACE INTO convo_meta(key, value)"
                                   " VALUES('schema_version', '6')", NULL, NULL, &msg) == SQLITE_OK, "%s", msg);
    ck_assert_msg(sqlite3_exec(db, v6_rows, NULL, NULL, &msg) == SQLITE_OK, "%s", msg);
    sqlite3_close(db);

    convo_store *s = open_db(path);
    ck_assert_int_eq(sql_int(path, "SELECT value FROM convo_meta WHERE key = 'schema_version'"),
                     SQLITE_LAYOUT_NOW); /* 7, then 8, 9, 10, 11, 12, 13 and 14 */
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM sqlite_master"
                                   " WHERE name = 'convo_checkpoint_channels'"), 0);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoints"
                                   " WHERE typeof(id) = 'blob'"), 2);
    ck_assert_int_eq(sql_int(path, "SELECT instr(pending, " TASK_A_STORED ") > 0"
                                   " AND instr(pending, " TASK_B_STORED ") > 0"
                                   " FROM (SELECT pending FROM convo_checkpoints WHERE pending"
                                   " IS NOT NULL UNION ALL SELECT pending FROM"
                                   " convo_checkpoint_pending)"), 1); /* layout 13 */
    /* a, b, json, ~p: each once */
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_names"), 4);
    convo_checkpoint *cp = get(s, CP2);
    check_cp(cp, CP2, CP1, "00000000000000000000000000000002.0.8372618274892734", "1");
    ck_assert_str_eq(convo_checkpoint_metadata(cp), "{\"step\":2}");
    ck_assert_int_eq(convo_checkpoint_created_at(cp), 11);
    const char *want[] = {TASK_A, TASK_B, "plain"};
    ck_assert_int_eq(convo_checkpoint_write_count(cp), 3);
    for (size_t i = 0; i < 3; i++) {
        const char *task_path, *channel;
        int64_t idx;
        convo_blob v;
        ck_assert_str_eq(convo_checkpoint_write(cp, i, &task_path, &idx, &channel, &v), want[i]);
    }
    convo_checkpoint_free(cp);
    cp = get(s, CP1);
    check_cp(cp, CP1, NULL, "0000000000000001.h1ethx6m0p", "1");
    convo_blob body = convo_checkpoint_body(cp);
    ck_assert_str_eq(body.type, "json");
    ck_assert_int_eq(body.len, 2);
    convo_checkpoint_free(cp);
    convo_error err;
    ck_assert_int_eq(convo_checkpoint_get(s, "u", "sub", "named", &cp, &err), 0);
    check_cp(cp, "named", UPPER, CP1, "x");
    convo_checkpoint_free(cp);
    /* the store order carries over: a new put comes after all of them */
    put_cp(s, CP3, CP2, "9", "1");
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.before = CP3;
    o.before_thread_id = "t";
    o.before_ns = "";
    convo_checkpoint_set *set;
    ck_assert_int_eq(convo_checkpoint_list(s, &o, &set, &err), 0);
    ck_assert_int_eq(convo_checkpoint_set_count(set), 3);
    convo_checkpoint_set_free(set);
    /* and a prune drops the values only the pruned one used; CP3's new value
     * "9" is in its list entry (layout 11), the migrated ones stay rows */
    ck_assert_int_eq(convo_checkpoint_prune(s, "t", 2, &err), 0);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_blobs WHERE thread = 1"), 2);
    check_cp(cp = get(s, CP3), CP3, CP2, "9", "1");
    convo_checkpoint_free(cp);
    convo_close(s);
    /* a layout-6 process that had the file open writes nothing: no checkpoint
     * without a channel list, no pending write or value named by text */
    sqlite3 *old;
    ck_assert_int_eq(sqlite3_open(path, &old), SQLITE_OK);
    static const char *const old_writes[] = {
        "INSERT INTO convo_checkpoints(key, thread, ns, id, parent_id, metadata, body_type,"
        " body, log_length, created_at, put_order) VALUES((1 << 32) | 9, 1, '', 'x', NULL,"
        " '{}', NULL, NULL, 0, 1, 99)",
        "INSERT INTO convo_checkpoint_writes VALUES((1 << 32) | 1, 'x', 0, '~p', 'a', 'json',"
        " CAST('1' AS BLOB))",
        "INSERT INTO convo_blobs VALUES(1, '', 'a', '7', 'json', CAST('1' AS BLOB))",
        "UPDATE convo_checkpoint_writes SET type = 'json'"};
    /* (the first fails to prepare since layout 8: the column metadata is
     * named meta; the writes since layout 10: no table of pending writes) */
    for (size_t i = 0; i < sizeof old_writes / sizeof *old_writes; i++)
        ck_assert_msg(sqlite3_exec(old, old_writes[i], NULL, NULL, NULL) ==
                          (i != 2 ? SQLITE_ERROR : SQLITE_CONSTRAINT),
                      "%s", old_writes[i]);
    sqlite3_close(old);
    /* opening again changes nothing */
    s = open_db(path);
    check_cp(cp = get(s, CP2), CP2, CP1, "00000000000000000000000000000002.0.8372618274892734",
             "1");
    convo_checkpoint_free(cp);
    convo_close(s);
    exec_raw(path, "PRAGMA integrity_check");
}
END_TEST

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s SQLDIR DIR\n", argv[0]);
        return 2;
    }
    sqldir = argv[1];
    dir = argv[2];
    Suite *suite = suite_create("sqlite-layout7");
    TCase *tc = tcase_create("layout7");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_uuid_ids);
    tcase_add_test(tc, test_versions_exact);
    tcase_add_test(tc, test_parent_by_place);
    tcase_add_test(tc, test_migration_6_to_7);
    suite_add_tcase(suite, tc);
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
