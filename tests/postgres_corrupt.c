/* postgres_corrupt.c — a checkpoint row the driver cannot decode is
 * CONVO_ECORRUPT for every call that decodes it, not CONVO_EINVAL: an id
 * whose bytes are not UTF-8 (SQLSTATE 22021 from convert_from()) on get,
 * latest, list and the rewrite that names it; a versions value that does not
 * check (2202E from channel_list()) also on prune, delete, the rewrite that
 * drops checkpoints and the copy of a thread with its checkpoints. Each such
 * call writes nothing; deleting the thread still works. The caller's err may
 * be NULL. A listing of one channel (list opts v5 only_channel) decodes no
 * other channel's write nor the metadata. Part of tests/postgres_extra
 * (postgres.h). */
#include "postgres.h"
#include <check.h>
#include <convo.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const two[] = {"{\"role\":\"user\",\"content\":\"a\"}",
                                  "{\"role\":\"assistant\",\"content\":\"b\"}"};

/* Thread "t" of schema `name`: two messages, checkpoints c1 and c2 of log
 * length 2 (c2's parent c1), then `corrupt` (SQL, @S the schema) on its rows. */
static convo_store *corrupt_thread(const char *name, const char *corrupt)
{
    drop_schema(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    convo_error err;
    ck_assert_int_eq(convo_append(s, "t", two, NULL, 2, NULL, NULL, &err), 0);
    const char *ids[] = {"c1", "c2"};
    /* (v31) values over 1,024 bytes, rows of checkpoint_blobs: prune decodes
     * the remaining rows' versions only to free values there */
    static char big[2][1100];
    for (int i = 0; i < 2; i++) {
        memset(big[i], i ? '2' : '1', sizeof big[i]);
        convo_blob value = {"json", big[i], sizeof big[i]};
        convo_channel_in ch = {"ch", i ? "v2" : "v1", &value};
        convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
        cp.thread_id = "t";
        cp.checkpoint_id = ids[i];
        cp.parent_id = i ? ids[0] : NULL;
        cp.channels = &ch;
        cp.nchannels = 1;
        cp.log_length = 2;
        ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put: %s", err.message);
    }
    PGconn *pg = admin();
    exec_in_schema(pg, schema_name(name), corrupt);
    PQfinish(pg);
    return s;
}

/* rc is CONVO_ECORRUPT, with a message that says so. */
static void is_corrupt(const char *what, int rc, const convo_error *err)
{
    ck_assert_msg(rc == CONVO_ECORRUPT, "%s: %d %s (%s)", what, rc, err->message,
                  err->backend_code);
    ck_assert_msg(strstr(err->message, "corrupt") || strstr(err->message, "decode"), "%s: %s",
                  what, err->message);
}

/* get c2 (unless its id is what is corrupt: no id finds it), latest and list. */
static void reads_are_corrupt(convo_store *s, int by_id)
{
    convo_checkpoint *cp = NULL;
    convo_error err;
    if (by_id)
        is_corrupt("get", convo_checkpoint_get(s, "t", "", "c2", &cp, &err), &err);
    ck_assert_ptr_null(cp);
    is_corrupt("latest", convo_checkpoint_get(s, "t", "", NULL, &cp, &err), &err);
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", NULL, &cp, NULL), CONVO_ECORRUPT);
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = "t";
    convo_checkpoint_set *set = NULL;
    is_corrupt("list", convo_checkpoint_list(s, &o, &set, &err), &err);
    ck_assert_ptr_null(set);
}

/* The thread as it was: two messages at generation 0, two checkpoint rows. */
static void unchanged(convo_store *s, const char *name)
{
    convo_history *h;
    convo_error err;
    ck_assert_int_eq(convo_load(s, "t", NULL, &h, &err), 0);
    ck_assert_int_eq(convo_history_count(h), 2);
    ck_assert_int_eq(convo_history_generation(h), 0);
    convo_history_free(h);
    PGconn *pg = admin();
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM \"%s\".checkpoints", schema_name(name));
    ck_assert_int_eq(query_long(pg, sql), 2);
    PQfinish(pg);
}

/* The thread goes, corrupt rows and all. */
static void delete_thread(convo_store *s, const char *name)
{
    convo_error err;
    ck_assert_msg(convo_thread_delete(s, "t", &err) == 0, "delete: %s", err.message);
    PGconn *pg = admin();
    ck_assert_int_eq(rows_of(pg, name, "t"), 0);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}

/* The ids of c1 and c2 start with a byte that is not UTF-8. */
START_TEST(test_id_not_utf8_is_corrupt)
{
    const char *name = "idbad";
    convo_store *s = corrupt_thread(name, "UPDATE @S.checkpoints SET checkpoint_id ="
                                          " '\\xff63'::bytea || checkpoint_id");
    reads_are_corrupt(s, 0);
    convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT; /* refused: names a checkpoint past keep */
    convo_rewrite_result res;
    convo_error err;
    is_corrupt("rewrite", convo_replace_tail(s, "t", 1, NULL, NULL, 0, &o, &res, &err), &err);
    ck_assert_int_eq(convo_replace_tail(s, "t", 1, NULL, NULL, 0, &o, &res, NULL),
                     CONVO_ECORRUPT);
    o.idempotency_key = "k"; /* replace_tail() itself, not the one-statement form */
    is_corrupt("rewrite with a key", convo_replace_tail(s, "t", 1, NULL, NULL, 0, &o, &res, &err),
               &err);
    unchanged(s, name);
    /* what needs no id still works */
    ck_assert_int_eq(convo_checkpoint_prune(s, "t", 5, &err), 0);
    delete_thread(s, name);
}
END_TEST

/* A parent id that is not UTF-8: the reads that return it. */
START_TEST(test_parent_not_utf8_is_corrupt)
{
    const char *name = "parentbad";
    convo_store *s = corrupt_thread(name, "UPDATE @S.checkpoints SET parent_id = '\\xc3'::bytea"
                                          " WHERE parent_id IS NOT NULL");
    reads_are_corrupt(s, 1);
    unchanged(s, name);
    delete_thread(s, name);
}
END_TEST

/* Every row's versions one byte short of its lengths. */
START_TEST(test_versions_corrupt_on_writes)
{
    const char *name = "verbad";
    convo_store *s = corrupt_thread(name, "UPDATE @S.checkpoints SET versions ="
                                          " substring(versions FOR octet_length(versions) - 1)");
    reads_are_corrupt(s, 1);
    convo_error err;
    is_corrupt("prune", convo_checkpoint_prune(s, "t", 1, &err), &err);
    ck_assert_int_eq(convo_checkpoint_prune(s, "t", 1, NULL), CONVO_ECORRUPT);
    convo_checkpoint_list_opts lo = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    lo.thread_id = "t";
    uint64_t removed = 9;
    int rc = convo_checkpoint_delete(s, &lo, &removed, &err);
    is_corrupt("delete", rc, &err);
    convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
    o.drop_checkpoints = 1;
    convo_rewrite_result res;
    is_corrupt("rewrite dropping", convo_replace_tail(s, "t", 1, NULL, NULL, 0, &o, &res, &err),
               &err);
    o.idempotency_key = "k";
    is_corrupt("rewrite dropping, with a key",
               convo_replace_tail(s, "t", 1, NULL, NULL, 0, &o, &res, &err), &err);
    convo_fork_opts fo = CONVO_FORK_OPTS_INIT;
    fo.with_checkpoints = 1;
    is_corrupt("copy", convo_thread_fork_ex(s, "t", "u", -1, &fo, &err), &err);
    convo_history *h = NULL;
    ck_assert_int_eq(convo_load(s, "u", NULL, &h, &err), CONVO_ENOTFOUND);
    unchanged(s, name);
    delete_thread(s, name);
}
END_TEST

/* Data the caller gave that the server refuses stays CONVO_EINVAL: a value
 * type that is not UTF-8 (the core checks only its length). */
START_TEST(test_bad_input_stays_einval)
{
    const char *name = "inbad";
    convo_store *s = open_ok(schema_url(name, NULL));
    convo_blob value = {"\xff", "1", 1};
    convo_channel_in ch = {"ch", "v1", &value};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = "t";
    cp.checkpoint_id = "c1";
    cp.channels = &ch;
    cp.nchannels = 1;
    convo_error err;
    int rc = convo_checkpoint_put(s, &cp, &err);
    ck_assert_msg(rc == CONVO_EINVAL, "put: %d %s (%s)", rc, err.message, err.backend_code);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* list opts v5 only_channel reaches the statement (checkpoint_list.sql $8):
 * c2's metadata is no object and c1's write to "other" does not decode; a
 * listing of "ch" reads neither and lists both, a whole listing is corrupt. */
START_TEST(test_only_channel_reads_no_other)
{
    const char *name = "onlych";
    convo_store *s = corrupt_thread(name, "SELECT 1");
    static const convo_blob X = {"json", "\"x\"", 3}, Y = {"json", "\"y\"", 3};
    convo_write_in w[2] = {{0, "ch", X}, {1, "other", Y}};
    convo_writes_in in = CONVO_WRITES_IN_INIT;
    in.thread_id = "t";
    in.checkpoint_id = "c1";
    in.task_id = "agent";
    in.writes = w;
    in.n = 2;
    convo_error err;
    ck_assert_msg(convo_checkpoint_put_writes_ex(s, &in, &err) == 0, "%s", err.message);
    PGconn *pg = admin();
    exec_in_schema(pg, schema_name(name),
                   "UPDATE @S.checkpoints SET metadata = '[1]' WHERE checkpoint_id ="
                   " (SELECT checkpoint_id FROM @S.checkpoints WHERE parent_id IS NOT NULL);"
                   /* (v39) the short form: the channel in bytes 6-7, the task
                    * id's length in byte 10 */
                   "UPDATE @S.checkpoints SET writes = (SELECT array_agg(CASE"
                   " WHEN substring(e FROM 6 FOR 2) = substring(int4send((SELECT num FROM"
                   " @S.checkpoint_names WHERE name = 'other')) FROM 3)"
                   " THEN overlay(e PLACING '\\xff'::bytea FROM 10 FOR 1) ELSE e END"
                   " ORDER BY o) FROM unnest(writes) WITH ORDINALITY AS u(e, o))"
                   " WHERE writes IS NOT NULL");
    PQfinish(pg);
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = "t";
    convo_checkpoint_set *set = NULL;
    is_corrupt("list", convo_checkpoint_list(s, &o, &set, &err), &err);
    ck_assert_ptr_null(set);
    o.only_channel = "other";
    is_corrupt("list of other", convo_checkpoint_list(s, &o, &set, &err), &err);
    o.only_channel = "ch";
    ck_assert_msg(convo_checkpoint_list(s, &o, &set, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(convo_checkpoint_set_count(set), 2);
    const convo_checkpoint *c1 = convo_checkpoint_set_get(set, 1);
    ck_assert_str_eq(convo_checkpoint_id(c1), "c1");
    ck_assert_str_eq(convo_checkpoint_metadata(convo_checkpoint_set_get(set, 0)), "{}");
    ck_assert_ptr_null(convo_checkpoint_body(c1).type);
    const char *version, *task_path, *channel;
    convo_blob value;
    int64_t idx;
    ck_assert_uint_eq(convo_checkpoint_channel_count(c1), 1);
    ck_assert_str_eq(convo_checkpoint_channel(c1, 0, &version, &value), "ch");
    ck_assert_str_eq(version, "v1");
    ck_assert_uint_eq(value.len, 1100);
    ck_assert_uint_eq(convo_checkpoint_write_count(c1), 1);
    ck_assert_str_eq(convo_checkpoint_write(c1, 0, &task_path, &idx, &channel, &value), "agent");
    ck_assert_str_eq(channel, "ch");
    ck_assert_uint_eq(value.len, 3);
    ck_assert_int_eq(memcmp(value.bytes, "\"x\"", 3), 0);
    convo_checkpoint_set_free(set);
    delete_thread(s, name);
}
END_TEST

/* A NULL element of c1's writes (version 33: CONVO_ECORRUPT, never dropped)
 * has no channel bytes to skip it by: a listing of one channel is corrupt too,
 * not that channel's writes without it (the element may have been one). */
START_TEST(test_only_channel_null_write_is_corrupt)
{
    const char *name = "onlynull";
    convo_store *s = corrupt_thread(name, "SELECT 1");
    static const convo_blob X = {"json", "\"x\"", 3};
    convo_write_in w = {0, "ch", X};
    convo_writes_in in = CONVO_WRITES_IN_INIT;
    in.thread_id = "t";
    in.checkpoint_id = "c1";
    in.task_id = "agent";
    in.writes = &w;
    in.n = 1;
    convo_error err;
    ck_assert_msg(convo_checkpoint_put_writes_ex(s, &in, &err) == 0, "%s", err.message);
    PGconn *pg = admin();
    exec_in_schema(pg, schema_name(name),
                   "UPDATE @S.checkpoints SET writes = array_append(writes, NULL)"
                   " WHERE writes IS NOT NULL");
    PQfinish(pg);
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = "t";
    convo_checkpoint_set *set = NULL;
    is_corrupt("list", convo_checkpoint_list(s, &o, &set, &err), &err);
    o.only_channel = "ch";
    is_corrupt("list of ch", convo_checkpoint_list(s, &o, &set, &err), &err);
    ck_assert_ptr_null(set);
    delete_thread(s, name);
}
END_TEST

/* Since schema 36 checkpoints.metadata is text (meta_pack()), no longer json
 * checked by the server: a text that is no JSON object once meta_text() puts
 * its fragments back is CONVO_ECORRUPT on get, latest and list, and on a list
 * with a metadata filter (meta_jsonb(): 22P02), not handed out or EINVAL. */
START_TEST(test_metadata_not_json_is_corrupt)
{
    const char *name = "metatext";
    convo_store *s = corrupt_thread(name, "UPDATE @S.checkpoints SET metadata = E'{\"a\":\\x0c'");
    reads_are_corrupt(s, 1);
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = "t";
    o.filter_json = "{\"step\":1}";
    convo_checkpoint_set *set = NULL;
    convo_error err;
    is_corrupt("list with a filter", convo_checkpoint_list(s, &o, &set, &err), &err);
    ck_assert_ptr_null(set);
    ck_assert_int_eq(convo_checkpoint_list(s, &o, &set, NULL), CONVO_ECORRUPT);
    /* one channel's listing does not read the metadata, but the filter does */
    o.only_channel = "ch";
    is_corrupt("list of ch with a filter", convo_checkpoint_list(s, &o, &set, &err), &err);
    o.filter_json = NULL;
    ck_assert_msg(convo_checkpoint_list(s, &o, &set, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(convo_checkpoint_set_count(set), 2);
    convo_checkpoint_set_free(set);
    delete_thread(s, name);
}
END_TEST

void postgres_add_corrupt_tests(Suite *s)
{
    TCase *tc = tcase_create("corrupt");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_id_not_utf8_is_corrupt);
    tcase_add_test(tc, test_parent_not_utf8_is_corrupt);
    tcase_add_test(tc, test_versions_corrupt_on_writes);
    tcase_add_test(tc, test_bad_input_stays_einval);
    tcase_add_test(tc, test_only_channel_reads_no_other);
    tcase_add_test(tc, test_only_channel_null_write_is_corrupt);
    tcase_add_test(tc, test_metadata_not_json_is_corrupt);
    suite_add_tcase(s, tc);
}
