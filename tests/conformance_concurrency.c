/* conformance_concurrency.c — the conformance suite's concurrent writers: threads
 * sharing a store or each with its own, and separate processes, appending,
 * merging extra, forking and retrying on one thread; nothing lost or doubled. */
#include "conformance.h"
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define WRITERS 8
#define BATCHES 50
#define PER_BATCH 3

/* One thread of a concurrent test. Either every worker shares one store, or
 * (own = 1) each opens its own, as separate processes would. */
typedef struct worker {
    convo_store *shared;
    int own;
    const char *tid;
    int id;
    pthread_barrier_t *barrier;
    int rc;
    char msg[300];
    int64_t firsts[BATCHES];
    size_t counts[BATCHES];
    int replayed[BATCHES];
    int count; /* test-specific tally */
} worker;

static int worker_fail(worker *w, int rc, const convo_error *err, const char *what)
{
    w->rc = rc;
    snprintf(w->msg, sizeof w->msg, "worker %d: %s: %d (%s): %s", w->id, what, rc,
             convo_strerror(rc), err ? err->message : "");
    return rc;
}

/* The worker's store, after waiting at the barrier; NULL on failure. */
static convo_store *worker_begin(worker *w)
{
    convo_store *s = w->shared;
    convo_error err;
    int rc = 0;
    if (w->own)
        rc = convo_open(&s, conf_url, &err);
    pthread_barrier_wait(w->barrier);
    if (rc != 0) {
        worker_fail(w, rc, &err, "open");
        return NULL;
    }
    return s;
}

static void worker_end(worker *w, convo_store *s)
{
    if (w->own)
        convo_close(s);
}

/* Runs fn on n workers at once and asserts none reported an error. */
static void run_workers(int n, void *(*fn)(void *), worker *ws, int own, const char *tid)
{
    pthread_barrier_t barrier;
    pthread_barrier_init(&barrier, NULL, (unsigned)n);
    pthread_t th[32];
    for (int i = 0; i < n; i++) {
        ws[i].shared = conf_store;
        ws[i].own = own;
        ws[i].tid = tid;
        ws[i].id = i;
        ws[i].barrier = &barrier;
        ws[i].rc = 0;
        ws[i].msg[0] = '\0';
        ck_assert_int_eq(pthread_create(&th[i], NULL, fn, &ws[i]), 0);
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&barrier);
    for (int i = 0; i < n; i++)
        ck_assert_msg(ws[i].rc == 0, "%s", ws[i].msg);
}

static int append_tagged(convo_store *s, const char *tid, int w, int b, int per,
                         int64_t *first, convo_error *err)
{
    char bufs[PER_BATCH][96];
    const char *msgs[PER_BATCH];
    for (int i = 0; i < per; i++) {
        snprintf(bufs[i], sizeof bufs[i], "{\"role\":\"user\",\"w\":%d,\"b\":%d,\"i\":%d}", w, b,
                 i);
        msgs[i] = bufs[i];
    }
    convo_append_result r;
    int rc = convo_append(s, tid, msgs, NULL, (size_t)per, NULL, &r, err);
    if (rc == 0 && first)
        *first = r.first_seq;
    return rc;
}

static void *append_worker(void *arg)
{
    worker *w = arg;
    convo_store *s = worker_begin(w);
    for (int b = 0; s && b < BATCHES; b++) {
        convo_error err;
        int rc = append_tagged(s, w->tid, w->id, b, PER_BATCH, &w->firsts[b], &err);
        if (rc != 0) {
            worker_fail(w, rc, &err, "append");
            break;
        }
    }
    if (s)
        worker_end(w, s);
    return NULL;
}

/* Every writer's batches are whole, in its order, and seq is dense; firsts
 * (may be NULL) are the seqs each append reported. */
static void verify_tagged(convo_store *s, const char *tid, int writers, int batches, int per,
                          int64_t firsts[][BATCHES])
{
    convo_history *h = conf_load(s, tid, NULL);
    size_t total = (size_t)(writers * batches * per);
    ck_assert_int_eq(convo_history_count(h), total);
    ck_assert_int_eq(convo_history_length(h), (int64_t)total);
    int next_b[32] = {0}, cur_w = -1, cur_b = -1;
    for (size_t k = 0; k < total; k++) {
        ck_assert_int_eq(convo_history_seq(h, k), (int64_t)k);
        json_t *m = conf_parse_json(convo_history_message(h, k, NULL));
        int w = -1, b = -1, i = -1;
        ck_assert_int_eq(json_unpack(m, "{s:i,s:i,s:i}", "w", &w, "b", &b, "i", &i), 0);
        json_decref(m);
        ck_assert_msg(w >= 0 && w < writers && i == (int)(k % (size_t)per),
                      "message %zu (w %d, b %d, i %d) breaks a batch", k, w, b, i);
        if (i == 0) {
            ck_assert_msg(b == next_b[w], "writer %d: batch %d stored where %d was due", w, b,
                          next_b[w]);
            next_b[w]++;
            if (firsts)
                ck_assert_msg(firsts[w][b] == (int64_t)k,
                              "writer %d batch %d reported seq %lld, stored at %zu", w, b,
                              (long long)firsts[w][b], k);
            cur_w = w;
            cur_b = b;
        } else {
            ck_assert_msg(w == cur_w && b == cur_b, "batch interleaved at message %zu", k);
        }
    }
    for (int w = 0; w < writers; w++)
        ck_assert_int_eq(next_b[w], batches);
    convo_history_free(h);
}

/* _i: 0 = one shared store, 1 = a store per thread */
START_TEST(test_concurrent_appends_threads)
{
    if (_i == 1)
        SKIP_IF_PRIVATE();
    char t[256];
    TID(t, _i ? "own" : "shared");
    worker ws[WRITERS];
    run_workers(WRITERS, append_worker, ws, _i, t);
    int64_t firsts[WRITERS][BATCHES];
    for (int w = 0; w < WRITERS; w++)
        memcpy(firsts[w], ws[w].firsts, sizeof firsts[w]);
    verify_tagged(conf_store, t, WRITERS, BATCHES, PER_BATCH, firsts);
}
END_TEST

static void *extra_worker(void *arg)
{
    worker *w = arg;
    convo_store *s = worker_begin(w);
    for (int j = 0; s && j < 20; j++) {
        char patch[128];
        snprintf(patch, sizeof patch, "{\"t%d_%d\":{\"w\":%d,\"j\":%d}}", w->id, j, w->id, j);
        convo_error err;
        int rc = convo_save_extra(s, w->tid, patch, &err);
        if (rc != 0) {
            worker_fail(w, rc, &err, "save_extra");
            break;
        }
    }
    if (s)
        worker_end(w, s);
    return NULL;
}

static void assert_extra_keys(convo_store *s, const char *tid, char tag, int writers, int keys)
{
    convo_history *h = conf_load(s, tid, NULL);
    json_t *e = conf_parse_json(convo_history_extra(h));
    for (int w = 0; w < writers; w++)
        for (int j = 0; j < keys; j++) {
            char k[32];
            snprintf(k, sizeof k, "%c%d_%d", tag, w, j);
            json_t *v = json_object_get(e, k);
            int gw = -1, gj = -1;
            ck_assert_msg(v && json_unpack(v, "{s:i,s:i}", "w", &gw, "j", &gj) == 0 &&
                              gw == w && gj == j,
                          "extra key %s lost or wrong", k);
        }
    json_decref(e);
    convo_history_free(h);
}

START_TEST(test_concurrent_extra_threads)
{
    if (_i == 1)
        SKIP_IF_PRIVATE();
    char t[256];
    TID(t, _i ? "own" : "shared");
    worker ws[WRITERS];
    run_workers(WRITERS, extra_worker, ws, _i, t);
    assert_extra_keys(conf_store, t, 't', WRITERS, 20);
}
END_TEST

/* Appends and extra merges on one new thread at the same time. */
static void *mixed_worker(void *arg)
{
    worker *w = arg;
    if (w->id % 2)
        return extra_worker(arg);
    convo_store *s = worker_begin(w);
    for (int b = 0; s && b < 25; b++) {
        convo_error err;
        int rc = append_tagged(s, w->tid, w->id / 2, b, 2, NULL, &err);
        if (rc != 0) {
            worker_fail(w, rc, &err, "append");
            break;
        }
    }
    if (s)
        worker_end(w, s);
    return NULL;
}

START_TEST(test_concurrent_mixed)
{
    if (_i == 1)
        SKIP_IF_PRIVATE();
    char t[256];
    TID(t, _i ? "own" : "shared");
    worker ws[WRITERS];
    run_workers(WRITERS, mixed_worker, ws, _i, t);
    verify_tagged(conf_store, t, WRITERS / 2, 25, 2, NULL);
    convo_history *h = conf_load(conf_store, t, NULL);
    json_t *e = conf_parse_json(convo_history_extra(h));
    ck_assert_int_eq(json_object_size(e), (WRITERS / 2) * 20);
    for (int w = 1; w < WRITERS; w += 2)
        for (int j = 0; j < 20; j++) {
            char k[32];
            snprintf(k, sizeof k, "t%d_%d", w, j);
            ck_assert_msg(json_object_get(e, k), "extra key %s lost", k);
        }
    json_decref(e);
    convo_history_free(h);
}
END_TEST

/* Optimistic concurrency: read the length, append expecting it, retry on conflict. */
static void *conditional_worker(void *arg)
{
    worker *w = arg;
    convo_store *s = worker_begin(w);
    convo_load_opts lo = CONVO_LOAD_OPTS_INIT;
    lo.limit = 1;
    lo.with_extra = 0;
    w->count = 0; /* conflicts seen */
    for (int got = 0, tries = 0; s && got < 10; tries++) {
        convo_error err;
        convo_history *h = NULL;
        if (tries > 100000) {
            worker_fail(w, CONVO_ERROR, NULL, "no progress");
            break;
        }
        int rc = convo_load(s, w->tid, &lo, &h, &err);
        if (rc != 0 && rc != CONVO_ENOTFOUND) {
            worker_fail(w, rc, &err, "load");
            break;
        }
        int64_t len = rc == 0 ? convo_history_length(h) : 0;
        convo_history_free(h);
        char m[96];
        snprintf(m, sizeof m, "{\"role\":\"user\",\"w\":%d,\"b\":%d,\"i\":0}", w->id, got);
        const char *one[] = {m};
        convo_append_opts o = CONVO_APPEND_OPTS_INIT;
        o.expected_length = len;
        convo_append_result r;
        rc = convo_append(s, w->tid, one, NULL, 1, &o, &r, &err);
        if (rc == CONVO_ECONFLICT) {
            w->count++;
            continue;
        }
        if (rc != 0 || r.first_seq != len) {
            worker_fail(w, rc ? rc : CONVO_ERROR, &err, "conditional append");
            break;
        }
        got++;
    }
    if (s)
        worker_end(w, s);
    return NULL;
}

START_TEST(test_concurrent_expected_length)
{
    if (_i == 1)
        SKIP_IF_PRIVATE();
    char t[256];
    TID(t, _i ? "own" : "shared");
    worker ws[WRITERS];
    run_workers(WRITERS, conditional_worker, ws, _i, t);
    verify_tagged(conf_store, t, WRITERS, 10, 1, NULL);
}
END_TEST

/* All workers retry the same keyed batch at once, round after round. */
static void *idempotent_worker(void *arg)
{
    worker *w = arg;
    convo_store *s = worker_begin(w);
    for (int r = 0; s && r < 10; r++) {
        pthread_barrier_wait(w->barrier);
        char key[24], a[64], b[64];
        snprintf(key, sizeof key, "round-%d", r);
        snprintf(a, sizeof a, "{\"role\":\"user\",\"r\":%d,\"i\":0}", r);
        snprintf(b, sizeof b, "{\"role\":\"user\",\"r\":%d,\"i\":1}", r);
        const char *two[] = {a, b};
        convo_append_opts o = CONVO_APPEND_OPTS_INIT;
        o.idempotency_key = key;
        convo_append_result res;
        convo_error err;
        int rc = convo_append(s, w->tid, two, NULL, 2, &o, &res, &err);
        if (rc != 0) {
            worker_fail(w, rc, &err, "keyed append");
            /* keep meeting the barrier so the others do not hang */
            for (r++; r < 10; r++)
                pthread_barrier_wait(w->barrier);
            break;
        }
        w->firsts[r] = res.first_seq;
        w->counts[r] = res.count;
        w->replayed[r] = res.replayed;
    }
    if (s)
        worker_end(w, s);
    else
        for (int r = 0; r < 10; r++)
            pthread_barrier_wait(w->barrier);
    return NULL;
}

START_TEST(test_concurrent_idempotent_retries)
{
    if (_i == 1)
        SKIP_IF_PRIVATE();
    char t[256];
    TID(t, _i ? "own" : "shared");
    worker ws[WRITERS];
    run_workers(WRITERS, idempotent_worker, ws, _i, t);
    convo_history *h = conf_load(conf_store, t, NULL);
    ck_assert_int_eq(convo_history_count(h), 20);
    for (int r = 0; r < 10; r++) {
        int fresh = 0;
        int64_t first = ws[0].firsts[r];
        for (int w = 0; w < WRITERS; w++) {
            ck_assert_msg(ws[w].firsts[r] == first && ws[w].counts[r] == 2,
                          "round %d: worker %d got first %lld count %zu, worker 0 first %lld", r,
                          w, (long long)ws[w].firsts[r], ws[w].counts[r], (long long)first);
            fresh += ws[w].replayed[r] == 0;
        }
        ck_assert_msg(fresh == 1, "round %d: %d appends not replayed, expected 1", r, fresh);
        for (int i = 0; i < 2; i++) {
            json_t *m = conf_parse_json(convo_history_message(h, (size_t)(first + i), NULL));
            int gr = -1, gi = -1;
            ck_assert_int_eq(json_unpack(m, "{s:i,s:i}", "r", &gr, "i", &gi), 0);
            ck_assert_msg(gr == r && gi == i, "round %d stored wrongly at %lld", r,
                          (long long)(first + i));
            json_decref(m);
        }
    }
    convo_history_free(h);
}
END_TEST

static void *fork_worker(void *arg)
{
    worker *w = arg;
    convo_store *s = worker_begin(w);
    w->count = 0; /* forks that succeeded */
    for (int r = 0; s && r < 5; r++) {
        pthread_barrier_wait(w->barrier);
        char dst[300];
        snprintf(dst, sizeof dst, "%s-fork-%d", w->tid, r);
        convo_error err;
        int rc = convo_thread_fork(s, w->tid, dst, -1, &err);
        if (rc == 0)
            w->count++;
        else if (rc != CONVO_ECONFLICT) {
            worker_fail(w, rc, &err, "fork");
            for (r++; r < 5; r++)
                pthread_barrier_wait(w->barrier);
            break;
        }
    }
    if (s)
        worker_end(w, s);
    else
        for (int r = 0; r < 5; r++)
            pthread_barrier_wait(w->barrier);
    return NULL;
}

START_TEST(test_concurrent_forks)
{
    if (_i == 1)
        SKIP_IF_PRIVATE();
    char t[256];
    TID(t, _i ? "own" : "shared");
    conf_append(conf_store, t, conf_rt_msgs, conf_rt_n);
    conf_save_extra_ok(conf_store, t, "{\"a\":1}");
    worker ws[WRITERS];
    run_workers(WRITERS, fork_worker, ws, _i, t);
    int wins = 0;
    for (int w = 0; w < WRITERS; w++)
        wins += ws[w].count;
    ck_assert_int_eq(wins, 5);
    for (int r = 0; r < 5; r++) {
        char dst[300];
        snprintf(dst, sizeof dst, "%s-fork-%d", t, r);
        conf_assert_same_prefix(conf_store, t, dst, (int64_t)conf_rt_n);
    }
}
END_TEST

/* ---- the same from separate processes ---- */

#define PROCS 4

typedef int (*child_fn)(convo_store *s, const char *tid, int id);

/* Forks PROCS children that open their own store, wait for a common start,
 * run fn and exit with 0 on success. */
static void run_children(child_fn fn, const char *tid)
{
    /* no store open across fork(): a client library's threads do not survive it */
    convo_close(conf_store);
    conf_store = NULL;
    int go[2];
    ck_assert_int_eq(pipe(go), 0);
    pid_t pids[PROCS];
    for (int i = 0; i < PROCS; i++) {
        pids[i] = fork();
        ck_assert_int_ge(pids[i], 0);
        if (pids[i] == 0) {
            close(go[1]);
            convo_store *s = NULL;
            int rc = convo_open(&s, conf_url, NULL);
            char c;
            while (read(go[0], &c, 1) < 0 && errno == EINTR)
                ;
            if (rc == 0)
                rc = fn(s, tid, i);
            convo_close(s);
            _exit(rc == 0 ? 0 : 10 + (-rc));
        }
    }
    close(go[0]);
    close(go[1]); /* every child sees EOF and starts */
    for (int i = 0; i < PROCS; i++) {
        int status;
        ck_assert_int_eq(waitpid(pids[i], &status, 0), pids[i]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "child %d failed: status %d (exit 10+n means error -n)", i, status);
    }
    conf_store = conf_open();
}

static int child_append(convo_store *s, const char *tid, int id)
{
    for (int b = 0; b < BATCHES; b++) {
        int rc = append_tagged(s, tid, id, b, PER_BATCH, NULL, NULL);
        if (rc != 0)
            return rc;
    }
    return 0;
}

static int child_extra(convo_store *s, const char *tid, int id)
{
    for (int j = 0; j < 25; j++) {
        char patch[128];
        snprintf(patch, sizeof patch, "{\"p%d_%d\":{\"w\":%d,\"j\":%d}}", id, j, id, j);
        int rc = convo_save_extra(s, tid, patch, NULL);
        if (rc != 0)
            return rc;
    }
    return 0;
}

START_TEST(test_concurrent_appends_processes)
{
    SKIP_IF_PRIVATE();
    char t[256];
    TID(t, "procs");
    run_children(child_append, t);
    verify_tagged(conf_store, t, PROCS, BATCHES, PER_BATCH, NULL);
}
END_TEST

START_TEST(test_concurrent_extra_processes)
{
    SKIP_IF_PRIVATE();
    char t[256];
    TID(t, "procs");
    conf_save_extra_ok(conf_store, t, "{\"before\":true}");
    run_children(child_extra, t);
    assert_extra_keys(conf_store, t, 'p', PROCS, 25);
    convo_history *h = conf_load(conf_store, t, NULL);
    json_t *e = conf_parse_json(convo_history_extra(h));
    ck_assert(json_is_true(json_object_get(e, "before")));
    ck_assert_int_eq(json_object_size(e), PROCS * 25 + 1);
    json_decref(e);
    convo_history_free(h);
}
END_TEST

void conf_add_concurrency_tests(Suite *s)
{
    TCase *tc = conf_tcase(s, "concurrency");
    tcase_add_loop_test(tc, test_concurrent_appends_threads, 0, 2);
    tcase_add_loop_test(tc, test_concurrent_extra_threads, 0, 2);
    tcase_add_loop_test(tc, test_concurrent_mixed, 0, 2);
    tcase_add_loop_test(tc, test_concurrent_expected_length, 0, 2);
    tcase_add_loop_test(tc, test_concurrent_idempotent_retries, 0, 2);
    tcase_add_loop_test(tc, test_concurrent_forks, 0, 2);
    tcase_add_test(tc, test_concurrent_appends_processes);
    tcase_add_test(tc, test_concurrent_extra_processes);
}
