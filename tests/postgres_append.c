/* postgres_append.c — which statement the PostgreSQL driver's append runs:
 * append_plain.sql for the common call (one message, no expected length or
 * generation, a store without ttl), append_one.sql / append_many.sql for the
 * rest, and what the plain one must hand on to @S.append() (a thread with a
 * deadline: cleared, or started afresh when it has passed). */
#include "postgres.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The first line of the statement the store's one backend ran last (its
 * application_name is `app`): the .sql file's name, from its header comment. */
static char *last_statement(const char *app)
{
    PGconn *pg = admin();
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT split_part(query, ':', 1) FROM pg_stat_activity"
             " WHERE application_name = '%s' AND state = 'idle'", app);
    char *got = query1(pg, sql);
    PQfinish(pg);
    ck_assert_msg(got != NULL, "no idle backend of %s", app);
    return got;
}

static void assert_last_statement(const char *app, const char *want)
{
    char *got = last_statement(app);
    ck_assert_msg(strcmp(got, want) == 0, "%s ran '%s', want '%s'", app, got, want);
    free(got);
}

static convo_append_result append_with(convo_store *s, const char *thread, int64_t length,
                                       int64_t generation, size_t n)
{
    const char *msgs[2] = {msg1, msg1};
    convo_append_opts o = CONVO_APPEND_OPTS_INIT;
    o.expected_length = length;
    o.expected_generation = generation;
    convo_append_result r;
    convo_error err;
    int rc = convo_append(s, thread, msgs, NULL, n, &o, &r, &err);
    ck_assert_msg(rc == 0, "append: %d %s", rc, err.message);
    return r;
}

/* The plain statement for the call without conditions only: a condition, a
 * batch, a ttl or (v20) a message over the preview's cap each need the
 * statement that has it. */
START_TEST(test_plain_statement_for_the_plain_call_only)
{
    char app[64], more[128];
    snprintf(app, sizeof app, "pgx_plain_%08x", run_id);
    snprintf(more, sizeof more, "application_name=%s&pool=1", app);
    convo_store *s = open_ok(schema_url("plain", more));
    convo_error err;
    ck_assert_int_eq(append1(s, "t", &err), 0); /* creates it: plain, then @S.append() */
    assert_last_statement(app, "-- append.sql");
    ck_assert_int_eq(append_with(s, "t", -1, -1, 1).first_seq, 1);
    assert_last_statement(app, "-- append_plain.sql");
    ck_assert_int_eq(append_with(s, "t", 2, -1, 1).first_seq, 2);
    assert_last_statement(app, "-- append_one.sql");
    ck_assert_int_eq(append_with(s, "t", -1, 0, 1).first_seq, 3);
    assert_last_statement(app, "-- append_one.sql");
    ck_assert_int_eq(append_with(s, "t", -1, -1, 2).first_seq, 4);
    assert_last_statement(app, "-- append_many.sql");
    ck_assert_int_eq(append_with(s, "t", -1, -1, 1).first_seq, 6);
    assert_last_statement(app, "-- append_plain.sql");
    ck_assert_int_eq(length_of(s, "t"), 7);
    /* (v20) a message over the preview's cap: the statement that applies it */
    char big[1200];
    snprintf(big, sizeof big, "{\"role\":\"user\",\"content\":\"%01100d\"}", 7);
    const char *msgs[1] = {big};
    convo_append_result r;
    ck_assert_int_eq(convo_append(s, "t", msgs, NULL, 1, NULL, &r, &err), 0);
    assert_last_statement(app, "-- append_one.sql");
    msgs[0] = msg1;
    ck_assert_int_eq(convo_append(s, "t", msgs, NULL, 1, NULL, &r, &err), 0);
    assert_last_statement(app, "-- append_plain.sql");
    convo_close(s);

    snprintf(more, sizeof more, "application_name=%s&pool=1&ttl=100", app);
    convo_store *t = open_ok(schema_url("plain", more));
    ck_assert_int_eq(append_with(t, "t", -1, -1, 1).first_seq, 9);
    assert_last_statement(app, "-- append_one.sql");
    convo_close(t);
    drop_schema("plain");
}
END_TEST

static long deadline_set(PGconn *pg, const char *thread)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM \"%s\".threads WHERE thread_id = '%s'"
             " AND expires_at IS NOT NULL", schema_name("plain_ttl"), thread);
    return query_long(pg, sql);
}

/* A store without ttl appending to a thread a ttl store gave a deadline: the
 * plain statement leaves such a thread to @S.append(), which clears a deadline
 * still to come (the thread then never expires, as append_one.sql did) and
 * starts afresh a thread whose deadline has passed. */
START_TEST(test_plain_call_on_a_thread_with_a_deadline)
{
    convo_store *t = open_ok(schema_url("plain_ttl", "ttl=100"));
    convo_error err;
    ck_assert_int_eq(append1(t, "live", &err), 0);
    ck_assert_int_eq(append1(t, "live", &err), 0);
    ck_assert_int_eq(append1(t, "gone", &err), 0);
    ck_assert_int_eq(append1(t, "gone", &err), 0);
    convo_close(t);
    PGconn *pg = admin();
    ck_assert_int_eq(deadline_set(pg, "live"), 1);
    char sql[256];
    snprintf(sql, sizeof sql,
             "UPDATE \"%s\".threads SET expires_at = now() - interval '1 s'"
             " WHERE thread_id = 'gone'", schema_name("plain_ttl"));
    free(query1(pg, sql));

    convo_store *s = open_ok(schema_url("plain_ttl", NULL));
    ck_assert_int_eq(append_with(s, "live", -1, -1, 1).first_seq, 2);
    ck_assert_int_eq(deadline_set(pg, "live"), 0);
    ck_assert_int_eq(length_of(s, "live"), 3);
    ck_assert_int_eq(append_with(s, "gone", -1, -1, 1).first_seq, 0);
    ck_assert_int_eq(deadline_set(pg, "gone"), 0);
    ck_assert_int_eq(length_of(s, "gone"), 1);
    ck_assert_int_eq(append_with(s, "gone", -1, -1, 1).first_seq, 1);
    PQfinish(pg);
    convo_close(s);
    drop_schema("plain_ttl");
}
END_TEST

void postgres_add_append_tests(Suite *s)
{
    TCase *tc = tcase_create("append");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_plain_statement_for_the_plain_call_only);
    tcase_add_test(tc, test_plain_call_on_a_thread_with_a_deadline);
    suite_add_tcase(s, tc);
}
