/* postgres_races.c — an append racing the writers that remove messages (a pop,
 * a tail rewrite, a delete) from another connection, appenders in several
 * processes on one thread, and an appender killed mid-write: no message lost
 * or duplicated, no gap, and the thread row's length, preview and activity
 * time those of the log. Written as the gate for an append that does not
 * write the thread row (docs/postgres.md Costs): each race is made certain by
 * a row the test inserts and holds uncommitted at the seq the append takes,
 * so the append waits there, after it has read the thread, while the other
 * writer runs. Part of tests/postgres_extra (postgres.h). */
#include "postgres.h"
#include <check.h>
#include <convo.h>
#include <libpq-fe.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* A message whose content names who wrote it. */
static void message_of(char *buf, size_t size, const char *who, long i)
{
    snprintf(buf, size, "{\"role\":\"user\",\"content\":\"%s-%ld\"}", who, i);
}

static int64_t append_text(convo_store *s, const char *thread, const char *text)
{
    convo_append_result res;
    convo_error err;
    int rc = convo_append(s, thread, &text, NULL, 1, NULL, &res, &err);
    ck_assert_msg(rc == 0, "append: %s", err.message);
    return res.first_seq;
}

/* Checks the thread is dense and that the thread index's row agrees with the
 * log: length, last message, and updated_at at or after the last message's
 * time; returns the loaded history (the caller frees it), NULL when the
 * thread does not exist. */
static convo_history *check_thread(convo_store *s, const char *thread)
{
    convo_history *h;
    convo_error err;
    int rc = convo_load(s, thread, NULL, &h, &err);
    if (rc == CONVO_ENOTFOUND)
        return NULL;
    ck_assert_msg(rc == 0, "load: %s", err.message);
    size_t n = convo_history_count(h);
    ck_assert_int_eq((int64_t)n, convo_history_length(h));
    for (size_t i = 0; i < n; i++)
        ck_assert_int_eq(convo_history_seq(h, i), (int64_t)i);
    convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
    o.with_last_message = 1;
    o.order = CONVO_ORDER_ID;
    convo_thread_page *p;
    ck_assert_int_eq(convo_thread_list_ex(s, &o, &p, &err), 0);
    size_t row = convo_thread_page_count(p);
    for (size_t i = 0; i < convo_thread_page_count(p); i++)
        if (strcmp(convo_thread_page_id(p, i), thread) == 0)
            row = i;
    ck_assert_msg(row < convo_thread_page_count(p), "%s not listed", thread);
    ck_assert_int_eq(convo_thread_page_length(p, row), (int64_t)n);
    size_t len;
    const char *last = convo_thread_page_last_message(p, row, &len);
    if (n == 0) {
        ck_assert_ptr_null(last);
    } else {
        size_t want;
        const char *m = convo_history_message(h, n - 1, &want);
        ck_assert_msg(last && len == want && memcmp(last, m, len) == 0,
                      "%s: the preview is not the last message", thread);
        ck_assert_int_ge(convo_thread_page_updated_at(p, row),
                         convo_history_created_at(h, n - 1));
    }
    convo_thread_page_free(p);
    return h;
}

static int has_message(const convo_history *h, const char *text)
{
    for (size_t i = 0; h && i < convo_history_count(h); i++)
        if (strcmp(convo_history_message(h, i, NULL), text) == 0)
            return 1;
    return 0;
}

/* ------------------------------------------------ one append held at its seq */

typedef struct racer {
    convo_store *s;
    const char *thread, *text;
    int64_t keep;    /* the other writer: a tail rewrite keeping this many */
    const char *put; /* and storing this message after them (NULL: a pop) */
    int delete;      /* or a delete */
    int64_t seq;     /* out: the append's seq */
    convo_rewrite_result rewrite;
    int rc;
    volatile int done;
} racer;

static void *run_append(void *arg)
{
    racer *r = arg;
    convo_append_result res;
    r->rc = convo_append(r->s, r->thread, &r->text, NULL, 1, NULL, &res, NULL);
    r->seq = res.first_seq;
    r->done = 1;
    return NULL;
}

static void *run_other(void *arg)
{
    racer *r = arg;
    if (r->delete)
        r->rc = convo_thread_delete(r->s, r->thread, NULL);
    else
        r->rc = convo_replace_tail(r->s, r->thread, r->keep, r->put ? &r->put : NULL, NULL,
                                   r->put ? 1 : 0, NULL, &r->rewrite, NULL);
    r->done = 1;
    return NULL;
}

/* Until the session of application app waits for a lock or *done is set. */
static void wait_lock_or_done(PGconn *pg, const char *app, volatile int *done)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM pg_stat_activity WHERE application_name = '%s'"
             " AND wait_event_type = 'Lock'", app);
    for (int i = 0; i < 200 && !*done && query_long(pg, sql) == 0; i++)
        usleep(25 * 1000);
}

/* Thread "t" of three messages, appended by store a (so that a driver that
 * remembers its last append knows this thread); a row held uncommitted at seq
 * 3 makes a's next append wait there; store b then pops, rewrites or deletes
 * (other); the row is rolled back and both finish. */
static void race(const char *name, racer *other, racer *mine, convo_history **out)
{
    char app_a[64], app_b[64], more[96];
    snprintf(app_a, sizeof app_a, "pgx_%s_a_%08x", name, run_id);
    snprintf(app_b, sizeof app_b, "pgx_%s_b_%08x", name, run_id);
    snprintf(more, sizeof more, "application_name=%s", app_a);
    convo_store *a = open_ok(schema_url(name, more));
    snprintf(more, sizeof more, "application_name=%s", app_b);
    convo_store *b = open_ok(schema_url(name, more));
    char text[64];
    for (long i = 0; i < 3; i++) {
        message_of(text, sizeof text, "first", i);
        ck_assert_int_eq(append_text(a, "t", text), i);
    }
    PGconn *hold = admin(), *watch = admin();
    char sql[512];
    snprintf(sql, sizeof sql,
             "BEGIN; INSERT INTO \"%s\".messages (tid, seq, created_at, role, body) "
             "SELECT tid, 3, now(), 'user', '\\x7b7d' FROM \"%s\".threads "
             "WHERE thread_id = 't'", schema_name(name), schema_name(name));
    PGresult *r = PQexec(hold, sql);
    ck_assert_int_eq(PQresultStatus(r), PGRES_COMMAND_OK);
    PQclear(r);
    *mine = (racer){.s = a, .thread = "t", .text = "{\"role\":\"user\",\"content\":\"racer\"}"};
    other->s = b;
    other->thread = "t";
    pthread_t ta, tb;
    pthread_create(&ta, NULL, run_append, mine);
    wait_lock_or_done(watch, app_a, &mine->done);
    ck_assert_msg(!mine->done, "the append did not wait for the held row");
    pthread_create(&tb, NULL, run_other, other);
    wait_lock_or_done(watch, app_b, &other->done);
    r = PQexec(hold, "ROLLBACK");
    PQclear(r);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    ck_assert_int_eq(mine->rc, 0);
    ck_assert_int_eq(other->rc, 0);
    *out = check_thread(a, "t");
    convo_history *hb = check_thread(b, "t"); /* the other connection sees the same */
    ck_assert_int_eq(hb ? convo_history_length(hb) : -1,
                     *out ? convo_history_length(*out) : -1);
    convo_history_free(hb);
    /* a's next append goes after whatever is there now */
    int64_t n = *out ? convo_history_length(*out) : 0;
    ck_assert_int_eq(append_text(a, "t", "{\"role\":\"user\",\"content\":\"after\"}"), n);
    convo_history *h = check_thread(b, "t");
    ck_assert_int_eq(convo_history_length(h), n + 1);
    convo_history_free(h);
    PQfinish(hold);
    PQfinish(watch);
    convo_close(a);
    convo_close(b);
}

/* A pop of the last message from another connection while an append waits at
 * seq 3: either the append came first (seq 3, and the pop, keeping 2, took
 * it too) or the pop did (the append at seq 2). Never the append at 3 behind
 * a hole at 2. */
START_TEST(test_pop_racing_an_append)
{
    racer pop = {.keep = 2}, mine;
    convo_history *h;
    race("rpop", &pop, &mine, &h);
    ck_assert_ptr_nonnull(h);
    if (mine.seq == 3) {
        ck_assert_int_eq(pop.rewrite.removed, 2);
        ck_assert_int_eq(convo_history_length(h), 2);
        ck_assert(!has_message(h, mine.text));
    } else {
        ck_assert_int_eq(mine.seq, 2);
        ck_assert_int_eq(pop.rewrite.removed, 1);
        ck_assert_int_eq(convo_history_length(h), 3);
        ck_assert_str_eq(convo_history_message(h, 2, NULL), mine.text);
    }
    convo_history_free(h);
    drop_schema("rpop");
}
END_TEST

/* A rewrite keeping 1 and storing one new message while the append waits at
 * seq 3: the append after it (seq 2) or before it (seq 3, removed by it). */
START_TEST(test_rewrite_racing_an_append)
{
    racer rw = {.keep = 1, .put = "{\"role\":\"assistant\",\"content\":\"new\"}"}, mine;
    convo_history *h;
    race("rrew", &rw, &mine, &h);
    ck_assert_ptr_nonnull(h);
    ck_assert_str_eq(convo_history_message(h, 1, NULL), rw.put);
    if (mine.seq == 3) {
        ck_assert_int_eq(rw.rewrite.removed, 3);
        ck_assert_int_eq(convo_history_length(h), 2);
    } else {
        ck_assert_int_eq(mine.seq, 2);
        ck_assert_int_eq(rw.rewrite.removed, 2);
        ck_assert_int_eq(convo_history_length(h), 3);
        ck_assert_str_eq(convo_history_message(h, 2, NULL), mine.text);
    }
    convo_history_free(h);
    drop_schema("rrew");
}
END_TEST

/* A delete while the append waits at seq 3: the append before it (seq 3,
 * deleted with the thread, which is gone) or after it (seq 0 of a new thread
 * holding that message only). */
START_TEST(test_delete_racing_an_append)
{
    racer del = {.delete = 1}, mine;
    convo_history *h;
    race("rdel", &del, &mine, &h);
    if (mine.seq == 3) {
        ck_assert_ptr_null(h);
    } else {
        ck_assert_int_eq(mine.seq, 0);
        ck_assert_ptr_nonnull(h);
        ck_assert_int_eq(convo_history_length(h), 1);
        ck_assert_str_eq(convo_history_message(h, 0, NULL), mine.text);
    }
    convo_history_free(h);
    drop_schema("rdel");
}
END_TEST

/* ------------------------------------------ appenders in several processes */

enum { PROCS = 3, EACH = 150 };

/* Child: appends EACH messages to "t" (within the same seconds as the others,
 * so that appends are mostly inside their thread's listed_at window), writing
 * each seq it was given to fd; with pops set, pops its last message every 10th
 * append (keeping the length it saw). */
static int appender(const char *url, int id, int fd, int pops)
{
    convo_store *s = NULL;
    if (convo_open(&s, url, NULL) != 0)
        return 1;
    char who[16], text[64];
    snprintf(who, sizeof who, "p%d", id);
    int ok = 1;
    for (long i = 0; ok && i < EACH; i++) {
        message_of(text, sizeof text, who, i);
        const char *m = text;
        convo_append_result res;
        ok = convo_append(s, "t", &m, NULL, 1, NULL, &res, NULL) == 0;
        long line[3] = {id, i, (long)res.first_seq};
        if (pops && i % 10 == 9) {
            /* take back the message just appended, if it is still the last */
            convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
            o.expected_length = res.first_seq + 1;
            convo_rewrite_result rw;
            int rc = convo_replace_tail(s, "t", res.first_seq, NULL, NULL, 0, &o, &rw, NULL);
            ok = ok && (rc == 0 || rc == CONVO_ECONFLICT);
            if (rc == 0)
                line[2] = -1; /* popped */
        }
        ok = ok && write(fd, line, sizeof line) == (ssize_t)sizeof line;
    }
    convo_close(s);
    return ok ? 0 : 1;
}

static void run_appenders(const char *name, int pops)
{
    const char *url = schema_url(name, NULL);
    convo_store *s = open_ok(url);
    ck_assert_int_eq(append1(s, "t", NULL), 0);
    convo_close(s); /* a child must not inherit its connection */
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pids[PROCS];
    for (int i = 0; i < PROCS; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            close(fds[0]);
            _exit(appender(url, i, fds[1], pops));
        }
    }
    close(fds[1]);
    static long seq_of[PROCS][EACH];
    long line[3];
    while (read(fds[0], line, sizeof line) == (ssize_t)sizeof line)
        seq_of[line[0]][line[1]] = line[2];
    close(fds[0]);
    for (int i = 0; i < PROCS; i++) {
        int status;
        waitpid(pids[i], &status, 0);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "appender %d failed", i);
    }
    s = open_ok(url);
    convo_history *h = check_thread(s, "t");
    long kept = 0;
    for (int p = 0; p < PROCS; p++) {
        char who[16], text[96];
        snprintf(who, sizeof who, "p%d", p);
        for (long i = 0; i < EACH; i++) {
            message_of(text, sizeof text, who, i);
            int found = 0;
            for (size_t k = 0; k < convo_history_count(h); k++)
                if (strcmp(convo_history_message(h, k, NULL), text) == 0) {
                    found++;
                    ck_assert_int_eq((long)k, seq_of[p][i]); /* a pop moves none */
                }
            ck_assert_msg(found <= 1, "%s stored %d times", text, found);
            ck_assert_msg(found == (seq_of[p][i] >= 0), "%s: %d stored, seq %ld", text, found,
                          seq_of[p][i]);
            kept += found;
        }
    }
    ck_assert_int_eq(convo_history_length(h), kept + 1);
    convo_history_free(h);
    convo_close(s);
    drop_schema(name);
}

/* Three processes appending to one thread: each message once, at the seq its
 * append returned, dense, the row's length and preview those of the log. */
START_TEST(test_processes_append_to_one_thread)
{
    run_appenders("rprocs", 0);
}
END_TEST

/* The same with each process popping its own last message every tenth
 * append when it is still the last (expected length): a popped message is
 * gone, every other one is there once. */
START_TEST(test_processes_append_and_pop)
{
    run_appenders("rpops", 1);
}
END_TEST

/* ---------------------------------------------------- a crash between */

/* An appender killed (SIGKILL) in the middle of a run of appends, then
 * another process appending: no gap, every message the killed one was told
 * about is there, at its seq, and the row agrees with the log. */
START_TEST(test_appender_killed_midway)
{
    const char *url = schema_url("rkill", NULL);
    convo_store *s = open_ok(url);
    ck_assert_int_eq(append1(s, "t", NULL), 0);
    convo_close(s); /* a child must not inherit its connection */
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        convo_store *c = NULL;
        if (convo_open(&c, url, NULL) != 0)
            _exit(1);
        char text[64];
        for (long i = 0;; i++) {
            message_of(text, sizeof text, "killed", i);
            const char *m = text;
            convo_append_result res;
            if (convo_append(c, "t", &m, NULL, 1, NULL, &res, NULL) != 0)
                _exit(1);
            long line[2] = {i, (long)res.first_seq};
            if (write(fds[1], line, sizeof line) != (ssize_t)sizeof line)
                _exit(1);
        }
    }
    close(fds[1]);
    long told[4096], n = 0, line[2];
    while (n < 300 && read(fds[0], line, sizeof line) == (ssize_t)sizeof line)
        told[n++] = line[1];
    kill(pid, SIGKILL);
    while (n < 4096 && read(fds[0], line, sizeof line) == (ssize_t)sizeof line)
        told[n++] = line[1];
    close(fds[0]);
    waitpid(pid, NULL, 0);
    s = open_ok(url);
    char text[64];
    for (long i = 0; i < 20; i++) {
        message_of(text, sizeof text, "after", i);
        append_text(s, "t", text);
    }
    convo_history *h = check_thread(s, "t");
    for (long i = 0; i < n; i++) {
        message_of(text, sizeof text, "killed", i);
        ck_assert_int_lt(told[i], convo_history_length(h));
        ck_assert_str_eq(convo_history_message(h, (size_t)told[i], NULL), text);
    }
    int64_t len = convo_history_length(h);
    ck_assert_int_le(len, 1 + n + 1 + 20); /* at most the one not yet told about */
    message_of(text, sizeof text, "after", 19);
    ck_assert_str_eq(convo_history_message(h, (size_t)len - 1, NULL), text);
    convo_history_free(h);
    convo_close(s);
    drop_schema("rkill");
}
END_TEST

/* ----------------------------------------------- activity to the second */

/* Threads appended to in turn within and across seconds, by one store and by
 * another: the activity order is the order of their last appends, and each
 * row's updated_at is its last message's time. */
START_TEST(test_activity_order_follows_the_last_append)
{
    convo_store *a = open_ok(schema_url("ract", NULL)), *b = open_ok(schema_url("ract", NULL));
    const char *order[] = {"x", "y", "x", "z", "y", "x", "z", "y", "y", "z"};
    char text[64];
    for (size_t i = 0; i < sizeof order / sizeof *order; i++) {
        message_of(text, sizeof text, order[i], (long)i);
        append_text(i % 3 == 2 ? b : a, order[i], text);
        if (i == 4)
            usleep(1100 * 1000); /* the next ones in another second */
    }
    convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
    convo_thread_page *p;
    ck_assert_int_eq(convo_thread_list_ex(b, &o, &p, NULL), 0);
    ck_assert_int_eq(convo_thread_page_count(p), 3);
    ck_assert_str_eq(convo_thread_page_id(p, 0), "z");
    ck_assert_str_eq(convo_thread_page_id(p, 1), "y");
    ck_assert_str_eq(convo_thread_page_id(p, 2), "x");
    for (size_t i = 0; i < 3; i++) {
        convo_history *h = check_thread(a, convo_thread_page_id(p, i));
        size_t n = convo_history_count(h);
        ck_assert_int_eq(convo_thread_page_updated_at(p, i), convo_history_created_at(h, n - 1));
        convo_history_free(h);
    }
    convo_thread_page_free(p);
    convo_close(a);
    convo_close(b);
    drop_schema("ract");
}
END_TEST

void postgres_add_race_tests(Suite *s)
{
    TCase *tc = tcase_create("races");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_pop_racing_an_append);
    tcase_add_test(tc, test_rewrite_racing_an_append);
    tcase_add_test(tc, test_delete_racing_an_append);
    tcase_add_test(tc, test_processes_append_to_one_thread);
    tcase_add_test(tc, test_processes_append_and_pop);
    tcase_add_test(tc, test_appender_killed_midway);
    tcase_add_test(tc, test_activity_order_follows_the_last_append);
    suite_add_tcase(s, tc);
}
