/* bench.c — `convo bench`: plays one scenario against a store and reports
 * throughput and latency, next to the backend's own raw primitive measured in
 * the same run (ratio = convo / raw). Public API only. */
#include "bench.h"
#include <convo.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct bench_opts {
    const char *scenario;
    size_t threads, messages, turns, prefill, payload;
    size_t count, users, pages; /* the threads scenario */
    int json;
    int put_log; /* conversation: each turn is one checkpoint put with its message */
    int graph;   /* conversation: 3 checkpoints and 2 pending writes a turn (bench_graph.c) */
    int raw_each; /* append, 1 client: one raw op right after each append */
} bench_opts;

typedef struct client {
    convo_store *store;
    const bench_opts *o;
    size_t id, ops;
    double *lat_us; /* one per op */
    char thread[96];
    int rc;
    convo_error err;
    int interleave;  /* measure the raw primitive in blocks between our own */
    double raw_secs;
    size_t raw_ops;
    double *raw_block_secs; /* interleave: each raw block's time, by block */
    double *raw_us;         /* interleave: one raw op right after each of ours */
    double append_secs, pop_secs; /* pop: the two halves of each round trip */
    double *append_us, *pop_us;   /* pop: each half of each round trip */
} client;

#define RAW_BLOCK 250

static char run_id[32];

const char *bench_run_id(void)
{
    return run_id;
}
static volatile size_t progress_done;

double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void bench_progress(const char *what, size_t done, size_t total)
{
    static double last;
    static int tty = -1; /* asked once: a system call between timed calls would weigh on them */
    int is_tty = __atomic_load_n(&tty, __ATOMIC_RELAXED);
    if (is_tty < 0)
        __atomic_store_n(&tty, is_tty = isatty(2), __ATOMIC_RELAXED);
    if (!is_tty)
        return;
    double t = bench_now();
    if (done < total && t - last < 0.2)
        return;
    last = t;
    fprintf(stderr, "\r%s: %zu/%zu%s", what, done, total, done >= total ? "\n" : "   ");
}

/* Poorly compressible, realistic-looking text: random words from a wide vocabulary. */
static void realistic_text(char *buf, size_t len, unsigned *seed)
{
    static const char letters[] = "etaoinshrdlcumwfgypbvkjxqz";
    size_t i = 0;
    while (i + 1 < len) {
        size_t w = 2 + (size_t)(rand_r(seed) % 9);
        for (size_t k = 0; k < w && i + 1 < len; k++)
            buf[i++] = letters[(rand_r(seed) % 26 + rand_r(seed) % 26) / 2 % 26];
        if (i + 1 < len)
            buf[i++] = rand_r(seed) % 12 == 0 ? '.' : ' ';
    }
    buf[i] = '\0';
}

char *bench_message(const char *role, size_t payload, unsigned *seed)
{
    char *text = malloc(payload + 1);
    char *msg = malloc(payload + 64);
    realistic_text(text, payload + 1, seed);
    snprintf(msg, payload + 64, "{\"role\":\"%s\",\"content\":\"%s\"}", role, text);
    free(text);
    return msg;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int prefill(convo_store *s, const char *thread, size_t n, size_t payload, convo_error *err)
{
    unsigned seed = 7;
    size_t batch = 1000;
    char **msgs = calloc(batch, sizeof *msgs);
    int rc = 0;
    for (size_t i = 0; i < batch; i++)
        msgs[i] = bench_message(i % 2 ? "assistant" : "user", payload, &seed);
    for (size_t done = 0; done < n && rc == 0; done += batch) {
        size_t k = n - done < batch ? n - done : batch;
        rc = convo_append(s, thread, (const char *const *)msgs, NULL, k, NULL, NULL, err);
        bench_progress("prefill", done + k, n);
    }
    for (size_t i = 0; i < batch; i++)
        free(msgs[i]);
    free(msgs);
    return rc;
}

/* pop: append one message, then remove it again with convo_replace_tail on
 * the length the append left (one round trip each); each half timed apart. */
static int append_then_pop(client *c, size_t op, const char *msg)
{
    convo_append_result ar;
    double t0 = bench_now();
    int rc = convo_append(c->store, c->thread, &msg, NULL, 1, NULL, &ar, &c->err);
    double t1 = bench_now();
    if (rc != 0)
        return rc;
    convo_rewrite_opts ro = CONVO_REWRITE_OPTS_INIT;
    ro.expected_length = ar.first_seq + 1;
    rc = convo_replace_tail(c->store, c->thread, ar.first_seq, NULL, NULL, 0, &ro, NULL, &c->err);
    double t2 = bench_now();
    c->append_secs += t1 - t0;
    c->pop_secs += t2 - t1;
    c->append_us[op] = (t1 - t0) * 1e6;
    c->pop_us[op] = (t2 - t1) * 1e6;
    return rc;
}

/* One op of the scenario for client c; op is its index. */
static int one_op(client *c, size_t op, const char *msg, char *scratch)
{
    const bench_opts *o = c->o;
    if (strcmp(o->scenario, "pop") == 0)
        return append_then_pop(c, op, msg);
    if (strcmp(o->scenario, "append") == 0) {
        convo_append_result r;
        return convo_append(c->store, c->thread, &msg, NULL, 1, NULL, &r, &c->err);
    }
    if (strcmp(o->scenario, "extra") == 0) {
        snprintf(scratch, 256, "{\"k%zu\":{\"n\":%zu,\"s\":\"value\"}}", op % 64, op);
        return convo_save_extra(c->store, c->thread, scratch, &c->err);
    }
    if (strcmp(o->scenario, "load") == 0) {
        convo_history *h;
        int rc = convo_load(c->store, c->thread, NULL, &h, &c->err);
        convo_history_free(h);
        return rc;
    }
    /* checkpoint */
    char id[64], version[32], meta[96];
    snprintf(id, sizeof id, "cp-%012zu", op);
    snprintf(version, sizeof version, "%zu", op + 1);
    snprintf(meta, sizeof meta, "{\"source\":\"loop\",\"step\":%zu}", op);
    convo_blob v = {"json", scratch, (size_t)snprintf(scratch, 256, "{\"step\":%zu}", op)};
    convo_channel_in ch[] = {{"step", version, &v}};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = c->thread;
    cp.checkpoint_id = id;
    cp.metadata_json = meta;
    cp.body = (convo_blob){"json", "{\"v\":1}", 7};
    cp.channels = ch;
    cp.nchannels = 1;
    return convo_checkpoint_put(c->store, &cp, &c->err);
}

static void *client_run(void *arg)
{
    client *c = arg;
    unsigned seed = (unsigned)c->id + 1;
    char *msg = bench_message("user", c->o->payload, &seed);
    char scratch[256];
    for (size_t i = 0; i < c->ops && c->rc == 0; i++) {
        if (c->interleave && i % RAW_BLOCK == 0) {
            /* raw and convo blocks alternate, so both see the same machine load */
            double secs;
            int rc = convo_bench_raw(c->store, msg, strlen(msg), RAW_BLOCK, &secs, &c->err);
            if (rc == 0) {
                c->raw_secs += secs;
                c->raw_ops += RAW_BLOCK;
                c->raw_block_secs[i / RAW_BLOCK] = secs;
            } else {
                c->interleave = 0; /* ENOTSUP: this driver has no raw primitive */
            }
        }
        double t0 = bench_now();
        c->rc = one_op(c, i, msg, scratch);
        c->lat_us[i] = (bench_now() - t0) * 1e6;
        double secs;
        if (c->interleave && c->o->raw_each && c->rc == 0 &&
            convo_bench_raw(c->store, msg, strlen(msg), 1, &secs, &c->err) == 0)
            c->raw_us[i] = secs * 1e6;
        __atomic_add_fetch(&progress_done, 1, __ATOMIC_RELAXED);
        if (c->id == 0)
            bench_progress(c->o->scenario, __atomic_load_n(&progress_done, __ATOMIC_RELAXED),
                     c->ops * c->o->threads);
    }
    free(msg);
    return NULL;
}

typedef struct result {
    size_t ops;
    double seconds, p50, p99;
    double raw_ops_per_sec; /* interleaved measurement, 0 when not taken */
    double ratio_p50;       /* interleaved: the median of the blocks' raw / convo time */
    double ratio_op_p50;    /* interleaved: the raw op's median / our op's median */
    double bytes; /* message bytes moved (load) */
    double append_secs, pop_secs; /* pop: summed over every client */
    double append_p50, pop_p50;   /* pop: medians of each half */
} result;

static const char *scenario_ops_name(const bench_opts *o)
{
    return strcmp(o->scenario, "load") == 0 ? "loads"
           : strcmp(o->scenario, "pop") == 0 ? "append+pop round trips"
                                             : "ops";
}

/* One client's interleaved blocks: the median over whole blocks of the raw
 * block's time over the time of the convo block after it (steadier than the
 * ratio of the sums on a machine whose load comes and goes). */
static double block_ratio_p50(const client *c)
{
    size_t nb = c->ops / RAW_BLOCK, k = 0;
    double *r = calloc(nb + 1, sizeof *r);
    for (size_t b = 0; r && b < nb; b++) {
        double own = 0;
        for (size_t j = b * RAW_BLOCK; j < (b + 1) * RAW_BLOCK; j++)
            own += c->lat_us[j] / 1e6;
        if (own > 0 && c->raw_block_secs[b] > 0)
            r[k++] = c->raw_block_secs[b] / own;
    }
    qsort(r, k, sizeof *r, cmp_double);
    double median = k ? r[k / 2] : 0;
    free(r);
    return median;
}

/* One client's ops, each followed by one raw op: the median raw op over our
 * median op. Medians of single calls leave out the moments the shared machine
 * stalls a call (which the sums of whole blocks keep). */
static double op_ratio_p50(const client *c)
{
    double *raw = calloc(c->ops + 1, sizeof *raw), *own = calloc(c->ops + 1, sizeof *own);
    size_t k = 0;
    for (size_t j = 0; raw && own && j < c->ops; j++)
        if (c->raw_us[j] > 0) {
            raw[k] = c->raw_us[j];
            own[k++] = c->lat_us[j];
        }
    qsort(raw, k, sizeof *raw, cmp_double);
    qsort(own, k, sizeof *own, cmp_double);
    double ratio = k && own[k / 2] > 0 ? raw[k / 2] / own[k / 2] : 0;
    free(raw);
    free(own);
    return ratio;
}

/* Opens one store per client (each client its own connections), prepares its
 * thread, runs the clients together and gathers latencies. */
static int run_clients(const char *url, const bench_opts *o, result *res, convo_error *err)
{
    size_t n = o->threads;
    client *cs = calloc(n, sizeof *cs);
    pthread_t *tids = calloc(n, sizeof *tids);
    size_t total = strcmp(o->scenario, "load") == 0 ? 20 * n : o->messages;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        client *c = &cs[i];
        c->o = o;
        c->id = i;
        c->ops = total / n + (i < total % n);
        c->lat_us = calloc(c->ops + 1, sizeof *c->lat_us);
        c->append_us = calloc(c->ops + 1, sizeof *c->append_us);
        c->pop_us = calloc(c->ops + 1, sizeof *c->pop_us);
        c->interleave = n == 1 && strcmp(o->scenario, "append") == 0;
        c->raw_block_secs = calloc(c->ops / RAW_BLOCK + 1, sizeof *c->raw_block_secs);
        c->raw_us = calloc(c->ops + 1, sizeof *c->raw_us);
        snprintf(c->thread, sizeof c->thread, "bench-%s-%s-%zu", run_id, o->scenario, i);
        rc = convo_open(&c->store, url, err);
        if (rc == 0 && strcmp(o->scenario, "load") == 0)
            rc = prefill(c->store, c->thread, o->messages, o->payload, err);
        else if (rc == 0 && o->prefill)
            rc = prefill(c->store, c->thread, o->prefill, o->payload, err);
    }
    double t0 = bench_now();
    for (size_t i = 0; i < n && rc == 0; i++)
        pthread_create(&tids[i], NULL, client_run, &cs[i]);
    for (size_t i = 0; i < n && rc == 0; i++)
        pthread_join(tids[i], NULL);
    res->seconds = bench_now() - t0;
    size_t k = 0;
    double *all = calloc(total + 1, sizeof *all);
    double *appends = calloc(total + 1, sizeof *appends), *pops = calloc(total + 1, sizeof *pops);
    if (cs[0].interleave && cs[0].raw_ops > 0 && cs[0].raw_secs > 0) {
        /* one client: its own time is the sum of its calls, raw blocks excluded */
        res->raw_ops_per_sec = (double)cs[0].raw_ops / cs[0].raw_secs;
        res->seconds = 0;
        for (size_t j = 0; j < cs[0].ops; j++)
            res->seconds += cs[0].lat_us[j] / 1e6;
        res->ratio_p50 = block_ratio_p50(&cs[0]);
        res->ratio_op_p50 = op_ratio_p50(&cs[0]);
    }
    for (size_t i = 0; i < n; i++) {
        if (rc == 0 && cs[i].rc != 0) {
            rc = cs[i].rc;
            *err = cs[i].err;
        }
        memcpy(all + k, cs[i].lat_us, cs[i].ops * sizeof *all);
        memcpy(appends + k, cs[i].append_us, cs[i].ops * sizeof *all);
        memcpy(pops + k, cs[i].pop_us, cs[i].ops * sizeof *all);
        k += cs[i].ops;
        res->append_secs += cs[i].append_secs;
        res->pop_secs += cs[i].pop_secs;
    }
    if (rc == 0 && strcmp(o->scenario, "load") == 0) {
        convo_history *h;
        if ((rc = convo_load(cs[0].store, cs[0].thread, NULL, &h, err)) == 0) {
            for (size_t j = 0; j < convo_history_count(h); j++) {
                size_t len;
                convo_history_message(h, j, &len);
                res->bytes += (double)len;
            }
            res->bytes *= (double)total;
            convo_history_free(h);
        }
    }
    for (size_t i = 0; i < n; i++) {
        if (cs[i].store)
            convo_thread_delete(cs[i].store, cs[i].thread, NULL);
        convo_close(cs[i].store);
        free(cs[i].lat_us);
        free(cs[i].raw_block_secs);
        free(cs[i].raw_us);
        free(cs[i].append_us);
        free(cs[i].pop_us);
    }
    qsort(appends, k, sizeof *appends, cmp_double);
    qsort(pops, k, sizeof *pops, cmp_double);
    res->append_p50 = k ? appends[k / 2] : 0;
    res->pop_p50 = k ? pops[k / 2] : 0;
    free(appends);
    free(pops);
    qsort(all, k, sizeof *all, cmp_double);
    res->ops = k;
    res->p50 = k ? all[k / 2] : 0;
    res->p99 = k ? all[(size_t)((double)k * 0.99) < k ? (size_t)((double)k * 0.99) : k - 1] : 0;
    free(all);
    free(cs);
    free(tids);
    return rc;
}

/* The raw primitive, measured before and after the scenario; the mean of both. */
static int raw_rate(const char *url, const bench_opts *o, double *rate, convo_error *err)
{
    convo_store *s;
    int rc = convo_open(&s, url, err);
    if (rc != 0)
        return rc;
    unsigned seed = 99;
    char *msg = bench_message("user", o->payload, &seed);
    size_t n = o->messages < 20000 ? o->messages : 20000;
    double secs;
    rc = convo_bench_raw(s, msg, strlen(msg), n, &secs, err);
    if (rc == 0)
        *rate = (double)n / secs;
    free(msg);
    convo_close(s);
    return rc;
}

static void print_result(const bench_opts *o, const char *driver, const result *r, double raw1,
                         double raw2)
{
    double ops_per_sec = r->seconds > 0 ? (double)r->ops / r->seconds : 0;
    double raw = raw1 > 0 && raw2 > 0 ? (raw1 + raw2) / 2 : 0;
    if (o->json) {
        printf("{\"scenario\":\"%s\",\"driver\":\"%s\",\"threads\":%zu,\"messages\":%zu,"
               "\"prefill\":%zu,\"payload_bytes\":%zu,\"ops\":%zu,\"seconds\":%.6f,"
               "\"ops_per_sec\":%.1f,\"p50_us\":%.1f,\"p99_us\":%.1f",
               o->scenario, driver, o->threads, o->messages, o->prefill, o->payload, r->ops,
               r->seconds, ops_per_sec, r->p50, r->p99);
        if (r->bytes > 0)
            printf(",\"bytes_per_sec\":%.0f,\"mb_per_sec\":%.1f", r->bytes / r->seconds,
                   r->bytes / r->seconds / 1e6);
        if (raw > 0)
            printf(",\"raw_ops_per_sec\":%.1f,\"ratio\":%.3f", raw, ops_per_sec / raw);
        if (r->ratio_p50 > 0)
            printf(",\"ratio_p50\":%.3f", r->ratio_p50);
        if (r->ratio_op_p50 > 0)
            printf(",\"ratio_op_p50\":%.3f", r->ratio_op_p50);
        if (r->append_secs > 0)
            printf(",\"append_us\":%.1f,\"pop_us\":%.1f,\"pop_to_append\":%.3f,"
                   "\"append_p50_us\":%.1f,\"pop_p50_us\":%.1f,\"pop_to_append_p50\":%.3f",
                   r->append_secs * 1e6 / (double)r->ops, r->pop_secs * 1e6 / (double)r->ops,
                   r->pop_secs / r->append_secs, r->append_p50, r->pop_p50,
                   r->append_p50 > 0 ? r->pop_p50 / r->append_p50 : 0);
        printf("}\n");
        return;
    }
    printf("%s on %s: %zu %s in %.3f s = %.0f/s, p50 %.0f us, p99 %.0f us\n", o->scenario, driver,
           r->ops, scenario_ops_name(o), r->seconds, ops_per_sec, r->p50, r->p99);
    if (r->bytes > 0)
        printf("  %.1f MB/s of message bytes\n", r->bytes / r->seconds / 1e6);
    if (raw > 0)
        printf("  raw primitive %.0f/s, ratio %.2f\n", raw, ops_per_sec / raw);
    if (r->ratio_p50 > 0)
        printf("  ratio per block of %d, median %.2f\n", RAW_BLOCK, r->ratio_p50);
    if (r->ratio_op_p50 > 0)
        printf("  each append followed by one raw op: median raw over median append %.2f\n",
               r->ratio_op_p50);
    if (r->append_secs > 0)
        printf("  append %.1f us, pop (replace_tail) %.1f us on average: a pop costs %.2f "
               "appends (medians %.1f and %.1f us: %.2f)\n",
               r->append_secs * 1e6 / (double)r->ops, r->pop_secs * 1e6 / (double)r->ops,
               r->pop_secs / r->append_secs, r->append_p50, r->pop_p50,
               r->append_p50 > 0 ? r->pop_p50 / r->append_p50 : 0);
}

/* One message and one checkpoint per turn, the messages in the log; reports the
 * bytes given against the bytes the backend uses. With --put-log a turn is one
 * checkpoint put carrying its message (expected length: the turn), not an
 * append and then a put. */
static int conversation(const char *url, const bench_opts *o, convo_error *err)
{
    convo_store *s;
    int rc = convo_open(&s, url, err);
    if (rc != 0)
        return rc;
    char thread[96];
    snprintf(thread, sizeof thread, "bench-%s-conversation", run_id);
    int64_t before = 0;
    int have_bytes = convo_store_bytes(s, &before, NULL) == 0;
    unsigned seed = 5;
    double raw = 0, t0 = bench_now();
    for (size_t turn = 0; turn < o->turns && rc == 0; turn++) {
        char *msg = bench_message(turn % 2 ? "assistant" : "user", o->payload, &seed);
        convo_append_result ar = {(int64_t)turn, 1, 0};
        if (!o->put_log)
            rc = convo_append(s, thread, (const char *const *)&msg, NULL, 1, NULL, &ar, err);
        raw += (double)strlen(msg);
        char id[64], parent[64], meta[160], body[1024], version[32], step[32];
        snprintf(id, sizeof id, "%016zx", turn);
        snprintf(parent, sizeof parent, "%016zx", turn - 1);
        snprintf(meta, sizeof meta, "{\"source\":\"loop\",\"step\":%zu,\"parents\":{}}", turn);
        snprintf(version, sizeof version, "%zu", turn + 1);
        /* a LangGraph-shaped snapshot body: versions as LangGraph writes them
         * ("<32-digit counter>.<random fraction>"), the messages channel in the log */
        char v1[64], v2[64], v3[64];
        snprintf(v1, sizeof v1, "%032zu.0.%06u%010u", turn + 1, rand_r(&seed) % 1000000,
                 rand_r(&seed));
        snprintf(v2, sizeof v2, "%032zu.0.%06u%010u", turn + 2, rand_r(&seed) % 1000000,
                 rand_r(&seed));
        snprintf(v3, sizeof v3, "%032zu.0.%06u%010u", turn, rand_r(&seed) % 1000000,
                 rand_r(&seed));
        int bl = snprintf(body, sizeof body,
                          "{\"v\":4,\"ts\":\"2026-11-21T10:00:00.%06zu+00:00\",\"id\":\"%s\","
                          "\"channel_versions\":{\"__start__\":\"%s\",\"messages\":\"%s\","
                          "\"branch:to:agent\":\"%s\"},\"versions_seen\":{\"__input__\":{},"
                          "\"__start__\":{\"__start__\":\"%s\"},\"agent\":"
                          "{\"branch:to:agent\":\"%s\"}},\"updated_channels\":[\"messages\"]}",
                          turn % 1000000, id, v3, v2, v1, v3, v1);
        int sl = snprintf(step, sizeof step, "%zu", turn);
        convo_blob sv = {"json", step, (size_t)sl};
        convo_channel_in ch[] = {{"step", version, &sv}};
        convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
        cp.thread_id = thread;
        cp.checkpoint_id = id;
        cp.parent_id = turn ? parent : NULL;
        cp.metadata_json = meta;
        cp.body = (convo_blob){"json", body, (size_t)bl};
        cp.channels = ch;
        cp.nchannels = 1;
        cp.log_length = ar.first_seq + 1;
        if (o->put_log) {
            cp.messages = (const char *const *)&msg;
            cp.nmessages = 1;
            cp.expected_length = (int64_t)turn;
        }
        if (rc == 0)
            rc = convo_checkpoint_put(s, &cp, err);
        free(msg);
        raw += (double)bl + (double)strlen(meta) + (double)sl;
        bench_progress("conversation", turn + 1, o->turns);
    }
    double secs = bench_now() - t0;
    int64_t after = 0;
    if (rc == 0 && have_bytes)
        rc = convo_store_bytes(s, &after, err);
    convo_thread_delete(s, thread, NULL);
    if (rc == 0) {
        double stored = (double)(after - before);
        if (o->json)
            printf("{\"scenario\":\"conversation\",\"driver\":\"%s\",\"put_log\":%s,"
                   "\"turns\":%zu,"
                   "\"payload_bytes\":%zu,\"seconds\":%.6f,\"turns_per_sec\":%.1f,"
                   "\"raw_bytes\":%.0f,\"stored_bytes\":%.0f,\"storage_ratio\":%.3f}\n",
                   convo_store_driver(s), o->put_log ? "true" : "false", o->turns, o->payload,
                   secs, (double)o->turns / secs,
                   raw, have_bytes ? stored : -1, have_bytes ? stored / raw : -1);
        else
            printf("conversation%s on %s: %zu turns in %.3f s; raw %.0f bytes, stored %.0f "
                   "bytes, ratio %.2f\n", o->put_log ? " (put with messages)" : "",
                   convo_store_driver(s), o->turns, secs, raw, stored, stored / raw);
    }
    convo_close(s);
    return rc;
}

static int parse_size(const char *s, size_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-')
        return -1;
    *out = (size_t)v;
    return 0;
}

static int usage(FILE *f)
{
    fprintf(f, "usage: convo bench --scenario append|load|extra|checkpoint|pop|conversation "
               "[--threads N] [--messages N] [--turns N] [--prefill N] [--payload BYTES] "
               "[--put-log | --graph] [--raw-each] [--json]\n"
               "       convo bench --scenario threads [--count N] [--users N] [--messages N] "
               "[--pages N] [--payload BYTES] [--json]\n");
    return f == stdout ? 0 : 2; /* --help, as for every other command: exit 0 on stdout */
}

static int exit_code(int rc)
{
    switch (rc) {
    case CONVO_ENOTFOUND: return 3;
    case CONVO_ECONFLICT: return 4;
    case CONVO_ETOOLARGE: return 5;
    default: return 1;
    }
}

int convo_tool_bench(const char *url, int argc, char **argv)
{
    bench_opts o = {"append", 1, 0, 1000, 0, 200, 100000, 1000, 200, 0, 0, 0, 0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        size_t *target = !strcmp(a, "--threads")    ? &o.threads
                         : !strcmp(a, "--messages") ? &o.messages
                         : !strcmp(a, "--turns")    ? &o.turns
                         : !strcmp(a, "--prefill")  ? &o.prefill
                         : !strcmp(a, "--payload")  ? &o.payload
                         : !strcmp(a, "--count")    ? &o.count
                         : !strcmp(a, "--users")    ? &o.users
                         : !strcmp(a, "--pages")    ? &o.pages
                                                    : NULL;
        if (!strcmp(a, "--help"))
            return usage(stdout);
        if (!strcmp(a, "--json"))
            o.json = 1;
        else if (!strcmp(a, "--put-log"))
            o.put_log = 1;
        else if (!strcmp(a, "--graph"))
            o.graph = 1;
        else if (!strcmp(a, "--raw-each"))
            o.raw_each = 1;
        else if (!strcmp(a, "--scenario") && i + 1 < argc)
            o.scenario = argv[++i];
        else if (target && i + 1 < argc && parse_size(argv[i + 1], target) == 0)
            i++;
        else
            return usage(stderr);
    }
    static const char *const scenarios[] = {"append", "load", "extra", "checkpoint", "pop",
                                            "conversation", "threads", NULL};
    int known = 0;
    for (size_t i = 0; scenarios[i]; i++)
        known |= !strcmp(scenarios[i], o.scenario);
    if (!known || o.threads == 0 || o.threads > 256 || o.payload > (1 << 20) || o.turns == 0)
        return usage(stderr);
    /* threads: at least 10 users and 10 threads a user, so that a tenth of each is one */
    if (o.users < 10 || o.count < 10 * o.users || o.pages == 0 || o.count > 100000000)
        return usage(stderr);
    if (o.messages == 0 && !strcmp(o.scenario, "threads"))
        o.messages = 3;
    if (o.messages == 0)
        o.messages = !strcmp(o.scenario, "append") ? 10000
                     : !strcmp(o.scenario, "load") ? 10000
                                                   : 5000;
    snprintf(run_id, sizeof run_id, "%lx%x", (unsigned long)time(NULL), (unsigned)getpid());
    convo_error err = {0};
    int rc;
    if (!strcmp(o.scenario, "conversation") && o.graph) {
        rc = bench_graph(url, o.turns, o.payload, o.json, &err);
    } else if (!strcmp(o.scenario, "conversation")) {
        rc = conversation(url, &o, &err);
    } else if (!strcmp(o.scenario, "threads")) {
        bench_threads_opts to = {o.count, o.users, o.messages, o.pages, o.payload, o.json};
        rc = bench_threads(url, &to, &err);
    } else {
        double raw1 = 0, raw2 = 0;
        /* one client measures the raw primitive interleaved with its own calls;
         * several clients are compared with raw runs before and after */
        int with_raw = !strcmp(o.scenario, "append") && o.threads > 1;
        rc = with_raw ? raw_rate(url, &o, &raw1, &err) : 0;
        if (rc == CONVO_ENOTSUP) {
            with_raw = 0;
            rc = 0;
        }
        result r = {0};
        if (rc == 0)
            rc = run_clients(url, &o, &r, &err);
        if (rc == 0 && with_raw)
            rc = raw_rate(url, &o, &raw2, &err);
        if (rc == 0) {
            convo_store *s;
            if (r.raw_ops_per_sec > 0)
                raw1 = raw2 = r.raw_ops_per_sec;
            if ((rc = convo_open(&s, url, &err)) == 0) {
                print_result(&o, convo_store_driver(s), &r, raw1, raw2);
                convo_close(s);
            }
        }
    }
    if (rc != 0) {
        fprintf(stderr, "convo: bench: %s\n", err.message[0] ? err.message : convo_strerror(rc));
        return exit_code(rc);
    }
    return 0;
}
