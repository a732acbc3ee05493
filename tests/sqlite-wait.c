/* sqlite-wait.c — the wait hooks of convo_store_opts version 3 on the SQLite
 * driver: called around each sleep of a busy wait (the lock of another
 * connection), of the switch to WAL at open, and not at all without a wait;
 * without hooks the busy timeout and its error are as before.
 * `tests/sqlite_wait DIR` works in DIR. */
#include <check.h>
#include <convo.h>
#include <sqlite3.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *dir;

/* A fresh file name in dir; the file and its -wal/-shm do not exist. */
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

/* What the hooks saw; the hooks take no argument, so it is global. */
static struct {
    pthread_mutex_t lock;
    int enters, leaves, bad_token, nested, inside;
    int release_after; /* > 0: the enter of that number commits `holder` */
    sqlite3 *holder;
} seen = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0, 0, 0, NULL};
static int token;

static void *enter(void)
{
    pthread_mutex_lock(&seen.lock);
    seen.nested += seen.inside;
    seen.inside = 1;
    int n = ++seen.enters;
    pthread_mutex_unlock(&seen.lock);
    if (n == seen.release_after)
        ck_assert_int_eq(sqlite3_exec(seen.holder, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    return &token;
}

static void leave(void *entered)
{
    pthread_mutex_lock(&seen.lock);
    seen.leaves++;
    seen.inside = 0;
    seen.bad_token += entered != &token;
    pthread_mutex_unlock(&seen.lock);
}

static void seen_reset(sqlite3 *holder, int release_after)
{
    seen.enters = seen.leaves = seen.bad_token = seen.nested = seen.inside = 0;
    seen.holder = holder;
    seen.release_after = release_after;
}

static convo_store *open_store(const char *path, const char *params, int hooks)
{
    char url[700];
    snprintf(url, sizeof url, "sqlite:%s?%s", path, params);
    convo_store_opts opts = CONVO_STORE_OPTS_INIT;
    if (hooks) {
        opts.wait_enter = enter;
        opts.wait_leave = leave;
    }
    convo_store *s = NULL;
    convo_error err;
    int rc = convo_open_ex(&s, url, &opts, &err);
    ck_assert_msg(rc == 0, "open %s: %d %s", url, rc, err.message);
    return s;
}

/* Another connection holding the write lock of path. */
static sqlite3 *hold_write_lock(const char *path)
{
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    ck_assert_int_eq(sqlite3_exec(db, "BEGIN IMMEDIATE", NULL, NULL, NULL), SQLITE_OK);
    return db;
}

static int append_one(convo_store *s, convo_error *err)
{
    const char *msg = "{\"role\":\"user\",\"content\":\"hi\"}";
    return convo_append(s, "t", &msg, NULL, 1, NULL, NULL, err);
}

/* a busy wait ended by the lock's release: one enter and one leave per sleep */
START_TEST(test_busy_wait_hooks)
{
    const char *path = db_path("busy");
    convo_store *s = open_store(path, "busy_timeout=600000", 1);
    convo_error err;
    ck_assert_int_eq(append_one(s, &err), 0);
    sqlite3 *holder = hold_write_lock(path);
    seen_reset(holder, 3); /* the third sleep's enter releases the lock */
    int rc = append_one(s, &err);
    ck_assert_msg(rc == 0, "append: %d %s", rc, err.message);
    ck_assert_int_eq(seen.enters, 3);
    ck_assert_int_eq(seen.leaves, 3);
    ck_assert_int_eq(seen.bad_token, 0);
    ck_assert_int_eq(seen.nested, 0);
    /* no lock, no wait, no hook */
    seen_reset(NULL, 0);
    ck_assert_int_eq(append_one(s, &err), 0);
    convo_history *h;
    ck_assert_int_eq(convo_load(s, "t", NULL, &h, &err), 0);
    ck_assert_int_eq(convo_history_length(h), 3);
    convo_history_free(h);
    ck_assert_int_eq(seen.enters, 0);
    sqlite3_close(holder);
    convo_close(s);
}
END_TEST

/* the busy timeout's end and error are the same with hooks and without */
START_TEST(test_busy_timeout_with_and_without_hooks)
{
    const char *path = db_path("timeout");
    for (int hooks = 1; hooks >= 0; hooks--) {
        convo_store *s = open_store(path, "busy_timeout=150", hooks);
        sqlite3 *holder = hold_write_lock(path);
        seen_reset(holder, 0);
        convo_error err;
        ck_assert_int_eq(append_one(s, &err), CONVO_ETIMEOUT);
        ck_assert_msg(strstr(err.message, "still locked after 150 ms") != NULL, "%s",
                      err.message);
        /* sqlite3_busy_timeout's schedule: 1 2 5 10 15 20 25 25 25 22 ms */
        ck_assert_int_eq(seen.enters, (hooks ? 10 : 0));
        ck_assert_int_eq(seen.leaves, seen.enters);
        ck_assert_int_eq(sqlite3_exec(holder, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
        ck_assert_int_eq(append_one(s, &err), 0);
        sqlite3_close(holder);
        convo_close(s);
    }
}
END_TEST

/* busy_timeout=0: no wait at all, as sqlite3_busy_timeout(db, 0) */
START_TEST(test_busy_timeout_zero)
{
    const char *path = db_path("zero");
    convo_store *s = open_store(path, "busy_timeout=0", 1);
    sqlite3 *holder = hold_write_lock(path);
    seen_reset(holder, 0);
    convo_error err;
    ck_assert_int_eq(append_one(s, &err), CONVO_ETIMEOUT);
    ck_assert_int_eq(seen.enters, 0);
    sqlite3_close(holder);
    convo_close(s);
}
END_TEST

/* a new file locked by another connection before it is in WAL mode: the open
 * retries the switch, each sleep between the hooks */
START_TEST(test_wal_switch_hooks)
{
    const char *path = db_path("wal");
    sqlite3 *holder = hold_write_lock(path); /* an empty file, not in WAL mode, locked */
    seen_reset(holder, 2);
    convo_store *s = open_store(path, "busy_timeout=600000", 1);
    ck_assert_int_eq(seen.enters, 2);
    ck_assert_int_eq(seen.leaves, 2);
    ck_assert_int_eq(seen.nested, 0);
    convo_error err;
    ck_assert_int_eq(append_one(s, &err), 0);
    sqlite3_close(holder);
    convo_close(s);
}
END_TEST

/* one hook without the other is refused */
START_TEST(test_hooks_paired)
{
    convo_store_opts opts = CONVO_STORE_OPTS_INIT;
    opts.wait_enter = enter;
    convo_store *s = NULL;
    convo_error err;
    ck_assert_int_eq(convo_open_ex(&s, "memory:", &opts, &err), CONVO_EINVAL);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(err.message, "wait_enter and wait_leave") != NULL, "%s", err.message);
    opts.wait_enter = NULL;
    opts.wait_leave = leave;
    ck_assert_int_eq(convo_open_ex(&s, "memory:", &opts, &err), CONVO_EINVAL);
    /* a version 2 caller's struct has no hooks: what follows it is not read */
    opts.version = 2;
    ck_assert_int_eq(convo_open_ex(&s, "memory:", &opts, &err), 0);
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
    Suite *suite = suite_create("sqlite-wait");
    TCase *tc = tcase_create("sqlite-wait");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_busy_wait_hooks);
    tcase_add_test(tc, test_busy_timeout_with_and_without_hooks);
    tcase_add_test(tc, test_busy_timeout_zero);
    tcase_add_test(tc, test_wal_switch_hooks);
    tcase_add_test(tc, test_hooks_paired);
    suite_add_tcase(suite, tc);
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
