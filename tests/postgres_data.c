/* postgres_data.c — what the PostgreSQL driver stores and reports: messages
 * byte for byte, a corrupt checkpoint reported as such, the extra compact and
 * within its limit, the driver's own SQLSTATEs, a put with messages in one
 * transaction, a statement whose first Parse fails. Part of
 * tests/postgres_extra (postgres.h). */
#include "postgres.h"
#include <check.h>
#include <convo.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Bytes jsonb would refuse or rewrite are kept exactly: messages are bytea. */
START_TEST(test_messages_byte_for_byte)
{
    convo_store *s = open_ok(schema_url("bytes", NULL));
    const char *m[] = {
        "{\"role\":\"user\",\"nul\":\"a\\u0000b\",\"z\":1,\"a\":2}",
        "{ \"role\" : \"tool\" ,\n\t\"n\": 1.000e+02, \"big\": 1e300, \"k\": {} }",
        "{\"role\":\"assistant\",\"esc\":\"\\u00e9\\ud83d\\ude00\",\"u\":\"\xf0\x9f\x98\x80\"}",
    };
    convo_error err;
    ck_assert_int_eq(convo_append(s, "t", m, NULL, 3, NULL, NULL, &err), 0);
    convo_history *h;
    ck_assert_int_eq(convo_load(s, "t", NULL, &h, &err), 0);
    ck_assert_int_eq(convo_history_count(h), 3);
    for (size_t i = 0; i < 3; i++) {
        size_t len;
        const char *got = convo_history_message(h, i, &len);
        ck_assert_int_eq(len, strlen(m[i]));
        ck_assert_mem_eq(got, m[i], len);
    }
    ck_assert_str_eq(convo_history_role(h, 1), "tool");
    convo_history_free(h);
    convo_close(s);
    drop_schema("bytes");
}
END_TEST

/* Issue 18.3: a stored checkpoint convo never writes (metadata not an object,
 * a negative log length) is CONVO_ECORRUPT for get, latest and list, with a
 * message that says so (it was "out of memory", or returned as it was). */
START_TEST(test_corrupt_checkpoint_reported)
{
    drop_schema("cpbad");
    convo_store *s = open_ok(schema_url("cpbad", NULL));
    put_checkpoint(s, "t", "c1");
    PGconn *pg = admin();
    const char *const breaks[] = {"metadata = '[1]'", "metadata = '\"x\"'", "log_length = -1"};
    for (size_t i = 0; i < sizeof breaks / sizeof *breaks; i++) {
        char sql[256];
        snprintf(sql, sizeof sql, "UPDATE \"%s\".checkpoints SET metadata = '{}', log_length = 0",
                 schema_name("cpbad"));
        free(query1(pg, sql));
        snprintf(sql, sizeof sql, "UPDATE \"%s\".checkpoints SET %s", schema_name("cpbad"),
                 breaks[i]);
        free(query1(pg, sql));
        convo_checkpoint *cp = NULL;
        convo_error err;
        for (int latest = 0; latest < 2; latest++) {
            int rc = convo_checkpoint_get(s, "t", "", latest ? NULL : "c1", &cp, &err);
            ck_assert_msg(rc == CONVO_ECORRUPT, "%s: get: %d %s", breaks[i], rc, err.message);
            ck_assert_msg(strstr(err.message, "corrupt") && !strstr(err.message, "memory"),
                          "%s: %s", breaks[i], err.message);
        }
        convo_checkpoint_set *set = NULL;
        convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
        o.thread_id = "t";
        int rc = convo_checkpoint_list(s, &o, &set, &err);
        ck_assert_msg(rc == CONVO_ECORRUPT, "%s: list: %d %s", breaks[i], rc, err.message);
        ck_assert_msg(strstr(err.message, "corrupt") && !strstr(err.message, "memory"),
                      "%s: %s", breaks[i], err.message);
    }
    PQfinish(pg);
    convo_close(s);
    drop_schema("cpbad");
}
END_TEST

/* A put with messages is one transaction: when storing the checkpoint fails
 * after the messages went in (here a constraint added behind the driver's
 * back), the messages are gone too, and a thread it created is not there. */
START_TEST(test_put_log_one_transaction)
{
    convo_store *s = open_ok(schema_url("putlog", NULL));
    PGconn *pg = admin();
    exec_in_schema(pg, schema_name("putlog"),
                   "ALTER TABLE @S.checkpoints ADD CONSTRAINT no_boom"
                   " CHECK (checkpoint_id <> 'boom')");
    const char *two[] = {msg1, msg1};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = "new";
    cp.checkpoint_id = "boom";
    cp.messages = two;
    cp.nmessages = 2;
    cp.expected_length = 0;
    cp.log_length = 2;
    convo_error err;
    ck_assert_int_ne(convo_checkpoint_put(s, &cp, &err), 0);
    ck_assert_str_eq(err.backend_code, "23514"); /* check_violation */
    convo_history *h = NULL;
    ck_assert_int_eq(convo_load(s, "new", NULL, &h, &err), CONVO_ENOTFOUND);
    ck_assert_int_eq(rows_of(pg, "putlog", "new"), 0);
    ck_assert_int_eq(append1(s, "old", &err), 0);
    cp.thread_id = "old";
    cp.expected_length = 1;
    cp.log_length = 3;
    ck_assert_int_ne(convo_checkpoint_put(s, &cp, &err), 0);
    ck_assert_int_eq(length_of(s, "old"), 1);
    cp.checkpoint_id = "fine";
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put_log: %s", err.message);
    ck_assert_int_eq(length_of(s, "old"), 3);
    /* a conflict is the function's CV409, like append's */
    cp.checkpoint_id = "late";
    ck_assert_int_eq(convo_checkpoint_put(s, &cp, &err), CONVO_ECONFLICT);
    ck_assert_str_eq(err.backend_code, "CV409");
    ck_assert_str_eq(err.message, "thread has 3 messages, expected 1");
    ck_assert_int_eq(length_of(s, "old"), 3);
    convo_close(s);
    PQfinish(pg);
    drop_schema("putlog");
}
END_TEST

/* Extra comes back compact whatever jsonb prints, and the limit counts the
 * compact size: exactly the limit is allowed, one byte more is not. */
START_TEST(test_extra_compact_and_limit)
{
    convo_store_opts o = CONVO_STORE_OPTS_INIT;
    o.max_extra_bytes = 64;
    convo_store *s = NULL;
    convo_error err;
    ck_assert_int_eq(convo_open_ex(&s, schema_url("extra", NULL), &o, &err), 0);
    ck_assert_int_eq(convo_save_extra(s, "t", "{\"s\":\"x, y: z\",\"o\":{\"k\":[1,2]}}", &err),
                     0);
    convo_history *h;
    ck_assert_int_eq(convo_load(s, "t", NULL, &h, &err), 0);
    /* jsonb orders keys by length, then bytes */
    ck_assert_str_eq(convo_history_extra(h), "{\"o\":{\"k\":[1,2]},\"s\":\"x, y: z\"}");
    convo_history_free(h);
    /* 31 bytes now; ,"pad":"<n x>" adds 9 + n */
    const char *xs = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
    char patch[128];
    snprintf(patch, sizeof patch, "{\"pad\":\"%.*s\"}", 64 - 31 - 9 + 1, xs);
    ck_assert_int_eq(convo_save_extra(s, "t", patch, &err), CONVO_ETOOLARGE);
    ck_assert_str_eq(err.backend_code, "CV413");
    ck_assert_int_eq(convo_load(s, "t", NULL, &h, &err), 0);
    ck_assert_int_eq(strlen(convo_history_extra(h)), 31); /* nothing written */
    convo_history_free(h);
    snprintf(patch, sizeof patch, "{\"pad\":\"%.*s\"}", 64 - 31 - 9, xs);
    ck_assert_int_eq(convo_save_extra(s, "t", patch, &err), 0);
    ck_assert_int_eq(convo_load(s, "t", NULL, &h, &err), 0);
    ck_assert_int_eq(strlen(convo_history_extra(h)), 64);
    convo_history_free(h);
    convo_close(s);
    drop_schema("extra");
}
END_TEST

START_TEST(test_custom_sqlstates_kept)
{
    convo_store *s = open_ok(schema_url("codes", NULL));
    convo_error err;
    ck_assert_int_eq(append1(s, "t", &err), 0);
    convo_append_opts o = CONVO_APPEND_OPTS_INIT;
    o.expected_length = 5;
    ck_assert_int_eq(convo_append(s, "t", &msg1, NULL, 1, &o, NULL, &err), CONVO_ECONFLICT);
    ck_assert_str_eq(err.backend_code, "CV409");
    ck_assert_int_eq(convo_thread_fork(s, "nope", "u", -1, &err), CONVO_ENOTFOUND);
    ck_assert_str_eq(err.backend_code, "CV404");
    ck_assert_int_eq(convo_thread_fork(s, "t", "u", 9, &err), CONVO_EINVAL);
    ck_assert_str_eq(err.backend_code, "CV400");
    convo_history *h = NULL;
    ck_assert_int_eq(convo_load(s, "u", NULL, &h, &err), CONVO_ENOTFOUND);
    convo_close(s);
    drop_schema("codes");
}
END_TEST

/* A statement's first run on a connection sends Parse, Bind, Execute and Sync
 * in one pipeline. When the Parse fails (here: a table renamed behind the
 * store's back), the call fails with the server's message, the connection
 * stays usable, and the next run parses again. */
START_TEST(test_first_run_parse_failure_then_recovery)
{
    convo_store *s = open_ok(schema_url("parse", "pool=1"));
    PGconn *pg = admin();
    const char *schema = schema_name("parse");
    exec_in_schema(pg, schema, "ALTER TABLE @S.messages RENAME TO messages_away");
    convo_error err;
    int rc = append1(s, "t", &err);
    ck_assert_int_ne(rc, 0);
    ck_assert_msg(strstr(err.message, "does not exist") && strcmp(err.backend_code, "42P01") == 0,
                  "%d %s (%s)", rc, err.message, err.backend_code);
    /* the same connection (pool=1) runs other statements */
    convo_thread_page *page;
    ck_assert_int_eq(convo_thread_list(s, NULL, 0, &page, &err), 0);
    convo_thread_page_free(page);
    exec_in_schema(pg, schema, "ALTER TABLE @S.messages_away RENAME TO messages");
    ck_assert_msg(append1(s, "t", &err) == 0, "%s", err.message);
    ck_assert_msg(append1(s, "t", &err) == 0, "%s", err.message); /* prepared by now */
    ck_assert_int_eq(length_of(s, "t"), 2);
    convo_close(s);
    PQfinish(pg);
    drop_schema("parse");
}
END_TEST

void postgres_add_data_tests(Suite *s)
{
    TCase *tc = tcase_create("data");
    tcase_add_test(tc, test_messages_byte_for_byte);
    tcase_add_test(tc, test_corrupt_checkpoint_reported);
    tcase_add_test(tc, test_extra_compact_and_limit);
    tcase_add_test(tc, test_custom_sqlstates_kept);
    tcase_add_test(tc, test_put_log_one_transaction);
    tcase_add_test(tc, test_first_run_parse_failure_then_recovery);
    suite_add_tcase(s, tc);
}
