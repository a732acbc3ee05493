/* sqlite-wait.c — the wait hooks of convo_store_opts version 3 on the SQLite
 * driver: called around each sleep of a busy wait (the lock of another
 * connection), of the switch to WAL at open, and not at all without a wait;
 * without hooks the busy timeout and its error are as before; convo_copy's
 * exporting thread runs none, and the copying thread's wait for it is hooked.
 * `tests/sqlite_wait DIR` works in DIR. */
#include "sqlite_layout.h"
#include <pthread.h>
#include <semaphore.h>
#include <string.h>

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

/* ---- convo_copy: its export runs in a thread of libconvo's ---- */

/* An interpreter's global lock, as Python's GIL with ctypes.PyDLL: held by a
 * thread during its calls, given up by the hooks. An error-checking mutex, so
 * a hook run in a thread that does not hold it (libconvo's own) is seen. */
static pthread_mutex_t gil;
static int gil_foreign; /* enters in a thread that did not hold the lock */

static void *gil_give_up(void)
{
    if (pthread_mutex_unlock(&gil) != 0) {
        __atomic_add_fetch(&gil_foreign, 1, __ATOMIC_SEQ_CST);
        return NULL;
    }
    return &token;
}

static void gil_take(void *entered)
{
    if (entered)
        pthread_mutex_lock(&gil);
}

static convo_store *open_gil_store(const char *path, const char *params)
{
    char url[700];
    snprintf(url, sizeof url, "sqlite:%s?%s", path, params);
    convo_store_opts opts = CONVO_STORE_OPTS_INIT;
    opts.wait_enter = gil_give_up;
    opts.wait_leave = gil_take;
    convo_store *s = NULL;
    convo_error err;
    int rc = convo_open_ex(&s, url, &opts, &err);
    ck_assert_msg(rc == 0, "open %s: %d %s", url, rc, err.message);
    return s;
}

/* A thread in a call on the copy's source, in a busy wait (holding the
 * source's only connection): its enter gives the lock up, its leave waits for
 * it. Its first enter tells the test. */
static struct {
    pthread_t thread;
    convo_store *src;
    sem_t waiting;
    int posted, rc;
} holder;

static void *gil_give_up_holder(void)
{
    void *entered = gil_give_up();
    if (pthread_equal(pthread_self(), holder.thread) && !holder.posted++)
        sem_post(&holder.waiting);
    return entered;
}

static void *holder_run(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&gil);
    convo_error err;
    holder.rc = append_one(holder.src, &err);
    pthread_mutex_unlock(&gil);
    return NULL;
}

/* A copy from a store (pool=1) whose only connection another thread holds in
 * a busy wait, that thread waiting in its leave hook for the lock the copying
 * thread keeps: convo_copy's exporting thread waits for that connection
 * without running the hooks (they are the calling thread's), and the calling
 * thread's wait for the export is between the destination's hooks, so the
 * other thread gets the lock, ends its call and gives the connection back.
 * Before, the exporting thread ran the hooks and the copy never ended. */
START_TEST(test_copy_waits_in_the_calling_thread)
{
    pthread_mutexattr_t attr;
    pthread_mutexattr_init(&attr);
    pthread_mutexattr_settype(&attr, PTHREAD_MUTEX_ERRORCHECK);
    pthread_mutex_init(&gil, &attr);
    pthread_mutexattr_destroy(&attr);
    gil_foreign = 0;
    char path[512], url[700];
    snprintf(path, sizeof path, "%s", db_path("copy-src")); /* db_path's buffer is reused */
    snprintf(url, sizeof url, "sqlite:%s?pool=1&busy_timeout=600000", path);
    convo_store_opts opts = CONVO_STORE_OPTS_INIT;
    opts.wait_enter = gil_give_up_holder;
    opts.wait_leave = gil_take;
    convo_error err;
    pthread_mutex_lock(&gil);
    convo_store *src = NULL;
    ck_assert_int_eq(convo_open_ex(&src, url, &opts, &err), 0);
    convo_store *dst = open_gil_store(db_path("copy-dst"), "");
    ck_assert_int_eq(append_one(src, &err), 0);
    sqlite3 *lock = hold_write_lock(path);
    holder.src = src, holder.posted = 0, holder.rc = -1;
    sem_init(&holder.waiting, 0, 0);
    ck_assert_int_eq(pthread_create(&holder.thread, NULL, holder_run, NULL), 0);
    pthread_mutex_unlock(&gil);
    sem_wait(&holder.waiting); /* in its busy wait, holding src's only connection */
    pthread_mutex_lock(&gil);  /* its leave now waits for this thread */
    ck_assert_int_eq(sqlite3_exec(lock, "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    convo_dump_stats stats;
    int rc = convo_copy(src, dst, NULL, 0, NULL, &stats, &err);
    ck_assert_msg(rc == 0, "copy: %d %s", rc, err.message);
    pthread_mutex_unlock(&gil);
    pthread_join(holder.thread, NULL);
    ck_assert_int_eq(holder.rc, 0);
    ck_assert_int_eq(gil_foreign, 0);
    /* the copy saw the first message, and the second when it came first */
    ck_assert_uint_ge(stats.messages, 1);
    sqlite3_close(lock);
    convo_close(src);
    convo_close(dst);
    sem_destroy(&holder.waiting);
    pthread_mutex_destroy(&gil);
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
    tcase_add_test(tc, test_copy_waits_in_the_calling_thread);
    suite_add_tcase(suite, tc);
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
