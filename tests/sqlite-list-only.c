/* sqlite-list-only.c — list opts v5 only_channel reaches the SQLite driver's
 * statements: without a metadata filter a listing reads no metadata (a row
 * whose stored metadata does not decode lists, where a whole listing or one
 * with a filter is CONVO_ECORRUPT), and hands out only that channel and its
 * writes. `tests/sqlite_list_only DIR` works in DIR. */
#include <check.h>
#include <convo.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *dir;

static const char *U1 = "{\"role\":\"user\",\"content\":\"hi\"}";
static const char *A1 = "{\"role\":\"assistant\",\"content\":\"hello\"}";
static const convo_blob COUNT = {"json", "1", 1};
static const convo_blob OTHER = {"json", "\"other\"", 7};
static const convo_blob BODY = {"json", "{\"v\":4}", 7};

static const char *db_path(void)
{
    static char buf[512];
    snprintf(buf, sizeof buf, "%s/list-only-%ld.db", dir, (long)getpid());
    const char *suffix[] = {"", "-wal", "-shm"};
    for (int i = 0; i < 3; i++) {
        char f[600];
        snprintf(f, sizeof f, "%s%s", buf, suffix[i]);
        unlink(f);
    }
    return buf;
}

/* Checkpoint id (parent or NULL) of thread "t": "messages" [U1] in the log,
 * "count" a plain value, LangGraph-shaped metadata (kept as shape + values). */
static void put(convo_store *s, const char *id, const char *parent, int step)
{
    convo_items_in it = CONVO_ITEMS_IN_INIT;
    it.items = &U1;
    it.n = 1;
    it.log = 1;
    const convo_items_in *per[2] = {NULL, &it};
    convo_channel_in c[2] = {{"count", id, &COUNT}, {"messages", id, NULL}};
    char meta[96];
    snprintf(meta, sizeof meta, "{\"source\":\"loop\",\"step\":%d,\"parents\":{}}", step);
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = "t";
    cp.checkpoint_id = id;
    cp.parent_id = parent;
    cp.metadata_json = meta;
    cp.body = BODY;
    cp.channels = c;
    cp.nchannels = 2;
    cp.channel_items = per;
    convo_error err;
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "%s", err.message);
}

/* Task "agent"'s writes to checkpoint id: [A1] to "messages", a plain value
 * to "other". */
static void write_two(convo_store *s, const char *id)
{
    convo_items_in it = CONVO_ITEMS_IN_INIT;
    it.items = &A1;
    it.n = 1;
    const convo_items_in *per[2] = {&it, NULL};
    convo_write_in w[2] = {{0, "messages", {NULL, NULL, 0}}, {1, "other", OTHER}};
    convo_writes_in in = CONVO_WRITES_IN_INIT;
    in.thread_id = "t";
    in.checkpoint_id = id;
    in.task_id = "agent";
    in.writes = w;
    in.n = 2;
    in.items = per;
    convo_error err;
    ck_assert_msg(convo_checkpoint_put_writes_ex(s, &in, &err) == 0, "%s", err.message);
}

static void exec_raw(const char *path, const char *sql)
{
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    ck_assert_msg(rc == SQLITE_OK, "%s: %s", sql, msg ? msg : sqlite3_errstr(rc));
    sqlite3_close(db);
}

static int list(convo_store *s, const char *only, const char *filter, convo_checkpoint_set **out)
{
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = "t";
    o.checkpoint_ns = "";
    o.only_channel = only;
    o.filter_json = filter;
    convo_error err;
    *out = NULL;
    return convo_checkpoint_list(s, &o, out, &err);
}

/* c2's stored metadata no longer decodes (values without their shape): only
 * a listing that reads it fails. */
START_TEST(test_only_channel_reads_no_metadata)
{
    const char *path = db_path();
    char url[600];
    snprintf(url, sizeof url, "sqlite:%s", path);
    convo_store *s = NULL;
    convo_error err;
    ck_assert_msg(convo_open(&s, url, &err) == 0, "%s", err.message);
    put(s, "c1", NULL, 1);
    write_two(s, "c1");
    put(s, "c2", "c1", 2);
    put(s, "c3", "c2", 3);
    convo_close(s);
    /* layout 17: c2 is hot, its metadata in convo_checkpoint_hot */
    exec_raw(path, "UPDATE convo_checkpoint_hot SET meta_shape = NULL, meta = x'00ff'"
                   " WHERE key = (SELECT key FROM convo_checkpoints WHERE id = 'c2' AND sealed = 0)");
    ck_assert_msg(convo_open(&s, url, &err) == 0, "%s", err.message);

    convo_checkpoint_set *set;
    ck_assert_int_eq(list(s, NULL, NULL, &set), CONVO_ECORRUPT);
    ck_assert_ptr_null(set);
    ck_assert_int_eq(list(s, "messages", "{\"step\":1}", &set), CONVO_ECORRUPT);
    ck_assert_ptr_null(set);

    ck_assert_int_eq(list(s, "messages", NULL, &set), 0);
    ck_assert_uint_eq(convo_checkpoint_set_count(set), 3);
    const convo_checkpoint *c1 = convo_checkpoint_set_get(set, 2);
    ck_assert_str_eq(convo_checkpoint_id(c1), "c1");
    ck_assert_str_eq(convo_checkpoint_metadata(c1), "{}");
    ck_assert_ptr_null(convo_checkpoint_body(c1).type);
    ck_assert_uint_eq(convo_checkpoint_channel_count(c1), 1);
    const char *version;
    convo_blob value;
    ck_assert_str_eq(convo_checkpoint_channel(c1, 0, &version, &value), "messages");
    ck_assert_str_eq(version, "c1");
    ck_assert_uint_eq(convo_checkpoint_write_count(c1), 1);
    const char *task_path, *channel;
    int64_t idx;
    ck_assert_str_eq(convo_checkpoint_write(c1, 0, &task_path, &idx, &channel, &value), "agent");
    ck_assert_str_eq(channel, "messages");
    convo_items it;
    ck_assert_int_eq(convo_checkpoint_write_items(c1, 0, &it), 1);
    ck_assert_uint_eq(it.n, 1);
    ck_assert_str_eq(it.items[0], A1);
    ck_assert_str_eq(convo_checkpoint_parent_id(convo_checkpoint_set_get(set, 1)), "c1");
    convo_checkpoint_set_free(set);

    /* the channel that is not a list, across threads (the statements of every thread) */
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.only_channel = "count";
    ck_assert_msg(convo_checkpoint_list(s, &o, &set, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(convo_checkpoint_set_count(set), 3);
    for (size_t i = 0; i < 3; i++) {
        const convo_checkpoint *cp = convo_checkpoint_set_get(set, i);
        ck_assert_uint_eq(convo_checkpoint_channel_count(cp), 1);
        ck_assert_str_eq(convo_checkpoint_channel(cp, 0, &version, &value), "count");
        ck_assert_uint_eq(value.len, 1);
        ck_assert_int_eq(memcmp(value.bytes, "1", 1), 0);
        ck_assert_uint_eq(convo_checkpoint_write_count(cp), 0);
    }
    convo_checkpoint_set_free(set);
    o.before = "c3";
    o.before_thread_id = "t";
    ck_assert_msg(convo_checkpoint_list(s, &o, &set, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(convo_checkpoint_set_count(set), 2);
    convo_checkpoint_set_free(set);
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
    Suite *suite = suite_create("sqlite-list-only");
    TCase *tc = tcase_create("sqlite-list-only");
    tcase_add_test(tc, test_only_channel_reads_no_metadata);
    suite_add_tcase(suite, tc);
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
