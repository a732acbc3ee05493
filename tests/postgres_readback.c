/* postgres_readback.c — checkpoints decoded by the driver from their rows
 * (drivers/postgres/readback.c, unpack.c): versions of every stored form back
 * as put, names added after the store copied them found, a number that names
 * nothing CONVO_ECORRUPT, and a row that changes between the rows and the
 * values read from checkpoint_blobs read again (CONVO_ECONFLICT when it keeps
 * changing). Part of tests/postgres_extra (postgres.h). */
#include "postgres.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *put_thread = "t"; /* the thread put_cp() puts to */

/* A checkpoint `id` of thread put_thread: channels names[i] at versions[i], each
 * value vals[i] (NULL: none) of type "json"; one pending write to
 * names[0] of task `task`. */
static void put_cp(convo_store *s, const char *id, size_t n, const char *const *names,
                   const char *const *versions, const char *const *vals, const char *task)
{
    convo_blob v[8];
    convo_channel_in ch[8];
    for (size_t i = 0; i < n; i++) {
        v[i] = (convo_blob){"json", vals[i], vals[i] ? strlen(vals[i]) : 0};
        ch[i] = (convo_channel_in){names[i], versions[i], vals[i] ? &v[i] : NULL};
    }
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = put_thread;
    cp.checkpoint_id = id;
    cp.channels = ch;
    cp.nchannels = n;
    cp.metadata_json = "{\"source\":\"loop\",\"step\":3,\"parents\":{}}";
    convo_error err;
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put: %s", err.message);
    convo_write_in w = {0, names[0], {"msgpack", "\x01", 1}};
    convo_writes_in in = CONVO_WRITES_IN_INIT;
    in.thread_id = put_thread;
    in.checkpoint_id = id;
    in.task_id = task;
    in.task_path = "~__pregel_pull, model";
    in.writes = &w;
    in.n = 1;
    ck_assert_msg(convo_checkpoint_put_writes_ex(s, &in, &err) == 0, "%s", err.message);
}

/* Versions in each stored form (ver_pack(): LangGraph's counted ones, a
 * UUID, too few digits, a count with non-ASCII after it, plain text; one over 255 bytes: form 4)
 * come back as put, by get, latest and list, with the metadata, the write and
 * its task id (a UUID and not). */
START_TEST(test_versions_and_ids_back_as_put)
{
    const char *name = "rb1", *schema = schema_name(name);
    (void)schema;
    convo_store *s = open_ok(schema_url(name, NULL));
    static char long_ver[301];
    memset(long_ver, 'q', sizeof long_ver - 1);
    const char *names[] = {"a", "b", "c", "d", "e", "f", "g"};
    const char *versions[] = {"00000000000000000000000000000005.0000000000000000",
                              "0000000000000599.k27lp6lcw6",
                              "1f1e9eee-1758-6660-8003-f7e2ee72e9c1",
                              "123.x",
                              "00001.\xc3\xa9",
                              "plain",
                              long_ver};
    const char *vals[] = {"1", NULL, "\"three\"", "4", NULL, "6", "7"};
    put_cp(s, "1f1e9eee-1758-6660-8003-f7e2ee72e9c9", 7, names, versions, vals,
           "2f1e9eee-1758-6660-8003-f7e2ee72e9c9");
    put_cp(s, "sixteen-byte-id!", 2, names, versions, vals, "task-id");
    convo_checkpoint *cp = NULL;
    convo_error err;
    for (int pass = 0; pass < 2; pass++) {
        const char *id = pass ? "sixteen-byte-id!" : "1f1e9eee-1758-6660-8003-f7e2ee72e9c9";
        size_t n = pass ? 2 : 7;
        ck_assert_msg(convo_checkpoint_get(s, "t", "", id, &cp, &err) == 0, "%s", err.message);
        ck_assert_str_eq(convo_checkpoint_id(cp), id);
        ck_assert_str_eq(convo_checkpoint_metadata(cp),
                         "{\"source\":\"loop\",\"step\":3,\"parents\":{}}");
        ck_assert_uint_eq(convo_checkpoint_channel_count(cp), n);
        for (size_t i = 0; i < n; i++) {
            const char *ver;
            convo_blob v;
            ck_assert_str_eq(convo_checkpoint_channel(cp, i, &ver, &v), names[i]);
            ck_assert_str_eq(ver, versions[i]);
            if (vals[i]) {
                ck_assert_str_eq(v.type, "json");
                ck_assert_uint_eq(v.len, strlen(vals[i]));
                ck_assert_int_eq(memcmp(v.bytes, vals[i], v.len), 0);
            } else {
                ck_assert_ptr_null(v.type);
            }
        }
        const char *path, *channel;
        int64_t idx;
        convo_blob wv;
        ck_assert_uint_eq(convo_checkpoint_write_count(cp), 1);
        ck_assert_str_eq(convo_checkpoint_write(cp, 0, &path, &idx, &channel, &wv),
                         pass ? "task-id" : "2f1e9eee-1758-6660-8003-f7e2ee72e9c9");
        ck_assert_str_eq(path, "~__pregel_pull, model");
        ck_assert_str_eq(channel, "a");
        ck_assert_str_eq(wv.type, "msgpack");
        convo_checkpoint_free(cp);
    }
    ck_assert_msg(convo_checkpoint_get(s, "t", "", NULL, &cp, &err) == 0, "%s", err.message);
    ck_assert_str_eq(convo_checkpoint_id(cp), "sixteen-byte-id!");
    ck_assert_str_eq(convo_checkpoint_parent_id(cp) ? "parent" : "none", "none");
    convo_checkpoint_free(cp);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* Store A has copied the names; store B adds a channel, a value type and a
 * task path A has not seen: A's next read fetches them. */
START_TEST(test_names_added_later_are_found)
{
    const char *name = "rb2";
    convo_store *a = open_ok(schema_url(name, NULL)), *b = open_ok(schema_url(name, NULL));
    const char *n1[] = {"x"}, *v1[] = {"1"}, *x1[] = {"1"};
    put_cp(a, "c1", 1, n1, v1, x1, "t1");
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_get(a, "t", "", NULL, &cp, &err) == 0, "%s", err.message);
    convo_checkpoint_free(cp);
    const char *n2[] = {"brand-new", "x"}, *v2[] = {"2", "1"}, *x2[] = {"\"n\"", "1"};
    put_cp(b, "c2", 2, n2, v2, x2, "t2");
    ck_assert_msg(convo_checkpoint_get(a, "t", "", NULL, &cp, &err) == 0, "%s", err.message);
    const char *ver;
    convo_blob v;
    ck_assert_uint_eq(convo_checkpoint_channel_count(cp), 2);
    ck_assert_str_eq(convo_checkpoint_channel(cp, 0, &ver, &v), "brand-new");
    const char *path, *channel;
    int64_t idx;
    ck_assert_str_eq(convo_checkpoint_write(cp, 0, &path, &idx, &channel, &v), "t2");
    ck_assert_str_eq(channel, "brand-new");
    convo_checkpoint_free(cp);
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = "t";
    o.only_channel = "brand-new";
    convo_checkpoint_set *set = NULL;
    ck_assert_msg(convo_checkpoint_list(a, &o, &set, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(convo_checkpoint_set_count(set), 2);
    ck_assert_uint_eq(convo_checkpoint_channel_count(convo_checkpoint_set_get(set, 0)), 1);
    ck_assert_uint_eq(convo_checkpoint_channel_count(convo_checkpoint_set_get(set, 1)), 0);
    convo_checkpoint_set_free(set);
    /* a name in no channel set (a write's channel and type): no set to fetch */
    convo_write_in w = {1, "written-only", {"type-new", "z", 1}};
    convo_writes_in in = CONVO_WRITES_IN_INIT;
    in.thread_id = "t";
    in.checkpoint_id = "c2";
    in.task_id = "t3";
    in.task_path = "path-new";
    in.writes = &w;
    in.n = 1;
    ck_assert_msg(convo_checkpoint_put_writes_ex(b, &in, &err) == 0, "%s", err.message);
    ck_assert_msg(convo_checkpoint_get(a, "t", "", NULL, &cp, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(convo_checkpoint_write_count(cp), 2);
    ck_assert_str_eq(convo_checkpoint_write(cp, 1, &path, &idx, &channel, &v), "t3");
    ck_assert_str_eq(path, "path-new");
    ck_assert_str_eq(channel, "written-only");
    ck_assert_str_eq(v.type, "type-new");
    convo_checkpoint_free(cp);
    convo_close(a);
    convo_close(b);
    drop_schema(name);
}
END_TEST

/* A channel set, channel, value type, write field or body type number that
 * names nothing is CONVO_ECORRUPT, whether the store had copied the names
 * before or not. (A set rewritten in place after the store copied it is not
 * seen: sets, like names, are only ever added.) */
START_TEST(test_numbers_naming_nothing_are_corrupt)
{
    const char *name = "rb3", *schema = schema_name(name);
    static const char *const damage[] = {
        "UPDATE @S.checkpoints SET channel_set = 99999",
        "UPDATE @S.checkpoint_channel_sets SET channels = ARRAY[99999]",
        "UPDATE @S.checkpoints SET vals = overlay(vals PLACING int4send(99999) FROM 2 FOR 4)",
        "UPDATE @S.checkpoints SET writes[1] = overlay(writes[1] PLACING '\\xfff0'::bytea"
        " FROM 6 FOR 2)",
        "UPDATE @S.checkpoints SET body_type = 99999, body = '\\x00'",
    };
    for (size_t i = 0; i < sizeof damage / sizeof *damage; i++) {
        for (int warm = 0; warm < (i == 1 ? 1 : 2); warm++) {
            drop_schema(name);
            convo_store *s = open_ok(schema_url(name, NULL));
            const char *n[] = {"x"}, *v[] = {"1"}, *x[] = {"1"};
            put_cp(s, "c1", 1, n, v, x, "t1");
            convo_checkpoint *cp = NULL;
            convo_error err;
            if (warm)
                ck_assert_int_eq(convo_checkpoint_get(s, "t", "", NULL, &cp, &err), 0);
            convo_checkpoint_free(cp);
            cp = NULL;
            PGconn *pg = admin();
            exec_in_schema(pg, schema, damage[i]);
            PQfinish(pg);
            int rc = convo_checkpoint_get(s, "t", "", NULL, &cp, &err);
            ck_assert_msg(rc == CONVO_ECORRUPT, "damage %zu (warm %d): %d %s", i, warm, rc,
                          err.message);
            ck_assert_msg(strstr(err.message, "corrupt") != NULL, "%s", err.message);
            ck_assert_ptr_null(cp);
            convo_close(s);
        }
    }
    drop_schema(name);
}
END_TEST

/* A listing of checkpoints whose values are in checkpoint_blobs (three
 * threads, a checkpoint each at the same versions, two such channels each with
 * values of their own, and one channel with none) gives each its own, by the
 * one look-up of the read. */
START_TEST(test_listed_values_from_the_blobs_each_its_own)
{
    const char *name = "rb6";
    drop_schema(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    static char big[3][2][1100];
    const char *threads[3] = {"t1", "t2", "t3"}, *vers[3] = {"1", "1", "1"};
    for (int i = 0; i < 3; i++) {
        memset(big[i][0], 'a' + i, 1099);
        memset(big[i][1], 'A' + i, 1099);
        const char *n[] = {"p", "q", "r"}, *x[] = {big[i][0], big[i][1], NULL};
        put_thread = threads[i];
        put_cp(s, "c", 3, n, vers, x, "task");
    }
    put_thread = "t";
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    convo_checkpoint_set *set = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_list(s, &o, &set, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(convo_checkpoint_set_count(set), 3);
    for (int i = 0; i < 3; i++) {
        const convo_checkpoint *cp = convo_checkpoint_set_get(set, (size_t)i);
        ck_assert_str_eq(convo_checkpoint_thread_id(cp), threads[i]); /* threads in id order */
        const char *ver;
        convo_blob v;
        for (size_t c = 0; c < 2; c++) {
            convo_checkpoint_channel(cp, c, &ver, &v);
            ck_assert_uint_eq(v.len, 1099);
            ck_assert_int_eq(((const char *)v.bytes)[0], (c ? 'A' : 'a') + i);
        }
        convo_checkpoint_channel(cp, 2, &ver, &v);
        ck_assert_ptr_null(v.type);
    }
    convo_checkpoint_set_free(set);
    convo_close(s);
    drop_schema(name);
}
END_TEST

typedef struct reader {
    convo_store *s;
    int rc;
    convo_checkpoint *cp;
} reader;

static void *read_latest(void *arg)
{
    reader *r = arg;
    r->rc = convo_checkpoint_get(r->s, "t", "", NULL, &r->cp, NULL);
    return NULL;
}

/* Waits (polling, up to 10 s) until a session of application `app` has a
 * lock request not granted: pg_locks, which the releasing session updates as
 * it grants, not the waiter's own wait_event, which lags. */
static void wait_for_waiting(const char *app)
{
    PGconn *pg = admin();
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
             " WHERE a.application_name = '%s' AND NOT l.granted", app);
    for (int i = 0; i < 1000 && query_long(pg, sql) == 0; i++)
        usleep(10 * 1000);
    PQfinish(pg);
}

/* An admin connection named app (for wait_for_waiting). */
static PGconn *admin_as(const char *app)
{
    PGconn *pg = admin();
    char sql[96];
    snprintf(sql, sizeof sql, "SET application_name = '%s'", app);
    PQclear(PQexec(pg, sql));
    return pg;
}

/* Thread t with checkpoint c1 whose channel "a" is in checkpoint_blobs (over
 * 1,024 bytes); a store of application `app`, one connection. */
static convo_store *blob_thread(const char *name, const char *app)
{
    drop_schema(name);
    char more[96];
    snprintf(more, sizeof more, "application_name=%s&pool=1", app);
    convo_store *s = open_ok(schema_url(name, more));
    static char big[1100];
    memset(big, 'b', sizeof big - 1);
    const char *n[] = {"a"}, *v[] = {"1"}, *x[] = {big};
    put_cp(s, "c1", 1, n, v, x, "t1");
    return s;
}

/* While the driver waits to read checkpoint_blobs (locked here), the row's
 * value becomes inline (as a swap makes it): the read starts again and gives
 * the new value, not the one it had found in the blobs. */
START_TEST(test_row_changed_under_the_read_is_read_again)
{
    const char *name = "rb4", *schema = schema_name(name);
    convo_store *s = blob_thread(name, "rb4reader");
    PGconn *pg = admin();
    exec_in_schema(pg, schema, "BEGIN; LOCK TABLE @S.checkpoint_blobs IN ACCESS EXCLUSIVE MODE");
    reader r = {s, 0, NULL};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, read_latest, &r), 0);
    wait_for_waiting("rb4reader");
    exec_in_schema(pg, schema,
                   "UPDATE @S.checkpoints SET vals = '\\x02'::bytea || int4send((SELECT num"
                   " FROM @S.checkpoint_names WHERE name = 'json')) || '\\x000178'::bytea;"
                   " COMMIT");
    pthread_join(th, NULL);
    ck_assert_int_eq(r.rc, 0);
    const char *ver;
    convo_blob v;
    ck_assert_str_eq(convo_checkpoint_channel(r.cp, 0, &ver, &v), "a");
    ck_assert_uint_eq(v.len, 1);
    ck_assert_int_eq(((const char *)v.bytes)[0], 'x');
    convo_checkpoint_free(r.cp);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* The row changes between the two statements of every attempt (vals
 * rewritten between its two forms, the value still in the blobs; two admin
 * sessions pass the blobs' lock on so that each attempt waits): after 8 the
 * read gives up, CONVO_ECONFLICT. */
START_TEST(test_row_changing_every_time_is_a_conflict)
{
    const char *name = "rb5", *schema = schema_name(name);
    convo_store *s = blob_thread(name, "rb5reader");
    PGconn *pg[2] = {admin_as("rb5admin"), admin_as("rb5admin")};
    static const char *const forms[2] = {
        "UPDATE @S.checkpoints SET vals = '\\x0000000000'",
        "UPDATE @S.checkpoints SET vals = '\\x02000000000000'"};
    exec_in_schema(pg[0], schema, "BEGIN; LOCK TABLE @S.checkpoint_blobs IN ACCESS EXCLUSIVE MODE");
    reader r = {s, 0, NULL};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, read_latest, &r), 0);
    char lock[160];
    snprintf(lock, sizeof lock, "LOCK TABLE \"%s\".checkpoint_blobs IN ACCESS EXCLUSIVE MODE",
             schema);
    int h = 0;
    for (int k = 0; k < 8; k++, h = 1 - h) {
        wait_for_waiting("rb5reader");
        exec_in_schema(pg[h], schema, forms[k % 2]);
        if (k < 7) { /* the other session queues for the lock behind the reader */
            PQclear(PQexec(pg[1 - h], "BEGIN"));
            ck_assert_int_eq(PQsendQuery(pg[1 - h], lock), 1);
            wait_for_waiting("rb5admin");
        }
        exec_in_schema(pg[h], schema, "COMMIT");
        if (k < 7) {
            PGresult *res;
            while ((res = PQgetResult(pg[1 - h])) != NULL)
                PQclear(res);
        }
    }
    pthread_join(th, NULL);
    ck_assert_int_eq(r.rc, CONVO_ECONFLICT);
    ck_assert_ptr_null(r.cp);
    PQfinish(pg[0]);
    PQfinish(pg[1]);
    convo_close(s);
    drop_schema(name);
}
END_TEST

void postgres_add_readback_tests(Suite *s)
{
    TCase *tc = tcase_create("readback");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_versions_and_ids_back_as_put);
    tcase_add_test(tc, test_names_added_later_are_found);
    tcase_add_test(tc, test_numbers_naming_nothing_are_corrupt);
    tcase_add_test(tc, test_listed_values_from_the_blobs_each_its_own);
    tcase_add_test(tc, test_row_changed_under_the_read_is_read_again);
    tcase_add_test(tc, test_row_changing_every_time_is_a_conflict);
    suite_add_tcase(s, tc);
}
