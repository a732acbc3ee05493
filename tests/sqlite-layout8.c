/* sqlite-layout8.c — layout 8 of the SQLite driver (docs/sqlite.md, "Layout 8:
 * metadata as shape and values") beyond the conformance suite:
 *   - metadata is stored as its values with its shape kept once in
 *     convo_names, and comes back exactly through get, list, the metadata
 *     filter, a fork with checkpoints, export and import, odd metadata too;
 *   - past the bound on names a new shape leaves the metadata as text;
 *   - a layout-7 file is migrated on open, its rows read back as they were,
 *     and a layout-7 process that had it open can no longer read or write
 *     checkpoints (the column it names is gone).
 * `tests/sqlite_layout8 DIR`: DIR a scratch folder. */
#include <check.h>
#include <convo.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *dir;

static const char *db_path(const char *name)
{
    static char buf[512];
    snprintf(buf, sizeof buf, "%s/%s-%ld.db", dir, name, (long)getpid());
    const char *suffix[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char f[600];
        snprintf(f, sizeof f, "%s%s", buf, suffix[i]);
        unlink(f);
    }
    return buf;
}

static convo_store *open_db(const char *path)
{
    char url[600];
    snprintf(url, sizeof url, "sqlite:%s", path);
    convo_store *s = NULL;
    convo_error err;
    ck_assert_msg(convo_open(&s, url, &err) == 0, "open %s: %s", url, err.message);
    return s;
}

static long long sql_int(const char *path, const char *sql)
{
    sqlite3 *db;
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(db));
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

static void exec_raw(const char *path, const char *sql)
{
    sqlite3 *db;
    char *msg = NULL;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    ck_assert_msg(rc == SQLITE_OK, "%s: %s", sql, msg ? msg : sqlite3_errstr(rc));
    sqlite3_close(db);
}

static void put(convo_store *s, const char *tid, const char *id, const char *parent,
                const char *metadata)
{
    convo_blob v = {"json", "1", 1};
    convo_channel_in ch = {"a", id, &v};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = tid;
    cp.checkpoint_id = id;
    cp.parent_id = parent;
    cp.metadata_json = metadata;
    cp.body = (convo_blob){"json", "{\"v\":4}", 7};
    cp.channels = &ch;
    cp.nchannels = 1;
    convo_error err;
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put %s: %s", id, err.message);
}

static void assert_metadata(convo_store *s, const char *tid, const char *id, const char *want)
{
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_get(s, tid, "", id, &cp, &err) == 0, "get %s: %s", id,
                  err.message);
    ck_assert_str_eq(convo_checkpoint_metadata(cp), want);
    convo_checkpoint_free(cp);
}

/* The ids a filtered list gives, newest first, space-separated, in buf. */
static const char *list_ids(convo_store *s, const char *tid, const char *filter, char *buf,
                            size_t size)
{
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = tid;
    o.filter_json = filter;
    convo_checkpoint_set *set = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_list(s, &o, &set, &err) == 0, "list: %s", err.message);
    buf[0] = '\0';
    for (size_t i = 0; i < convo_checkpoint_set_count(set); i++) {
        const convo_checkpoint *cp = convo_checkpoint_set_get(set, i);
        snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", i ? " " : "",
                 convo_checkpoint_id(cp));
    }
    convo_checkpoint_set_free(set);
    return buf;
}

#define M_LOOP "{\"source\":\"loop\",\"step\":%d,\"parents\":{}}"
static const char *ODD =
    "{\"\xc3\xa9t\xc3\xa9\":\"\xf0\x9f\x98\x80 \\\"q\\\"\",\"r\":0.5,\"n\":null,\"t\":true,"
    "\"a\":[1,\"x\",[],{\"k\":-9223372036854775808}],\"source\":\"loop\"}";

/* Metadata of LangGraph's shape costs its values; odd metadata comes back too. */
START_TEST(test_metadata_as_values)
{
    const char *path = db_path("values");
    convo_store *s = open_db(path);
    char m[128], id[16], parent[16];
    for (int k = 0; k < 6; k++) {
        snprintf(m, sizeof m, M_LOOP, k);
        snprintf(id, sizeof id, "c%d", k);
        snprintf(parent, sizeof parent, "c%d", k - 1);
        put(s, "t", id, k ? parent : NULL, k == 3 ? "{\"source\":\"input\",\"step\":3,\"parents\":{}}"
                                                  : m);
    }
    put(s, "t", "odd", "c5", ODD);
    char *big = malloc(200100);
    ck_assert_ptr_nonnull(big);
    strcpy(big, "{\"writes\":\"");
    for (int i = 0; i < 100000; i++)
        memcpy(big + 11 + 2 * i, "\xc3\xa9", 2);
    strcpy(big + 200011, "\"}");
    put(s, "t", "big", "odd", big);
    /* one shape a kind: LangGraph's, the odd one's, the big one's */
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoints"
                                   " WHERE meta_shape IS NOT NULL AND typeof(meta) = 'blob'"),
                     8);
    ck_assert_int_eq(sql_int(path, "SELECT count(DISTINCT meta_shape) FROM convo_checkpoints"),
                     3);
    ck_assert_int_le(sql_int(path, "SELECT max(length(meta)) FROM convo_checkpoints"
                                   " WHERE id = 'c5'"),
                     9);
    for (int k = 0; k < 6; k++) {
        snprintf(m, sizeof m, M_LOOP, k);
        snprintf(id, sizeof id, "c%d", k);
        assert_metadata(s, "t", id, k == 3 ? "{\"source\":\"input\",\"step\":3,\"parents\":{}}" : m);
    }
    assert_metadata(s, "t", "odd", ODD);
    assert_metadata(s, "t", "big", big);
    char buf[256];
    ck_assert_str_eq(list_ids(s, "t", "{\"source\":\"input\"}", buf, sizeof buf), "c3");
    ck_assert_str_eq(list_ids(s, "t", "{\"step\":4}", buf, sizeof buf), "c4");
    ck_assert_str_eq(list_ids(s, "t", "{\"source\":\"loop\"}", buf, sizeof buf),
                     "odd c5 c4 c2 c1 c0");
    ck_assert_str_eq(list_ids(s, "t", "{\"r\":0.5,\"t\":true}", buf, sizeof buf), "odd");
    /* a fork with checkpoints, an export and an import keep it */
    convo_error err;
    convo_fork_opts fo = CONVO_FORK_OPTS_INIT;
    fo.with_checkpoints = 1;
    ck_assert_msg(convo_thread_fork_ex(s, "t", "u", -1, &fo, &err) == 0, "%s", err.message);
    assert_metadata(s, "u", "odd", ODD);
    assert_metadata(s, "u", "big", big);
    convo_store *d = open_db(db_path("copy"));
    ck_assert_msg(convo_copy(s, d, NULL, 0, NULL, NULL, &err) == 0, "%s", err.message);
    assert_metadata(d, "t", "odd", ODD);
    assert_metadata(d, "u", "c3", "{\"source\":\"input\",\"step\":3,\"parents\":{}}");
    assert_metadata(d, "t", "big", big);
    convo_close(d);
    free(big);
    convo_close(s);
}
END_TEST

/* Past SHAPE_NAMES_MAX names a new shape leaves metadata as text; a shape
 * already kept still codes it. */
START_TEST(test_shape_bound)
{
    const char *path = db_path("bound");
    convo_store *s = open_db(path);
    put(s, "t", "c0", NULL, "{\"source\":\"loop\",\"step\":0,\"parents\":{}}");
    convo_close(s);
    exec_raw(path, "INSERT INTO convo_names(num, name) VALUES(4096, 'many names')");
    s = open_db(path);
    put(s, "t", "c1", "c0", "{\"source\":\"loop\",\"step\":1,\"parents\":{}}");
    put(s, "t", "c2", "c1", "{\"other\":\"shape\"}");
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoints"
                                   " WHERE meta_shape IS NULL AND typeof(meta) = 'text'"),
                     1);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_names WHERE name LIKE '%other%'"),
                     0);
    assert_metadata(s, "t", "c1", "{\"source\":\"loop\",\"step\":1,\"parents\":{}}");
    assert_metadata(s, "t", "c2", "{\"other\":\"shape\"}");
    char buf[64];
    ck_assert_str_eq(list_ids(s, "t", "{\"other\":\"shape\"}", buf, sizeof buf), "c2");
    convo_close(s);
}
END_TEST

/* Values that do not fit their shape, or have none (a corrupt row), are
 * CONVO_ECORRUPT on a read that joins them: not a generic error, and not the
 * values' bytes given as the metadata's text. */
START_TEST(test_corrupt_values)
{
    const char *path = db_path("corrupt");
    const char *bad[] = {
        "UPDATE convo_checkpoints SET meta = x'91a46c6f6f70'",   /* one value short */
        "UPDATE convo_checkpoints SET meta = x'93a46c6f6f700001'", /* one too many */
        "UPDATE convo_checkpoints SET meta = x'92a46c6f6f'",     /* truncated */
        "UPDATE convo_checkpoints SET meta = x'92c0c0'",         /* nil is no value */
        "UPDATE convo_checkpoints SET meta_shape = NULL",        /* values without a shape */
        "UPDATE convo_checkpoints SET meta_shape = meta_shape + 1000", /* a shape not kept */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        convo_store *s = open_db(path);
        put(s, "t", "c0", NULL, "{\"source\":\"loop\",\"step\":0,\"parents\":{}}");
        convo_close(s);
        ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoints"
                                       " WHERE meta_shape IS NOT NULL"),
                         1);
        exec_raw(path, bad[i]);
        s = open_db(path);
        convo_checkpoint *cp = NULL;
        convo_error err;
        ck_assert_msg(convo_checkpoint_get(s, "t", "", "c0", &cp, &err) == CONVO_ECORRUPT,
                      "case %zu: get gave %d (%s)", i, err.code, err.message);
        ck_assert_ptr_null(cp);
        convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
        o.thread_id = "t";
        convo_checkpoint_set *set = NULL;
        ck_assert_msg(convo_checkpoint_list(s, &o, &set, &err) == CONVO_ECORRUPT,
                      "case %zu: list gave %d (%s)", i, err.code, err.message);
        ck_assert_ptr_null(set);
        convo_close(s);
        db_path("corrupt");
    }
}
END_TEST

/* A layout-7 file (metadata as text in column metadata) is migrated on open
 * and reads back as it was; a layout-7 process can no longer use it. */
START_TEST(test_migration_7_to_8)
{
    const char *path = db_path("seven");
    /* rows as layout 7 stored them: names past the bound keep every shape out */
    convo_store *s = open_db(path);
    put(s, "x", "first", NULL, "{}");
    convo_close(s);
    exec_raw(path, "INSERT INTO convo_names(num, name) VALUES(100000, 'many names')");
    s = open_db(path);
    char m[128], id[16], parent[16];
    for (int k = 0; k < 4; k++) {
        snprintf(m, sizeof m, M_LOOP, k);
        snprintf(id, sizeof id, "c%d", k);
        snprintf(parent, sizeof parent, "c%d", k - 1);
        put(s, "t", id, k ? parent : NULL, k == 3 ? ODD : m);
    }
    convo_close(s);
    exec_raw(path, "DELETE FROM convo_checkpoints WHERE id = 'first';"
                   "DELETE FROM convo_names WHERE num = 100000;"
                   "DROP VIEW convo_checkpoint_view;"
                   "ALTER TABLE convo_checkpoints DROP COLUMN meta_shape;"
                   "ALTER TABLE convo_checkpoints RENAME COLUMN meta TO metadata;"
                   /* a stand-in for layout 7's view, which the migration replaces */
                   "CREATE VIEW convo_checkpoint_view AS SELECT metadata FROM convo_checkpoints;"
                   "UPDATE convo_meta SET value = '7' WHERE key = 'schema_version'");
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoints"
                                   " WHERE typeof(metadata) = 'text'"),
                     4);
    /* a layout-7 process that has the file open */
    sqlite3 *old;
    ck_assert_int_eq(sqlite3_open(path, &old), SQLITE_OK);
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_prepare_v2(old, "SELECT metadata FROM convo_checkpoints", -1, &st,
                                        NULL),
                     SQLITE_OK);
    s = open_db(path);
    ck_assert_int_eq(sql_int(path, "SELECT value FROM convo_meta WHERE key = 'schema_version'"),
                     8);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoints"
                                   " WHERE meta_shape IS NULL AND typeof(meta) = 'text'"),
                     4);
    for (int k = 0; k < 4; k++) {
        snprintf(m, sizeof m, M_LOOP, k);
        snprintf(id, sizeof id, "c%d", k);
        assert_metadata(s, "t", id, k == 3 ? ODD : m);
    }
    put(s, "t", "c4", "c3", "{\"source\":\"loop\",\"step\":4,\"parents\":{}}");
    ck_assert_int_eq(sql_int(path, "SELECT typeof(meta) = 'blob' AND meta_shape IS NOT NULL"
                                   " FROM convo_checkpoints WHERE id = 'c4'"),
                     1);
    char buf[64];
    ck_assert_str_eq(list_ids(s, "t", "{\"step\":2}", buf, sizeof buf), "c2");
    ck_assert_str_eq(list_ids(s, "t", "{\"source\":\"loop\"}", buf, sizeof buf),
                     "c4 c3 c2 c1 c0");
    /* the old process's statement no longer reads: it would take values for text */
    ck_assert_int_ne(sqlite3_step(st), SQLITE_ROW);
    sqlite3_finalize(st);
    ck_assert_int_eq(sqlite3_exec(old, "INSERT INTO convo_checkpoints(key, thread, ns, id,"
                                       " metadata, log_length, created_at, put_order, channels)"
                                       " VALUES(1, 1, '', 'y', '{}', 0, 1, 1, x'')",
                                  NULL, NULL, NULL),
                     SQLITE_ERROR);
    sqlite3_close(old);
    convo_close(s);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoint_view"
                                   " WHERE (metadata IS NULL) = (metadata_shape IS NOT NULL)"),
                     5);
    exec_raw(path, "PRAGMA integrity_check");
}
END_TEST

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    Suite *s = suite_create("layout8");
    TCase *tc = tcase_create("layout8");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_metadata_as_values);
    tcase_add_test(tc, test_shape_bound);
    tcase_add_test(tc, test_corrupt_values);
    tcase_add_test(tc, test_migration_7_to_8);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
