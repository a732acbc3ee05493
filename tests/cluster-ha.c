/* cluster-ha.c — the Redis driver's cluster mode on a private, real Redis Cluster
 * (scripts/redis-cluster.sh, one per test): appends from several processes while
 * a master is SIGKILLed and its replica promoted (with wait=1: every acknowledged
 * batch present exactly once; without: what is lost is reported, never a torn or
 * duplicated batch), and while slots move between masters (redis-cli --cluster
 * reshard: nothing lost or duplicated, the listing complete). Public API only.
 *
 *   tests/cluster_ha            (make check sets top_srcdir; without redis-server
 *                                and redis-cli it skips, exit 77, or fails under
 *                                CONVO_REQUIRE_ALL=1)
 */
#include <check.h>
#include <convo.h>
#include <errno.h>
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

#define WRITERS 4
#define THREADS 48          /* threads the batches cycle over: every master holds some */
#define MAX_BATCHES 100000
#define RETRY_SLEEP_MS 10
#define RETRY_ATTEMPTS 1500 /* ~15 s of retries of one batch before it is given up */
#define PHASE_TIMEOUT_MS 60000
#define WARMUP_BATCHES 20   /* per writer, before the kill or the reshard */
#define AFTER_BATCHES 40    /* per writer, after it: the writers got past it */

/* Pipe words from a writer to the parent. */
#define MSG_READY (-1)
#define ACK(b) (3 * (b))        /* batch b stored */
#define GAVE_UP(b) (3 * (b) + 1) /* batch b failed RETRY_ATTEMPTS times */
#define RETRIED(b) (3 * (b) + 2) /* one attempt of batch b failed; retried */

static char script[4096];   /* scripts/redis-cluster.sh */
static char dir[256];       /* the private cluster's files */
static char base_url[1024]; /* redis+cluster://...: the masters */
static char prefix[40];

/* ------------------------------------------------------------------ helpers */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

/* The first line of a command's output (trailing newline removed); "" on failure. */
static void command_line(const char *cmd, char *out, size_t size)
{
    out[0] = '\0';
    FILE *p = popen(cmd, "r");
    if (!p)
        return;
    if (!fgets(out, (int)size, p))
        out[0] = '\0';
    out[strcspn(out, "\r\n")] = '\0';
    pclose(p);
}

static void read_file_line(const char *path, int line, char *out, size_t size)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "sed -n '%dp' '%s'", line, path);
    command_line(cmd, out, size);
}

/* The port of node i (1-based: 1..3 masters, then their replicas at the start). */
static int node_port(int i)
{
    char path[300], line[32];
    snprintf(path, sizeof path, "%s/ports", dir);
    read_file_line(path, i, line, sizeof line);
    return atoi(line);
}

static pid_t node_pid(int i)
{
    char path[300], line[32];
    snprintf(path, sizeof path, "%s/node-%d/redis.pid", dir, i);
    read_file_line(path, 1, line, sizeof line);
    return (pid_t)atoi(line);
}

static void node_id(int port, char *out, size_t size)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "redis-cli -p %d cluster myid", port);
    command_line(cmd, out, size);
}

/* A test of a shared cluster keeps to its own keys (tests run in child processes). */
static void prefix_add(const char *suffix)
{
    size_t n = strlen(prefix);
    snprintf(prefix + n, sizeof prefix - n, "%s", suffix);
}

static void url_with(char *out, size_t size, const char *extra)
{
    snprintf(out, size, "%s?prefix=%s%s%s", base_url, prefix, extra[0] ? "&" : "", extra);
}

static void thread_id(char *buf, size_t size, int t)
{
    snprintf(buf, size, "ha/t%02d", t);
}

/* ---------------------------------------------------- cluster per test case */

/* Replicas per master. wait=1 needs two: after the failover the promoted
 * replica must itself have a replica, or WAIT 1 can never be satisfied again
 * and every write to its slots fails with CONVO_ETIMEOUT (docs/redis.md). */
static int replicas = 1;

static void cluster_start(void)
{
    const char *src = getenv("top_srcdir");
    snprintf(script, sizeof script, "%s/scripts/redis-cluster.sh", src && *src ? src : ".");
    snprintf(dir, sizeof dir, "%s/convo-cluster-ha.XXXXXX", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        exit(1);
    }
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' start '%s' 3 %d", script, dir, replicas);
    if (system(cmd) != 0) {
        fprintf(stderr, "cluster-ha: could not start a cluster: %s\n", cmd);
        exit(1);
    }
    char path[300];
    snprintf(path, sizeof path, "%s/url", dir);
    read_file_line(path, 1, base_url, sizeof base_url);
    unsigned char r[6];
    FILE *f = fopen("/dev/urandom", "rb");
    if (!f || fread(r, 1, sizeof r, f) != sizeof r)
        memset(r, 7, sizeof r);
    if (f)
        fclose(f);
    snprintf(prefix, sizeof prefix, "ha%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2], r[3], r[4],
             r[5]);
}

static void cluster_start_two_replicas(void)
{
    replicas = 2;
    cluster_start();
    replicas = 1;
}

static void cluster_stop(void)
{
    char cmd[8192];
    if (getenv("CONVO_CLUSTER_HA_KEEP")) {
        printf("cluster-ha: cluster files kept in %s\n", dir);
        snprintf(cmd, sizeof cmd, "'%s' stop '%s'", script, dir);
    } else {
        snprintf(cmd, sizeof cmd, "'%s' stop '%s'; rm -rf '%s'", script, dir, dir);
    }
    if (system(cmd) != 0)
        fprintf(stderr, "cluster-ha: stopping the cluster failed\n");
}

/* ------------------------------------------------------------------ writers */

/* Whether writers give each batch an idempotency key (a retried attempt then
 * stores it once); without, no attempt may fail. */
static int writers_use_keys = 1;

static int batch_size(int w, int b)
{
    return 1 + (w * 7 + b * 5) % 4;
}

static void write_word(int fd, int v)
{
    while (write(fd, &v, sizeof v) < 0 && errno == EINTR)
        ;
}

/* Appends batches b = 0, 1, ... to thread b % THREADS until stopfd reports
 * EOF, retrying a failed batch with its idempotency key; every outcome is
 * written to fd. */
static void writer_main(const char *u, int w, int stopfd, int fd)
{
#ifdef __linux__
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a failed test */
#endif
    convo_store *s = NULL;
    int rc = convo_open(&s, u, NULL);
    if (rc != 0)
        _exit(10 - rc);
    write_word(fd, MSG_READY);
    for (int b = 0; b < MAX_BATCHES; b++) {
        struct pollfd p = {stopfd, POLLIN, 0};
        if (poll(&p, 1, 0) > 0)
            break;
        int n = batch_size(w, b);
        char msgs[4][128];
        const char *ptrs[4];
        for (int i = 0; i < n; i++) {
            snprintf(msgs[i], sizeof msgs[i],
                     "{\"role\":\"user\",\"w\":%d,\"b\":%d,\"i\":%d,\"n\":%d}", w, b, i, n);
            ptrs[i] = msgs[i];
        }
        char tid[64], key[64];
        thread_id(tid, sizeof tid, b % THREADS);
        snprintf(key, sizeof key, "w%d-b%d", w, b);
        convo_append_opts o = CONVO_APPEND_OPTS_INIT;
        o.idempotency_key = writers_use_keys ? key : NULL;
        int attempt;
        for (attempt = 0; attempt < RETRY_ATTEMPTS; attempt++) {
            convo_append_result res;
            rc = convo_append(s, tid, ptrs, NULL, (size_t)n, &o, &res, NULL);
            if (rc == 0 && res.count == (size_t)n)
                break;
            write_word(fd, RETRIED(b));
            sleep_ms(RETRY_SLEEP_MS);
        }
        write_word(fd, attempt < RETRY_ATTEMPTS ? ACK(b) : GAVE_UP(b));
    }
    convo_close(s);
    _exit(0);
}

typedef struct writer {
    pid_t pid;
    int fd;
    int ready;
    int acked;      /* batches acknowledged */
    int gave_up;    /* batches given up */
    int retries;    /* failed attempts */
    unsigned char state[MAX_BATCHES]; /* 0 none, 1 acked, 2 given up */
} writer;

static writer writers[WRITERS];
static int stop_pipe[2];

static void start_writers(const char *u)
{
    ck_assert_int_eq(pipe(stop_pipe), 0);
    for (int w = 0; w < WRITERS; w++) {
        int p[2];
        ck_assert_int_eq(pipe(p), 0);
        fflush(NULL);
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) {
            close(p[0]);
            close(stop_pipe[1]);
            for (int k = 0; k < w; k++)
                close(writers[k].fd);
            writer_main(u, w, stop_pipe[0], p[1]);
        }
        close(p[1]);
        memset(&writers[w], 0, sizeof writers[w]);
        writers[w].pid = pid;
        writers[w].fd = p[0];
    }
    close(stop_pipe[0]);
}

/* Reads every writer's pipe for up to ms milliseconds; returns early once
 * done() says so. A writer at EOF has fd -1. */
static void pump(int ms, int (*done)(void *), void *arg)
{
    int64_t end = now_ms() + ms;
    for (;;) {
        if (done && done(arg))
            return;
        int64_t left = end - now_ms();
        if (left <= 0)
            return;
        struct pollfd p[WRITERS];
        int np = 0;
        for (int w = 0; w < WRITERS; w++)
            p[w] = (struct pollfd){writers[w].fd, POLLIN, 0}, np += writers[w].fd >= 0;
        if (np == 0)
            return;
        int r = poll(p, WRITERS, (int)(left < 100 ? left : 100));
        if (r < 0 && errno != EINTR)
            ck_abort_msg("poll: %s", strerror(errno));
        for (int w = 0; w < WRITERS; w++) {
            if (writers[w].fd < 0 || !(p[w].revents & (POLLIN | POLLHUP)))
                continue;
            int v;
            ssize_t got = read(writers[w].fd, &v, sizeof v);
            if (got <= 0) {
                close(writers[w].fd);
                writers[w].fd = -1;
                continue;
            }
            if (v == MSG_READY)
                writers[w].ready = 1;
            else if (v % 3 == 0)
                writers[w].state[v / 3] = 1, writers[w].acked++;
            else if (v % 3 == 1)
                writers[w].state[v / 3] = 2, writers[w].gave_up++;
            else
                writers[w].retries++;
        }
    }
}

static int all_acked_at_least(void *arg)
{
    const int *want = arg;
    for (int w = 0; w < WRITERS; w++)
        if (writers[w].acked < want[w])
            return 0;
    return 1;
}

/* Pumps until every writer has acknowledged `more` batches beyond now. */
static void wait_progress(int more, const char *what)
{
    int want[WRITERS];
    for (int w = 0; w < WRITERS; w++)
        want[w] = writers[w].acked + more;
    pump(PHASE_TIMEOUT_MS, all_acked_at_least, want);
    for (int w = 0; w < WRITERS; w++)
        ck_assert_msg(writers[w].acked >= want[w],
                      "%s: writer %d acknowledged %d batches, %d expected within %d ms "
                      "(%d retries, %d given up)",
                      what, w, writers[w].acked, want[w], PHASE_TIMEOUT_MS, writers[w].retries,
                      writers[w].gave_up);
}

static void stop_writers(void)
{
    close(stop_pipe[1]);
    pump(PHASE_TIMEOUT_MS, NULL, NULL);
    for (int w = 0; w < WRITERS; w++) {
        ck_assert_msg(writers[w].fd < 0, "writer %d did not stop", w);
        int status;
        ck_assert_int_eq(waitpid(writers[w].pid, &status, 0), writers[w].pid);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0,
                      "writer %d ended with status 0x%x (10 + n: open failed with -n)", w,
                      status);
    }
}

/* ------------------------------------------------------------- the checker */

typedef struct tally {
    int acked, lost;        /* acknowledged batches; of them, absent */
    int unacked_present;    /* given-up batches stored anyway (at most once) */
    int listed_missing;     /* threads with messages the listing lacks */
} tally;

static int json_int(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);
    return json_is_integer(v) ? (int)json_integer_value(v) : -1;
}

/* Loads every thread: seq dense from 0, every batch whole and contiguous, no
 * batch twice, a writer's batches in increasing order within a thread. Then
 * counts the acknowledged batches absent, and checks the listing. */
static tally verify(const char *u)
{
    static unsigned char seen[WRITERS][MAX_BATCHES];
    memset(seen, 0, sizeof seen);
    convo_store *s = NULL;
    convo_error err;
    int rc = convo_open(&s, u, &err);
    ck_assert_msg(rc == 0, "open %s: %s", u, err.message);
    int present[THREADS] = {0};
    for (int t = 0; t < THREADS; t++) {
        char tid[64];
        thread_id(tid, sizeof tid, t);
        convo_history *h = NULL;
        rc = convo_load(s, tid, NULL, &h, &err);
        if (rc == CONVO_ENOTFOUND)
            continue;
        ck_assert_msg(rc == 0, "load %s: %s: %s", tid, convo_strerror(rc), err.message);
        size_t count = convo_history_count(h);
        present[t] = count > 0;
        int last_b[WRITERS];
        for (int w = 0; w < WRITERS; w++)
            last_b[w] = -1;
        int w = -1, b = -1, n = 0, next_i = 0;
        for (size_t k = 0; k < count; k++) {
            ck_assert_msg(convo_history_seq(h, k) == (int64_t)k, "%s: seq %lld at position %zu",
                          tid, (long long)convo_history_seq(h, k), k);
            size_t len;
            const char *text = convo_history_message(h, k, &len);
            json_t *m = json_loadb(text, len, 0, NULL);
            ck_assert_msg(json_is_object(m), "%s: seq %zu is not an object", tid, k);
            int mw = json_int(m, "w"), mb = json_int(m, "b"), mi = json_int(m, "i");
            int mn = json_int(m, "n");
            json_decref(m);
            if (next_i == 0) {
                ck_assert_msg(mi == 0, "%s: seq %zu: batch (w %d, b %d) starts at index %d: torn",
                              tid, k, mw, mb, mi);
                ck_assert_msg(mw >= 0 && mw < WRITERS && mb >= 0 && mb < MAX_BATCHES &&
                                  mb % THREADS == t,
                              "%s: seq %zu: foreign batch (w %d, b %d)", tid, k, mw, mb);
                ck_assert_msg(!seen[mw][mb], "%s: seq %zu: batch (w %d, b %d) stored twice", tid,
                              k, mw, mb);
                ck_assert_msg(mb > last_b[mw], "%s: seq %zu: writer %d's batch %d after %d", tid,
                              k, mw, mb, last_b[mw]);
                ck_assert_msg(mn == batch_size(mw, mb), "%s: batch size %d, want %d", tid, mn,
                              batch_size(mw, mb));
                seen[mw][mb] = 1;
                last_b[mw] = mb;
                w = mw, b = mb, n = mn;
            } else {
                ck_assert_msg(mw == w && mb == b && mi == next_i,
                              "%s: seq %zu: (w %d, b %d, i %d) inside batch (w %d, b %d): torn or "
                              "interleaved", tid, k, mw, mb, mi, w, b);
            }
            if (++next_i == n)
                next_i = 0;
        }
        ck_assert_msg(next_i == 0, "%s: the log ends inside batch (w %d, b %d)", tid, w, b);
        convo_history_free(h);
    }
    tally r = {0};
    for (int w = 0; w < WRITERS; w++)
        for (int b = 0; b < MAX_BATCHES; b++) {
            if (writers[w].state[b] == 1) {
                r.acked++;
                r.lost += !seen[w][b];
            } else if (writers[w].state[b] == 2) {
                r.unacked_present += seen[w][b];
            } else {
                ck_assert_msg(!seen[w][b], "batch (w %d, b %d) stored but never attempted", w, b);
            }
        }
    /* the listing, page by page, small pages */
    int listed[THREADS] = {0};
    char after[128] = "";
    int pages = 0;
    for (;;) {
        convo_thread_page *p = NULL;
        rc = convo_thread_list(s, after[0] ? after : NULL, 5, &p, &err);
        ck_assert_msg(rc == 0, "threads: %s: %s", convo_strerror(rc), err.message);
        for (size_t i = 0; i < convo_thread_page_count(p); i++) {
            const char *id = convo_thread_page_id(p, i);
            int t = -1;
            ck_assert_msg(sscanf(id, "ha/t%d", &t) == 1 && t >= 0 && t < THREADS,
                          "unknown thread %s listed", id);
            ck_assert_msg(!listed[t], "thread %s listed twice", id);
            if (after[0])
                ck_assert_msg(strcmp(id, after) > 0, "thread %s listed after %s", id, after);
            listed[t] = 1;
            snprintf(after, sizeof after, "%s", id);
        }
        const char *next = convo_thread_page_next(p);
        int more = next != NULL;
        if (more)
            snprintf(after, sizeof after, "%s", next);
        convo_thread_page_free(p);
        ck_assert_msg(++pages < 100, "threads: more than 100 pages");
        if (!more)
            break;
    }
    for (int t = 0; t < THREADS; t++)
        r.listed_missing += present[t] && !listed[t];
    convo_close(s);
    return r;
}

static void report(const char *what, tally r)
{
    int retries = 0, gave_up = 0;
    for (int w = 0; w < WRITERS; w++)
        retries += writers[w].retries, gave_up += writers[w].gave_up;
    printf("cluster-ha: %s: %d acknowledged batches, %d lost; %d failed attempts retried, %d "
           "batches given up (%d of them stored); %d threads missing from the listing\n",
           what, r.acked, r.lost, retries, gave_up, r.unacked_present, r.listed_missing);
    fflush(stdout);
}

/* ----------------------------------------------------------------- failover */

static void failover(int wait)
{
    char u[1400], plain[1400];
    url_with(u, sizeof u, wait ? "wait=1&wait_timeout=2000" : "");
    url_with(plain, sizeof plain, "");
    start_writers(u);
    wait_progress(WARMUP_BATCHES, "before the kill");
    pid_t victim = node_pid(1);
    ck_assert_msg(victim > 0, "no pid for node 1");
    ck_assert_int_eq(kill(victim, SIGKILL), 0);
    int64_t killed = now_ms();
    /* the writers must get past the dead master's slots: its replica took over */
    wait_progress(AFTER_BATCHES, "after the kill");
    printf("cluster-ha: master 1 (port %d) SIGKILLed; every writer %d batches further after "
           "%lld ms\n", node_port(1), AFTER_BATCHES, (long long)(now_ms() - killed));
    stop_writers();
    /* the cluster is whole again: the replica took the dead master's slots */
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' wait '%s'", script, dir);
    ck_assert_msg(system(cmd) == 0, "the cluster did not recover: %s", cmd);
    tally r = verify(plain);
    report(wait ? "failover with wait=1" : "failover without wait", r);
    ck_assert_int_gt(r.acked, 0);
    for (int w = 0; w < WRITERS; w++)
        ck_assert_msg(writers[w].gave_up == 0, "writer %d gave up %d batches", w,
                      writers[w].gave_up);
    if (wait) {
        ck_assert_msg(r.lost == 0, "wait=1: %d of %d acknowledged batches lost", r.lost, r.acked);
        ck_assert_msg(r.listed_missing == 0, "wait=1: %d threads missing from the listing",
                      r.listed_missing);
    }
}

START_TEST(test_failover_wait)
{
    failover(1);
}
END_TEST

START_TEST(test_failover_no_wait)
{
    failover(0);
}
END_TEST

/* After the failover: every node but master 2 killed, so the cluster is down
 * for good. An operation fails within timeout with one line saying why: what
 * the live node answers (CLUSTERDOWN) or which node refused; it said "no master
 * for a slot", or named only the URL's seeds. */
START_TEST(test_cluster_down)
{
    for (int i = 1; i <= 6; i++)
        if (i != 2 && node_pid(i) > 0)
            kill(node_pid(i), SIGKILL);
    char cmd[128], state[64] = "";
    snprintf(cmd, sizeof cmd, "redis-cli -p %d cluster info | grep cluster_state", node_port(2));
    for (int n = 0; n < 100 && !strstr(state, "fail"); n++) {
        sleep_ms(100);
        command_line(cmd, state, sizeof state);
    }
    ck_assert_msg(strstr(state, "fail"), "node 2 still says %s", state);
    char u[1400];
    url_with(u, sizeof u, "timeout=1500");
    convo_store *s = NULL;
    convo_error err;
    int64_t t0 = now_ms();
    int rc = convo_open(&s, u, &err);
    if (rc == 0) {
        convo_history *h = NULL;
        rc = convo_load(s, "ha/t00", NULL, &h, &err);
        convo_history_free(h);
    }
    convo_close(s);
    printf("cluster-ha: cluster down: %d after %lld ms: %s\n", rc, (long long)(now_ms() - t0),
           err.message);
    ck_assert_int_ne(rc, 0);
    const char *node = strstr(err.message, "127.0.0.1:"), *url = strstr(err.message, " (");
    ck_assert_msg(strstr(err.message, "CLUSTERDOWN") || (node && url && node < url),
                  "the error does not say why: %s", err.message);
    ck_assert_msg(!strchr(err.message, '\n'), "not one line: %s", err.message);
}
END_TEST

/* --------------------------------------------------------------- resharding */

static pid_t run_background(const char *cmd)
{
    fflush(NULL);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        for (int w = 0; w < WRITERS; w++)
            if (writers[w].fd >= 0)
                close(writers[w].fd);
        close(stop_pipe[1]);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static int child_done(void *arg)
{
    pid_t *pid = arg;
    int status;
    if (*pid > 0 && waitpid(*pid, &status, WNOHANG) == *pid) {
        *pid = -(WIFEXITED(status) ? WEXITSTATUS(status) : 128) - 1;
        return 1;
    }
    return *pid < 0;
}

/* Runs cmd in the background while the writers go on; its output goes to
 * DIR/log_name, whose last line is copied to last. */
static void during_writes(const char *cmd, const char *log_name, char *last, size_t size)
{
    char full[4096];
    snprintf(full, sizeof full, "(%s) >'%s/%s' 2>&1", cmd, dir, log_name);
    int64_t start = now_ms();
    pid_t pid = run_background(full);
    pump(180000, child_done, &pid);
    snprintf(full, sizeof full, "tail -n 1 '%s/%s'", dir, log_name);
    command_line(full, last, size);
    ck_assert_msg(pid == -1, "%s: failed (status %d) or took over 180 s: %s", cmd, -pid - 1,
                  last);
    printf("cluster-ha: %s (%lld ms)\n", last, (long long)(now_ms() - start));
    fflush(stdout);
}

/* Moves the slots of master `from` that hold this test's keys to master `to`,
 * key by key (tests/cluster-move-slots.sh: ASK and TRYAGAIN on the way). */
static void move_key_slots(int from, int to)
{
    const char *src = getenv("top_srcdir");
    char cmd[2048], log_name[64];
    snprintf(cmd, sizeof cmd, "sh '%s/tests/cluster-move-slots.sh' %d %d '*%s*'",
             src && *src ? src : ".", node_port(from), node_port(to), prefix);
    snprintf(log_name, sizeof log_name, "move-%d-%d.log", from, to);
    char last[256];
    during_writes(cmd, log_name, last, sizeof last);
    int moved = 0;
    ck_assert_msg(sscanf(last, "%d slots moved", &moved) == 1 && moved > 0,
                  "master %d held none of this test's keys to move: %s", from, last);
}

/* redis-cli --cluster reshard: `slots` slots of master `from` to master `to`. */
static void reshard(int from, int to, int slots)
{
    char src[64], dst[64], cmd[1024], log_name[64];
    node_id(node_port(from), src, sizeof src);
    node_id(node_port(to), dst, sizeof dst);
    ck_assert_msg(src[0] && dst[0], "no node ids");
    snprintf(cmd, sizeof cmd,
             "redis-cli --cluster reshard 127.0.0.1:%d --cluster-from %s --cluster-to %s "
             "--cluster-slots %d --cluster-yes --cluster-pipeline 5 && echo %d slots moved by "
             "redis-cli --cluster reshard", node_port(to), src, dst, slots, slots);
    snprintf(log_name, sizeof log_name, "reshard-%d-%d.log", from, to);
    char last[256];
    during_writes(cmd, log_name, last, sizeof last);
}

START_TEST(test_reshard)
{
    char u[1400];
    url_with(u, sizeof u, "");
    start_writers(u);
    wait_progress(WARMUP_BATCHES, "before resharding");
    /* every slot holding a key of this test moves at least once, and back: a
     * master never loses all its slots (it would become a replica) */
    move_key_slots(1, 2);
    move_key_slots(2, 3);
    move_key_slots(3, 1);
    reshard(3, 2, 500);
    wait_progress(AFTER_BATCHES / 4, "after resharding");
    stop_writers();
    tally r = verify(u);
    report("live resharding", r);
    ck_assert_int_gt(r.acked, 0);
    ck_assert_msg(r.lost == 0, "%d of %d acknowledged batches lost", r.lost, r.acked);
    for (int w = 0; w < WRITERS; w++)
        ck_assert_msg(writers[w].gave_up == 0, "writer %d gave up %d batches", w,
                      writers[w].gave_up);
    ck_assert_msg(r.listed_missing == 0, "%d threads missing from the listing", r.listed_missing);
}
END_TEST

/* ------------------------------------------------------ WAIT and a retry */

static void replicas_signal(int sig)
{
    for (int i = 4; i <= 6; i++) { /* 3 x 1: nodes 4..6 are the replicas */
        pid_t pid = node_pid(i);
        ck_assert_msg(pid > 0 && kill(pid, sig) == 0, "signal %d to node %d", sig, i);
    }
}

/* One attempt of the batch with key k1 (the same each time) from store s;
 * returns its code, *res its result. */
static int wait_attempt(convo_store *s, convo_append_result *res, convo_error *err)
{
    const char *msgs[] = {"{\"role\":\"user\",\"i\":0}", "{\"role\":\"user\",\"i\":1}"};
    convo_append_opts o = CONVO_APPEND_OPTS_INIT;
    o.idempotency_key = "k1";
    *res = (convo_append_result){0};
    return convo_append(s, "ha/wait", msgs, NULL, 2, &o, res, err);
}

/* wait=1 with every replica stopped (SIGSTOP): the append times out (written
 * on the master, not acknowledged). Its retry with the same idempotency key
 * finds the batch stored and writes nothing, but must not be acknowledged
 * before a replica has the batch: from the same store and from a new one (a
 * fresh connection, as after a restart), it times out too while the replicas
 * are stopped; once they run again it succeeds as a replay of the same range,
 * stored once. (Redis's WAIT covers all the master applied before the
 * client's last command, not only that client's writes: docs/redis.md.) */
START_TEST(test_wait_retry)
{
    /* 300 ms while the replicas are stopped; with them running, a replica busy
     * after the earlier cases (or a loaded machine) gets 20 s to acknowledge */
    char u[1400], patient[1400];
    prefix_add("r");
    url_with(u, sizeof u, "wait=1&wait_timeout=300");
    url_with(patient, sizeof patient, "wait=1&wait_timeout=20000&timeout=30000");
    convo_store *s = NULL, *s2 = NULL, *s3 = NULL, *warm_store = NULL;
    convo_error err, err2, err3;
    convo_append_result first, same, fresh, after;
    ck_assert_int_eq(convo_open(&warm_store, patient, &err), 0);
    convo_append_result warm;
    const char *one = "{\"role\":\"system\"}";
    ck_assert_msg(convo_append(warm_store, "ha/wait", &one, NULL, 1, NULL, &warm, &err) == 0,
                  "append with the replicas running: %s", err.message);
    convo_close(warm_store);
    ck_assert_int_eq(convo_open(&s, u, &err), 0);
    replicas_signal(SIGSTOP);
    int rc1 = wait_attempt(s, &first, &err);
    int rc2 = wait_attempt(s, &same, &err2);
    int rc3 = convo_open(&s2, u, &err3);
    if (rc3 == 0)
        rc3 = wait_attempt(s2, &fresh, &err3);
    replicas_signal(SIGCONT);
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "'%s' wait '%s'", script, dir);
    ck_assert_msg(system(cmd) == 0, "the cluster did not recover: %s", cmd);
    ck_assert_msg(rc1 == CONVO_ETIMEOUT, "first attempt: %s (%s)", convo_strerror(rc1),
                  rc1 ? err.message : "acknowledged with every replica stopped");
    ck_assert_msg(rc2 == CONVO_ETIMEOUT, "retry on the same store: %s (%s)", convo_strerror(rc2),
                  rc2 ? err2.message : "acknowledged with every replica stopped");
    ck_assert_msg(rc3 == CONVO_ETIMEOUT, "retry on a new store: %s (%s)", convo_strerror(rc3),
                  rc3 ? err3.message : "acknowledged with every replica stopped");
    ck_assert_int_eq(convo_open(&s3, patient, &err), 0);
    int rc4 = wait_attempt(s3, &after, &err);
    ck_assert_msg(rc4 == 0, "retry with the replicas back: %s", err.message);
    ck_assert_msg(after.replayed && after.first_seq == 1 && after.count == 2,
                  "retry: first %lld count %zu replayed %d", (long long)after.first_seq,
                  after.count, after.replayed);
    convo_history *h = NULL;
    ck_assert_int_eq(convo_load(s3, "ha/wait", NULL, &h, &err), 0);
    ck_assert_msg(convo_history_count(h) == 3, "%zu messages, want 3 (the batch once)",
                  convo_history_count(h));
    convo_history_free(h);
    convo_close(s);
    convo_close(s2);
    convo_close(s3);
}
END_TEST

/* ----------------------------------------------------------------- NOSCRIPT */

/* A number from the INFO SECTION of the node on port: the digits after
 * "NAME" (up to its '=' or ':'); 0 when absent. */
static long info_number(int port, const char *section, const char *name)
{
    char cmd[512], line[64];
    snprintf(cmd, sizeof cmd,
             "redis-cli -p %d info %s | tr -d '\\r' | sed -n 's/^%s[=:]\\([0-9]*\\).*/\\1/p'",
             port, section, name);
    command_line(cmd, line, sizeof line);
    return atol(line);
}

/* NOSCRIPT errors the node has answered since it started. */
static long noscripts(int port)
{
    return info_number(port, "errorstats", "errorstat_NOSCRIPT:count");
}

static void script_flush(int port)
{
    char cmd[128], out[64];
    snprintf(cmd, sizeof cmd, "redis-cli -p %d script flush", port);
    command_line(cmd, out, sizeof out);
    ck_assert_msg(strcmp(out, "OK") == 0, "%s: %s", cmd, out);
}

/* SCRIPT FLUSH on master 1 while four processes append without idempotency
 * keys, with ttl (so every append runs the append script): the driver meets
 * NOSCRIPT, runs the script again with EVAL, and no batch is lost or stored
 * twice (verify()); no attempt fails. */
START_TEST(test_noscript_during_appends)
{
    char u[1400];
    prefix_add("w");
    url_with(u, sizeof u, "ttl=3600000");
    int port = node_port(1);
    long before = noscripts(port);
    writers_use_keys = 0;
    start_writers(u);
    wait_progress(WARMUP_BATCHES, "before SCRIPT FLUSH");
    for (int i = 0; i < 5; i++) {
        long seen = noscripts(port);
        script_flush(port);
        /* until a writer met the empty cache (the next batches may miss master 1) */
        for (int k = 0; k < PHASE_TIMEOUT_MS / 100 && noscripts(port) == seen; k++)
            pump(100, NULL, NULL);
        ck_assert_msg(noscripts(port) > seen, "no NOSCRIPT after flush %d", i + 1);
        wait_progress(5, "after SCRIPT FLUSH");
    }
    stop_writers();
    long met = noscripts(port) - before;
    long cached = info_number(port, "memory", "number_of_cached_scripts"); /* by the writers */
    tally r = verify(u);
    report("SCRIPT FLUSH on master 1 during appends", r);
    printf("cluster-ha: master 1 answered NOSCRIPT %ld times; %ld scripts cached again\n", met,
           cached);
    ck_assert_msg(met >= 5, "master 1 answered NOSCRIPT %ld times after 5 flushes", met);
    ck_assert_msg(cached > 0, "master 1 has no script cached again");
    ck_assert_int_gt(r.acked, 0);
    ck_assert_msg(r.lost == 0, "%d of %d acknowledged batches lost", r.lost, r.acked);
    for (int w = 0; w < WRITERS; w++)
        ck_assert_msg(writers[w].retries == 0 && writers[w].gave_up == 0,
                      "writer %d: %d failed attempts (NOSCRIPT must not fail a call)", w,
                      writers[w].retries);
}
END_TEST

/* After SCRIPT FLUSH on master 1, each kind of script call on every thread:
 * an idempotent retry is still a replay of the original range, save_extra
 * and a conditional append are applied once. */
START_TEST(test_noscript_each_call)
{
    char u[1400];
    prefix_add("e");
    url_with(u, sizeof u, "");
    int port = node_port(1);
    long before = noscripts(port);
    convo_store *s = NULL;
    convo_error err;
    ck_assert_int_eq(convo_open(&s, u, &err), 0);
    const char *msg = "{\"role\":\"user\",\"k\":0}";
    const char *next = "{\"role\":\"user\",\"k\":1}";
    for (int round = 0; round < 4; round++) {
        if (round > 0)
            script_flush(port);
        for (int t = 0; t < THREADS; t++) {
            char tid[64], key[32], patch[32];
            thread_id(tid, sizeof tid, t);
            snprintf(key, sizeof key, "first-%d", t);
            convo_append_opts o = CONVO_APPEND_OPTS_INIT;
            convo_append_result res = {0};
            int rc;
            if (round < 2) { /* the first append, then its retry */
                o.idempotency_key = key;
                rc = convo_append(s, tid, &msg, NULL, 1, &o, &res, &err);
                ck_assert_msg(rc == 0, "%s round %d: %s", tid, round, err.message);
                ck_assert_msg(res.first_seq == 0 && res.count == 1 && res.replayed == (round == 1),
                              "%s round %d: first %lld count %zu replayed %d", tid, round,
                              (long long)res.first_seq, res.count, (int)res.replayed);
            } else if (round == 2) {
                snprintf(patch, sizeof patch, "{\"x\":%d}", t);
                rc = convo_save_extra(s, tid, patch, &err);
                ck_assert_msg(rc == 0, "%s: save_extra: %s", tid, err.message);
            } else {
                o.expected_length = 1;
                rc = convo_append(s, tid, &next, NULL, 1, &o, &res, &err);
                ck_assert_msg(rc == 0 && res.first_seq == 1, "%s: conditional append: %s", tid,
                              rc ? err.message : "bad first seq");
            }
        }
    }
    ck_assert_msg(noscripts(port) - before >= 3, "master 1 answered NOSCRIPT %ld times",
                  noscripts(port) - before);
    for (int t = 0; t < THREADS; t++) {
        char tid[64], want[32];
        thread_id(tid, sizeof tid, t);
        convo_history *h = NULL;
        ck_assert_int_eq(convo_load(s, tid, NULL, &h, &err), 0);
        ck_assert_msg(convo_history_count(h) == 2, "%s: %zu messages, want 2", tid,
                      convo_history_count(h));
        size_t len;
        const char *m0 = convo_history_message(h, 0, &len);
        ck_assert(len == strlen(msg) && memcmp(m0, msg, len) == 0);
        const char *m1 = convo_history_message(h, 1, &len);
        ck_assert(len == strlen(next) && memcmp(m1, next, len) == 0);
        snprintf(want, sizeof want, "{\"x\":%d}", t);
        const char *extra = convo_history_extra(h);
        ck_assert_msg(extra && strcmp(extra, want) == 0, "%s: extra %s, want %s", tid,
                      extra ? extra : "(none)", want);
        convo_history_free(h);
    }
    convo_close(s);
}
END_TEST

/* -------------------------------------------------------------------- main */

int main(void)
{
    /* the clusters are started here: only the Redis programs may be missing */
    if (system("command -v redis-server >/dev/null && command -v redis-cli >/dev/null") != 0) {
        const char *all = getenv("CONVO_REQUIRE_ALL");
        int required = all && strcmp(all, "1") == 0;
        printf("cluster-ha: %s: redis-server or redis-cli is not on PATH "
               "(scripts/install-deps.sh)%s\n", required ? "FAIL" : "skipped",
               required ? ", but CONVO_REQUIRE_ALL=1" : "");
        return required ? 1 : 77;
    }
    Suite *suite = suite_create("redis cluster failover and resharding");
    TCase *tc = tcase_create("failover wait=1");
    tcase_add_test(tc, test_failover_wait);
    suite_add_tcase(suite, tc);
    TCase *tc2 = tcase_create("failover");
    tcase_add_test(tc2, test_failover_no_wait);
    tcase_add_test(tc2, test_cluster_down); /* kills the cluster: last */
    suite_add_tcase(suite, tc2);
    TCase *tc3 = tcase_create("resharding");
    /* NOSCRIPT first, on the same cluster: master 1 still has its slots */
    tcase_add_test(tc3, test_wait_retry);
    tcase_add_test(tc3, test_noscript_each_call);
    tcase_add_test(tc3, test_noscript_during_appends);
    tcase_add_test(tc3, test_reshard);
    suite_add_tcase(suite, tc3);
    TCase *all[] = {tc, tc2, tc3};
    for (int i = 0; i < 3; i++) { /* a fresh cluster for each */
        tcase_add_unchecked_fixture(all[i], i == 0 ? cluster_start_two_replicas : cluster_start,
                                    cluster_stop);
        tcase_set_timeout(all[i], 600);
    }
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
