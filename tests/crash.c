/* crash.c — reliability of a store under process death and contention, run as
 * `tests/crash URL`: writers SIGKILLed mid-append leave every batch whole or
 * absent, processes killed mid checkpoint put never leave messages without their
 * checkpoint (or the reverse), rewriters killed mid-replace leave the old tail or
 * the new one, and concurrent processes lose nothing. Public API (convo.h) only. */
#include <check.h>
#include <convo.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif

#define CRASH_WRITERS 4   /* processes per round */
#define CRASH_ROUNDS 6    /* each round forks fresh writers and kills them all */
#define KILL_MIN_MS 5
#define KILL_MAX_MS 200
#define OPEN_ATTEMPTS 8   /* fresh namespaces whose first open is interrupted */
#define OPEN_WRITERS 3
#define CONC_PROCS 4
#define CONC_BATCHES 40
#define READY_TIMEOUT_MS 60000
#define MAX_WRITERS (CRASH_WRITERS * CRASH_ROUNDS)

/* Pipe words from a writer to the parent. */
#define MSG_READY (-1)
#define ACK_APPEND(b) (2 * (b))     /* batch b stored */
#define ACK_EXTRA(b) (2 * (b) + 1)  /* save_extra {"w<w>": b} stored */

static const char *url;
static char prefix[32];
static int private_store; /* memory:, sqlite::memory: — one process only */
static const char *driver_name = "?";
static unsigned long long rng_state;

/* ------------------------------------------------------------------ helpers */

static unsigned long long next_random(void)
{
    rng_state ^= rng_state << 13; /* xorshift64: good enough for timings */
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Batch sizes vary with writer and batch (1..12); message padding too, so some
 * appends carry a large message and take long enough to be killed inside. */
static int batch_size(int w, int b)
{
    return 1 + (w * 7 + b * 5) % 12;
}

static size_t pad_size(int w, int b, int i)
{
    return ((w + b + i) % 41 == 0) ? 32 * 1024 : (size_t)((w * 31 + b * 7 + i) % 200);
}

static char *make_message(int w, int b, int i, int n)
{
    size_t pad = pad_size(w, b, i);
    char *m = malloc(pad + 128);
    if (!m)
        return NULL;
    int len = sprintf(m, "{\"role\":\"user\",\"w\":%d,\"b\":%d,\"i\":%d,\"n\":%d,\"pad\":\"", w, b,
                      i, n);
    memset(m + len, 'x', pad);
    strcpy(m + len + pad, "\"}");
    return m;
}

/* Appends batch b of writer w as one call. */
static int append_batch(convo_store *s, const char *tid, int w, int b)
{
    int n = batch_size(w, b);
    char *msgs[12] = {0};
    int rc = 0;
    for (int i = 0; i < n; i++)
        if (!(msgs[i] = make_message(w, b, i, n)))
            rc = CONVO_ENOMEM;
    convo_append_result res;
    if (rc == 0)
        rc = convo_append(s, tid, (const char *const *)msgs, NULL, (size_t)n, NULL, &res, NULL);
    if (rc == 0 && res.count != (size_t)n)
        rc = CONVO_ERROR;
    for (int i = 0; i < n; i++)
        free(msgs[i]);
    return rc;
}

/* A writer's exit status: 10 + n when an append failed with -n, 40 + n for save_extra. */
static const char *describe_exit(int status)
{
    static char buf[96];
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    if (code >= 40)
        snprintf(buf, sizeof buf, "save_extra failed: %s", convo_strerror(40 - code));
    else if (code >= 10)
        snprintf(buf, sizeof buf, "open or append failed: %s", convo_strerror(10 - code));
    else
        snprintf(buf, sizeof buf, "status 0x%x", status);
    return buf;
}

static void write_word(int fd, int v)
{
    while (write(fd, &v, sizeof v) < 0 && errno == EINTR)
        ;
}

static void thread_id(char *buf, size_t size, const char *name)
{
    snprintf(buf, size, "%s/%s", prefix, name);
}

static int64_t conf_length_of(convo_store *s, const char *tid)
{
    convo_load_opts lo = CONVO_LOAD_OPTS_INIT;
    lo.tail = 1;
    lo.with_extra = 0;
    convo_history *h = NULL;
    convo_error err;
    int rc = convo_load(s, tid, &lo, &h, &err);
    ck_assert_msg(rc == 0, "load %s: %s", tid, err.message);
    int64_t n = convo_history_length(h);
    convo_history_free(h);
    return n;
}

static convo_store *open_store(const char *u)
{
    convo_store *s = NULL;
    convo_error err;
    int rc = convo_open(&s, u, &err);
    ck_assert_msg(rc == 0, "convo_open(%s) failed: %s: %s", driver_name, convo_strerror(rc),
                  err.message);
    return s;
}

/* Check cannot mark a test skipped: print why and return (it counts as passed). */
#define SKIP_IF_PRIVATE(name)                                                              \
    do {                                                                                   \
        if (private_store) {                                                               \
            printf("crash: %s: skipped: a %s store is private to one process\n", name,     \
                   driver_name);                                                           \
            return;                                                                        \
        }                                                                                  \
    } while (0)

/* ------------------------------------------------------------- the checker */

static int json_int(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? (int)json_integer_value(v) : -1;
}

/* Loads the thread and checks: seq dense from 0; every batch whole, contiguous and
 * not interleaved; no batch twice; each writer's batches 0, 1, 2, ... in order.
 * found[w] gets the number of batches of writer w. Returns the history. */
static convo_history *verify_log(convo_store *s, const char *tid, int nwriters, int *found)
{
    convo_history *h = NULL;
    convo_error err;
    int rc = convo_load(s, tid, NULL, &h, &err);
    ck_assert_msg(rc == 0, "load %s: %s: %s", tid, convo_strerror(rc), err.message);
    size_t count = convo_history_count(h);
    ck_assert_msg(convo_history_length(h) == (int64_t)count, "length %lld but %zu messages",
                  (long long)convo_history_length(h), count);
    memset(found, 0, (size_t)nwriters * sizeof *found);
    int w = -1, b = -1, n = 0, next_i = 0;
    for (size_t k = 0; k < count; k++) {
        ck_assert_msg(convo_history_seq(h, k) == (int64_t)k, "seq %lld at position %zu",
                      (long long)convo_history_seq(h, k), k);
        size_t len;
        const char *text = convo_history_message(h, k, &len);
        json_t *m = json_loadb(text, len, 0, NULL);
        ck_assert_msg(json_is_object(m), "seq %zu is not a JSON object: %.80s", k, text);
        int mw = json_int(m, "w"), mb = json_int(m, "b"), mi = json_int(m, "i");
        int mn = json_int(m, "n");
        json_decref(m);
        if (next_i == 0) { /* a batch starts here */
            ck_assert_msg(mi == 0, "seq %zu: batch (w %d, b %d) starts at index %d: a batch "
                          "was cut or interleaved", k, mw, mb, mi);
            ck_assert_msg(mw >= 0 && mw < nwriters, "seq %zu: unknown writer %d", k, mw);
            ck_assert_msg(mb == found[mw], "seq %zu: writer %d's batch %d where batch %d was "
                          "due (duplicated, lost or out of order)", k, mw, mb, found[mw]);
            ck_assert_msg(mn == batch_size(mw, mb), "seq %zu: batch size %d, want %d", k, mn,
                          batch_size(mw, mb));
            w = mw, b = mb, n = mn;
        } else {
            ck_assert_msg(mw == w && mb == b && mi == next_i, "seq %zu: (w %d, b %d, i %d) inside "
                          "batch (w %d, b %d) at index %d: interleaved or cut", k, mw, mb, mi, w, b,
                          next_i);
        }
        if (++next_i == n) {
            next_i = 0;
            found[w]++;
        }
    }
    ck_assert_msg(next_i == 0, "the log ends inside batch (w %d, b %d): %d of %d messages", w, b,
                  next_i, n);
    return h;
}

/* ------------------------------------------------------- killed mid-append */

/* A writer: signals ready, then appends batches and saves extra forever,
 * acknowledging each call on fd; the parent kills it. */
static void writer_main(const char *u, const char *tid, int w, int fd)
{
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a failed test */
#endif
    convo_store *s = NULL;
    int rc = convo_open(&s, u, NULL);
    if (rc != 0)
        _exit(10 - rc);
    write_word(fd, MSG_READY);
    for (int b = 0; b < 1000000; b++) {
        if ((rc = append_batch(s, tid, w, b)) != 0)
            _exit(10 - rc);
        write_word(fd, ACK_APPEND(b));
        char patch[64];
        snprintf(patch, sizeof patch, "{\"w%d\":%d}", w, b);
        if ((rc = convo_save_extra(s, tid, patch, NULL)) != 0)
            _exit(40 - rc);
        write_word(fd, ACK_EXTRA(b));
    }
    _exit(0);
}

typedef struct writer {
    pid_t pid;
    int fd;       /* read end of its pipe, -1 at EOF */
    int ready;
    int acked;    /* batches acknowledged */
    int extra;    /* last batch number whose save_extra was acknowledged, or -1 */
    int64_t kill_at;
} writer;

/* Reads what is waiting on a writer's pipe; returns 0 at EOF. */
static int drain(writer *wr, int block)
{
    int v;
    for (;;) {
        if (!block) {
            struct pollfd p = {wr->fd, POLLIN, 0};
            if (poll(&p, 1, 0) <= 0)
                return 1;
        }
        ssize_t got = read(wr->fd, &v, sizeof v);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            close(wr->fd);
            wr->fd = -1;
            return 0;
        }
        ck_assert_int_eq(got, sizeof v); /* writes of 4 bytes to a pipe are atomic */
        if (v == MSG_READY)
            wr->ready = 1;
        else if (v % 2 == 0)
            wr->acked = v / 2 + 1;
        else
            wr->extra = v / 2;
    }
}

typedef void (*writer_fn)(const char *u, const char *tid, int w, int fd);

static void spawn_proc(writer *wr, writer_fn fn, const char *tid, int w)
{
    int p[2];
    ck_assert_int_eq(pipe(p), 0);
    *wr = (writer){.fd = p[0], .extra = -1};
    fflush(NULL);
    wr->pid = fork();
    ck_assert_int_ge(wr->pid, 0);
    if (wr->pid == 0) {
        close(p[0]);
        fn(url, tid, w, p[1]);
    }
    close(p[1]);
}

static void spawn_writer(writer *wr, const char *tid, int w)
{
    spawn_proc(wr, writer_main, tid, w);
}

/* Waits until every writer said ready (or died trying). */
static void wait_ready(writer *ws, int n)
{
    int64_t deadline = now_ms() + READY_TIMEOUT_MS;
    for (int k = 0; k < n; k++) {
        while (!ws[k].ready && ws[k].fd >= 0) {
            struct pollfd p = {ws[k].fd, POLLIN, 0};
            ck_assert_msg(now_ms() < deadline, "writer %d not ready after %d ms", k,
                          READY_TIMEOUT_MS);
            if (poll(&p, 1, 100) > 0)
                drain(&ws[k], 0);
        }
    }
}

/* Kills each writer at its own random moment, draining pipes meanwhile. */
static void kill_all(writer *ws, int n)
{
    int64_t start = now_ms();
    for (int k = 0; k < n; k++)
        ws[k].kill_at = start + KILL_MIN_MS +
                        (int64_t)(next_random() % (KILL_MAX_MS - KILL_MIN_MS + 1));
    int left = n;
    while (left > 0) {
        left = 0;
        for (int k = 0; k < n; k++) {
            if (ws[k].pid == 0)
                continue;
            if (now_ms() >= ws[k].kill_at) {
                kill(ws[k].pid, SIGKILL);
                int status;
                ck_assert_int_eq(waitpid(ws[k].pid, &status, 0), ws[k].pid);
                ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                              "writer %d stopped before it was killed: %s", k,
                              describe_exit(status));
                ws[k].pid = 0;
            } else {
                left++;
                if (ws[k].fd >= 0)
                    drain(&ws[k], 0);
            }
        }
        if (left)
            usleep(1000);
    }
    for (int k = 0; k < n; k++)
        while (ws[k].fd >= 0)
            drain(&ws[k], 1);
}

/* The extra object: key w<w> holds a batch number between the last acknowledged
 * save_extra and the last batch stored. */
static void verify_extra_keys(const convo_history *h, const writer *ws, const int *found, int n)
{
    json_t *extra = json_loads(convo_history_extra(h), 0, NULL);
    ck_assert_msg(json_is_object(extra), "extra is not an object: %.100s",
                  convo_history_extra(h));
    for (int w = 0; w < n; w++) {
        char key[32];
        snprintf(key, sizeof key, "w%d", w);
        json_t *v = json_object_get(extra, key);
        if (!v) {
            ck_assert_msg(ws[w].extra < 0, "extra %s lost (acknowledged %d)", key, ws[w].extra);
            continue;
        }
        ck_assert_msg(json_is_integer(v), "extra %s is not an integer", key);
        int b = (int)json_integer_value(v);
        ck_assert_msg(b >= ws[w].extra && b < found[w],
                      "extra %s = %d, want %d..%d (acknowledged..last stored)", key, b,
                      ws[w].extra, found[w] - 1);
    }
    json_decref(extra);
}

START_TEST(test_kill_mid_append)
{
    SKIP_IF_PRIVATE("kill mid-append");
    char tid[128];
    thread_id(tid, sizeof tid, "killed");
    writer ws[MAX_WRITERS];
    for (int r = 0; r < CRASH_ROUNDS; r++) {
        writer *round = &ws[r * CRASH_WRITERS];
        for (int k = 0; k < CRASH_WRITERS; k++)
            spawn_writer(&round[k], tid, r * CRASH_WRITERS + k);
        wait_ready(round, CRASH_WRITERS);
        kill_all(round, CRASH_WRITERS);
    }
    convo_store *s = open_store(url);
    int found[MAX_WRITERS];
    convo_history *h = verify_log(s, tid, MAX_WRITERS, found);
    int total = 0, in_flight = 0;
    for (int w = 0; w < MAX_WRITERS; w++) {
        ck_assert_msg(found[w] >= ws[w].acked, "writer %d: %d batches acknowledged but only %d "
                      "stored", w, ws[w].acked, found[w]);
        ck_assert_msg(found[w] <= ws[w].acked + 1, "writer %d: %d batches stored but %d "
                      "acknowledged (more than one in flight)", w, found[w], ws[w].acked);
        total += found[w];
        in_flight += found[w] - ws[w].acked;
    }
    verify_extra_keys(h, ws, found, MAX_WRITERS);
    int64_t length = convo_history_length(h);
    convo_history_free(h);
    /* the store still works after the crashes: the next append lands at the end */
    const char *one = "{\"role\":\"user\",\"after\":\"crash\"}";
    convo_append_result res;
    convo_error err;
    int rc = convo_append(s, tid, &one, NULL, 1, NULL, &res, &err);
    ck_assert_msg(rc == 0, "append after the crashes: %s: %s", convo_strerror(rc), err.message);
    ck_assert_int_eq(res.first_seq, length);
    convo_thread_delete(s, tid, NULL);
    convo_close(s);
    printf("crash: %s: %d writers killed, %d batches (%lld messages) whole, %d stored while "
           "being killed\n", driver_name, MAX_WRITERS, total, (long long)length, in_flight);
    ck_assert_msg(total > 0, "no writer stored anything before it was killed");
}
END_TEST

/* ------------------------------------------------------ killed mid-replace */

#define REPLACE_KEEP 2 /* seed messages no rewrite touches */

/* A rewriter: replaces everything after the seed with one new group of
 * messages (writer w's attempt b, batch_size(w, b) of them), on the condition
 * that the thread is still as it read it (length and generation); a conflict
 * means another rewriter went first, and it tries again with the next b. */
static void rewriter_main(const char *u, const char *tid, int w, int fd)
{
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
    convo_store *s = NULL;
    int rc = convo_open(&s, u, NULL);
    if (rc != 0)
        _exit(10 - rc);
    write_word(fd, MSG_READY);
    for (int b = 0; b < 1000000; b++) {
        convo_load_opts lo = CONVO_LOAD_OPTS_INIT;
        lo.tail = 1;
        lo.with_extra = 0;
        convo_history *h = NULL;
        if ((rc = convo_load(s, tid, &lo, &h, NULL)) != 0)
            _exit(10 - rc);
        convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
        o.expected_length = convo_history_length(h);
        o.expected_generation = convo_history_generation(h);
        convo_history_free(h);
        int n = batch_size(w, b);
        char *msgs[12] = {0};
        for (int i = 0; i < n && rc == 0; i++)
            if (!(msgs[i] = make_message(w, b, i, n)))
                rc = CONVO_ENOMEM;
        if (rc == 0)
            rc = convo_replace_tail(s, tid, REPLACE_KEEP, (const char *const *)msgs, NULL,
                                    (size_t)n, &o, NULL, NULL);
        for (int i = 0; i < n; i++)
            free(msgs[i]);
        if (rc == 0)
            write_word(fd, ACK_APPEND(b));
        else if (rc != CONVO_ECONFLICT)
            _exit(10 - rc);
    }
    _exit(0);
}

/* The seed whole, then exactly one group, whole; seq dense; the generation at
 * least the number of rewrites acknowledged. Returns the generation. */
static int64_t verify_rewritten(convo_store *s, const char *tid, const char *const *seed,
                                int acked_total)
{
    convo_history *h = NULL;
    convo_error err;
    int rc = convo_load(s, tid, NULL, &h, &err);
    ck_assert_msg(rc == 0, "load %s: %s: %s", tid, convo_strerror(rc), err.message);
    size_t count = convo_history_count(h);
    ck_assert_msg(convo_history_length(h) == (int64_t)count, "length %lld but %zu messages",
                  (long long)convo_history_length(h), count);
    ck_assert_msg(count >= REPLACE_KEEP, "the seed was cut: %zu messages", count);
    for (size_t k = 0; k < count; k++)
        ck_assert_msg(convo_history_seq(h, k) == (int64_t)k, "seq %lld at position %zu",
                      (long long)convo_history_seq(h, k), k);
    for (size_t k = 0; k < REPLACE_KEEP; k++) {
        size_t len;
        const char *m = convo_history_message(h, k, &len);
        ck_assert_msg(len == strlen(seed[k]) && memcmp(m, seed[k], len) == 0,
                      "seed message %zu changed: %.80s", k, m);
    }
    int64_t generation = convo_history_generation(h);
    ck_assert_msg(generation >= acked_total, "generation %lld but %d rewrites acknowledged",
                  (long long)generation, acked_total);
    if (generation > 0) {
        ck_assert_msg(count > REPLACE_KEEP, "rewritten %lld times but no group after the seed",
                      (long long)generation);
        int w = -1, b = -1, n = 0;
        for (size_t k = REPLACE_KEEP; k < count; k++) {
            size_t len;
            const char *text = convo_history_message(h, k, &len);
            json_t *m = json_loadb(text, len, 0, NULL);
            ck_assert_msg(json_is_object(m), "seq %zu is not a JSON object", k);
            int mw = json_int(m, "w"), mb = json_int(m, "b"), mi = json_int(m, "i");
            int mn = json_int(m, "n");
            json_decref(m);
            if (k == REPLACE_KEEP)
                w = mw, b = mb, n = mn;
            ck_assert_msg(mw == w && mb == b && mi == (int)(k - REPLACE_KEEP) && mn == n,
                          "seq %zu: (w %d, b %d, i %d) in the group of (w %d, b %d): a mix of "
                          "two tails", k, mw, mb, mi, w, b);
        }
        ck_assert_msg(n == batch_size(w, b) && count - REPLACE_KEEP == (size_t)n,
                      "the group of (w %d, b %d) has %zu of %d messages", w, b,
                      count - REPLACE_KEEP, n);
    } else {
        ck_assert_int_eq(count, REPLACE_KEEP);
    }
    convo_history_free(h);
    return generation;
}

START_TEST(test_kill_mid_replace)
{
    SKIP_IF_PRIVATE("kill mid-replace");
    char tid[128];
    thread_id(tid, sizeof tid, "rewritten");
    static const char *const seed[REPLACE_KEEP] = {"{\"role\":\"system\",\"seed\":0}",
                                                   "{\"role\":\"user\",\"seed\":1}"};
    convo_store *s = open_store(url);
    convo_error err;
    int rc = convo_append(s, tid, seed, NULL, REPLACE_KEEP, NULL, NULL, &err);
    ck_assert_msg(rc == 0, "seed: %s", err.message);
    convo_close(s); /* no store may stay open across fork() */
    writer ws[MAX_WRITERS];
    int acked = 0;
    for (int r = 0; r < CRASH_ROUNDS; r++) {
        writer *round = &ws[r * CRASH_WRITERS];
        for (int k = 0; k < CRASH_WRITERS; k++)
            spawn_proc(&round[k], rewriter_main, tid, r * CRASH_WRITERS + k);
        wait_ready(round, CRASH_WRITERS);
        kill_all(round, CRASH_WRITERS);
        for (int k = 0; k < CRASH_WRITERS; k++)
            acked += round[k].acked > 0; /* at least its last acknowledged one */
    }
    s = open_store(url);
    int64_t generation = verify_rewritten(s, tid, seed, acked);
    /* the store still works: an append lands right after the current tail */
    int64_t length = conf_length_of(s, tid);
    const char *one = "{\"role\":\"user\",\"after\":\"crash\"}";
    convo_append_result res;
    rc = convo_append(s, tid, &one, NULL, 1, NULL, &res, &err);
    ck_assert_msg(rc == 0, "append after the crashes: %s: %s", convo_strerror(rc), err.message);
    ck_assert_int_eq(res.first_seq, length);
    convo_thread_delete(s, tid, NULL);
    convo_close(s);
    printf("crash: %s: %d rewriters killed, generation %lld, tail whole\n", driver_name,
           MAX_WRITERS, (long long)generation);
    ck_assert_msg(generation > 0, "no rewriter stored anything before it was killed");
}
END_TEST

/* ------------------------------------- killed mid checkpoint put with messages */

/* Messages [0, end of batch b) of a thread whose batches are 0..b of writer w. */
static int64_t batches_end(int w, int b)
{
    int64_t n = 0;
    for (int j = 0; j <= b; j++)
        n += batch_size(w, j);
    return n;
}

/* Puts checkpoint "b<b>" with batch b's messages, under the expected length. */
static int put_batch(convo_store *s, const char *tid, int w, int b, int64_t expected)
{
    int n = batch_size(w, b);
    char *msgs[12] = {0};
    int rc = 0;
    for (int i = 0; i < n; i++)
        if (!(msgs[i] = make_message(w, b, i, n)))
            rc = CONVO_ENOMEM;
    char id[32], meta[32];
    snprintf(id, sizeof id, "b%d", b);
    snprintf(meta, sizeof meta, "{\"b\":%d}", b);
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = tid;
    cp.checkpoint_id = id;
    cp.metadata_json = meta;
    cp.log_length = expected + n;
    cp.messages = (const char *const *)msgs;
    cp.nmessages = (size_t)n;
    cp.expected_length = expected;
    if (rc == 0)
        rc = convo_checkpoint_put(s, &cp, NULL);
    for (int i = 0; i < n; i++)
        free(msgs[i]);
    return rc;
}

/* A graph process: picks its thread up from the latest checkpoint (as after a
 * restart), then puts a checkpoint with the next batch of messages, forever. */
static void stepper_main(const char *u, const char *tid, int w, int fd)
{
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
    convo_store *s = NULL;
    int rc = convo_open(&s, u, NULL);
    if (rc != 0)
        _exit(10 - rc);
    convo_checkpoint *cp = NULL;
    rc = convo_checkpoint_get(s, tid, NULL, NULL, &cp, NULL);
    if (rc != 0 && rc != CONVO_ENOTFOUND)
        _exit(10 - rc);
    int b = 0;
    int64_t length = 0;
    if (cp) {
        json_t *m = json_loads(convo_checkpoint_metadata(cp), 0, NULL);
        b = json_int(m, "b") + 1;
        json_decref(m);
        length = convo_checkpoint_log_length(cp);
        convo_checkpoint_free(cp);
    }
    write_word(fd, MSG_READY);
    for (;; b++) {
        if ((rc = put_batch(s, tid, w, b, length)) != 0)
            _exit(10 - rc);
        write_word(fd, ACK_APPEND(b));
        length += batch_size(w, b);
    }
}

/* Every batch in the log came with its checkpoint and every checkpoint with its
 * batch: the latest checkpoint covers the whole log, and checkpoint b<j> ends
 * where batch j ends. */
static int verify_stepped(convo_store *s, const char *tid, int w, int acked)
{
    int found[CRASH_WRITERS] = {0};
    int64_t length = 0;
    convo_history *h = NULL;
    convo_load_opts lo = CONVO_LOAD_OPTS_INIT;
    lo.limit = 1;
    int rc = convo_load(s, tid, &lo, &h, NULL);
    convo_history_free(h);
    ck_assert_msg(rc == 0 || rc == CONVO_ENOTFOUND, "load %s: %s", tid, convo_strerror(rc));
    if (rc == 0) { /* else killed before its first put: no messages, no checkpoint */
        h = verify_log(s, tid, CRASH_WRITERS, found);
        length = convo_history_length(h);
        convo_history_free(h);
    }
    ck_assert_msg(found[w] >= acked && found[w] <= acked + 1,
                  "thread %d: %d batches stored, %d acknowledged", w, found[w], acked);
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = tid;
    convo_checkpoint_set *set = NULL;
    convo_error err;
    rc = convo_checkpoint_list(s, &o, &set, &err);
    ck_assert_msg(rc == 0, "list %s: %s", tid, err.message);
    size_t n = convo_checkpoint_set_count(set);
    ck_assert_msg(n == (size_t)found[w], "thread %d: %zu checkpoints for %d batches of messages",
                  w, n, found[w]);
    for (size_t k = 0; k < n; k++) {
        const convo_checkpoint *cp = convo_checkpoint_set_get(set, k);
        int b = found[w] - 1 - (int)k; /* newest first */
        char id[32];
        snprintf(id, sizeof id, "b%d", b);
        ck_assert_str_eq(convo_checkpoint_id(cp), id);
        ck_assert_msg(convo_checkpoint_log_length(cp) == batches_end(w, b),
                      "thread %d: checkpoint %s has log_length %lld, its batch ends at %lld", w,
                      id, (long long)convo_checkpoint_log_length(cp),
                      (long long)batches_end(w, b));
    }
    if (n)
        ck_assert_int_eq(convo_checkpoint_log_length(convo_checkpoint_set_get(set, 0)), length);
    convo_checkpoint_set_free(set);
    return found[w];
}

START_TEST(test_kill_mid_checkpoint_put)
{
    SKIP_IF_PRIVATE("kill mid checkpoint put");
    char tids[CRASH_WRITERS][128];
    int acked[CRASH_WRITERS] = {0};
    for (int k = 0; k < CRASH_WRITERS; k++) {
        char name[32];
        snprintf(name, sizeof name, "stepped%d", k);
        thread_id(tids[k], sizeof tids[k], name);
    }
    /* each round restarts one process per thread, which goes on from its latest checkpoint */
    for (int r = 0; r < CRASH_ROUNDS / 2; r++) {
        writer ws[CRASH_WRITERS];
        for (int k = 0; k < CRASH_WRITERS; k++)
            spawn_proc(&ws[k], stepper_main, tids[k], k);
        wait_ready(ws, CRASH_WRITERS);
        kill_all(ws, CRASH_WRITERS);
        convo_store *s = open_store(url);
        for (int k = 0; k < CRASH_WRITERS; k++) {
            if (ws[k].acked > acked[k])
                acked[k] = ws[k].acked;
            acked[k] = verify_stepped(s, tids[k], k, acked[k]);
        }
        convo_close(s);
    }
    convo_store *s = open_store(url);
    int total = 0;
    for (int k = 0; k < CRASH_WRITERS; k++) {
        total += acked[k];
        convo_thread_delete(s, tids[k], NULL);
    }
    convo_close(s);
    printf("crash: %s: %d graph processes killed mid checkpoint put, %d checkpoints with their "
           "messages whole\n", driver_name, CRASH_WRITERS * (CRASH_ROUNDS / 2), total);
    ck_assert_msg(total > 0, "no checkpoint was put before the kills");
}
END_TEST

/* ------------------------------------------------- killed during first open */

/* The URL of a fresh namespace: sqlite: another file; redis prefix=, postgres
 * schema=, mongo database= get a suffix. NULL when there is no way to tell. */
static char *fresh_url(int n)
{
    char *out = malloc(strlen(url) + 16);
    const char *q = strchr(url, '?');
    size_t qpos = q ? (size_t)(q - url) : strlen(url);
    if (strncmp(url, "sqlite:", 7) == 0) {
        sprintf(out, "%.*s.open%d%s", (int)qpos, url, n, q ? q : "");
        return out;
    }
    static const char *const keys[] = {"prefix=", "schema=", "database=", NULL};
    for (const char *const *k = keys; q && *k; k++) {
        for (const char *p = q; (p = strstr(p, *k)) != NULL; p++) {
            if (p[-1] != '?' && p[-1] != '&')
                continue;
            size_t end = (size_t)(p - url) + strlen(*k) + strcspn(p + strlen(*k), "&");
            sprintf(out, "%.*s_o%d%s", (int)end, url, n, url + end);
            return out;
        }
    }
    free(out);
    return NULL;
}

/* u is the parent's copy: freed here too, so that valgrind sees no leak. */
static void opener_main(char *u, const char *tid, int w)
{
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
    convo_store *s = NULL;
    int rc = convo_open(&s, u, NULL);
    if (rc == 0)
        rc = append_batch(s, tid, w, 0);
    convo_close(s);
    free(u);
    _exit(rc == 0 ? 0 : 10 - rc);
}

/* Writers open a fresh namespace (creating its schema) at the same moment and
 * are killed 0-20 ms later; afterwards the namespace opens and works. */
START_TEST(test_kill_during_first_open)
{
    SKIP_IF_PRIVATE("kill during first open");
    char tid[128];
    thread_id(tid, sizeof tid, "opened");
    int total_killed = 0;
    for (int a = 0; a < OPEN_ATTEMPTS; a++) {
        char *u = fresh_url(a);
        if (!u) {
            printf("crash: kill during first open: skipped: no prefix=, schema= or database= "
                   "in the URL to derive a fresh namespace from\n");
            return;
        }
        pid_t pids[OPEN_WRITERS];
        fflush(NULL);
        for (int k = 0; k < OPEN_WRITERS; k++) {
            pids[k] = fork();
            ck_assert_int_ge(pids[k], 0);
            if (pids[k] == 0)
                opener_main(u, tid, k);
        }
        usleep((useconds_t)(next_random() % 20000));
        int killed = 0;
        for (int k = 0; k < OPEN_WRITERS; k++) {
            kill(pids[k], SIGKILL);
            int status;
            ck_assert_int_eq(waitpid(pids[k], &status, 0), pids[k]);
            ck_assert_msg(WIFSIGNALED(status) || WEXITSTATUS(status) == 0,
                          "attempt %d: writer %d failed on its own: %s", a, k,
                          describe_exit(status));
            killed += WIFSIGNALED(status);
        }
        total_killed += killed;
        convo_store *s = open_store(u);
        int found[OPEN_WRITERS];
        convo_history *h = NULL;
        convo_load_opts lo = CONVO_LOAD_OPTS_INIT;
        int rc = convo_load(s, tid, &lo, &h, NULL);
        convo_history_free(h);
        ck_assert_msg(rc == 0 || rc == CONVO_ENOTFOUND, "attempt %d: load: %s", a,
                      convo_strerror(rc));
        if (rc == 0)
            convo_history_free(verify_log(s, tid, OPEN_WRITERS, found));
        ck_assert_int_eq(append_batch(s, tid, 0, rc == 0 ? found[0] : 0), 0);
        convo_thread_delete(s, tid, NULL);
        convo_close(s);
        free(u);
    }
    printf("crash: %s: %d fresh namespaces opened by %d writers each, %d writers killed before "
           "they finished\n", driver_name, OPEN_ATTEMPTS, OPEN_WRITERS, total_killed);
}
END_TEST

/* ------------------------------------------------------------ concurrency */

static void conc_main(const char *tid, int w, int go)
{
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL);
#endif
    convo_store *s = NULL;
    int rc = convo_open(&s, url, NULL);
    char c;
    while (read(go, &c, 1) < 0 && errno == EINTR)
        ;
    int status = rc == 0 ? 0 : 10 - rc;
    for (int b = 0; status == 0 && b < CONC_BATCHES; b++) {
        if ((rc = append_batch(s, tid, w, b)) != 0) {
            status = 10 - rc;
            break;
        }
        char patch[64];
        snprintf(patch, sizeof patch, "{\"p%d_%d\":%d}", w, b, b);
        if ((rc = convo_save_extra(s, tid, patch, NULL)) != 0)
            status = 40 - rc;
    }
    convo_close(s);
    _exit(status);
}

/* N processes x M batches into one thread, each with a save_extra of its own
 * key after every batch: all batches in order, every key present. */
START_TEST(test_concurrent_processes)
{
    SKIP_IF_PRIVATE("concurrent processes");
    char tid[128];
    thread_id(tid, sizeof tid, "concurrent");
    int go[2];
    ck_assert_int_eq(pipe(go), 0);
    pid_t pids[CONC_PROCS];
    fflush(NULL);
    for (int w = 0; w < CONC_PROCS; w++) {
        pids[w] = fork();
        ck_assert_int_ge(pids[w], 0);
        if (pids[w] == 0) {
            close(go[1]);
            conc_main(tid, w, go[0]);
        }
    }
    close(go[0]);
    close(go[1]); /* every child reads EOF and starts at once */
    for (int w = 0; w < CONC_PROCS; w++) {
        int status;
        ck_assert_int_eq(waitpid(pids[w], &status, 0), pids[w]);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "process %d: %s", w,
                      describe_exit(status));
    }
    convo_store *s = open_store(url);
    int found[CONC_PROCS];
    convo_history *h = verify_log(s, tid, CONC_PROCS, found);
    for (int w = 0; w < CONC_PROCS; w++)
        ck_assert_msg(found[w] == CONC_BATCHES, "process %d: %d batches stored, want %d", w,
                      found[w], CONC_BATCHES);
    json_t *extra = json_loads(convo_history_extra(h), 0, NULL);
    ck_assert_msg(json_is_object(extra), "extra is not an object");
    for (int w = 0; w < CONC_PROCS; w++)
        for (int b = 0; b < CONC_BATCHES; b++) {
            char key[32];
            snprintf(key, sizeof key, "p%d_%d", w, b);
            json_t *v = json_object_get(extra, key);
            ck_assert_msg(json_is_integer(v) && json_integer_value(v) == b,
                          "extra key %s lost or wrong", key);
        }
    ck_assert_int_eq(json_object_size(extra), CONC_PROCS * CONC_BATCHES);
    json_decref(extra);
    convo_history_free(h);
    convo_thread_delete(s, tid, NULL);
    convo_close(s);
}
END_TEST

/* -------------------------------------------------------------------- main */

static void seed(void)
{
    unsigned char r[16] = {0};
    int fd = open("/dev/urandom", O_RDONLY);
    if (fd < 0 || read(fd, r, sizeof r) != (ssize_t)sizeof r) {
        unsigned long long x = (unsigned long long)time(NULL) ^ ((unsigned long long)getpid() << 20);
        memcpy(r, &x, sizeof x);
    }
    if (fd >= 0)
        close(fd);
    memcpy(&rng_state, r + 8, sizeof rng_state);
    const char *env = getenv("CONVO_CRASH_SEED");
    if (env && *env)
        rng_state = strtoull(env, NULL, 0);
    rng_state |= 1; /* xorshift must not start at 0 */
    snprintf(prefix, sizeof prefix, "cr%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4],
             r[5]);
}

int main(int argc, char **argv)
{
    if (argc == 2 && strcmp(argv[1], "--drivers") == 0) {
        for (const char *const *d = convo_drivers(); *d; d++)
            printf("%s\n", *d);
        return 0;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: %s URL | --drivers\n", argv[0]);
        return 2;
    }
    url = argv[1];
    seed();
    printf("crash: seed %#llx (set CONVO_CRASH_SEED to repeat the kill timings)\n", rng_state);
    convo_store *s = NULL;
    convo_error err;
    int rc = convo_open(&s, url, &err);
    if (rc == CONVO_ENOTSUP) {
        printf("crash: skipped: %s\n", err.message);
        return 77;
    }
    if (rc != 0) {
        fprintf(stderr, "crash: cannot open the store: %s\n", err.message);
        return 1;
    }
    static char name[32];
    snprintf(name, sizeof name, "%s", convo_store_driver(s));
    driver_name = name;
    private_store = strcmp(name, "memory") == 0 || strstr(url, ":memory:") != NULL;
    convo_close(s); /* no store may stay open across fork() */
    char title[64];
    snprintf(title, sizeof title, "crash %s", driver_name);
    Suite *suite = suite_create(title);
    TCase *tc = tcase_create("crash");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_kill_mid_append);
    tcase_add_test(tc, test_kill_during_first_open);
    tcase_add_test(tc, test_kill_mid_checkpoint_put);
    tcase_add_test(tc, test_kill_mid_replace);
    suite_add_tcase(suite, tc);
    tc = tcase_create("concurrency");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_concurrent_processes);
    suite_add_tcase(suite, tc);
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
