/* bench_threads.c — `convo bench --scenario threads`: the thread index at scale.
 * Seeds threads of many users (each thread's extra holds its user_id, declared
 * indexed) into a fresh store, and the same writes into a second fresh store
 * opened without index keys; reads the newest 20 threads of one user, repeated,
 * at a tenth of the threads and at all of them; reports ms per page, the ratio
 * to loading one 20-message thread, and the write rates with and without the
 * index. Public API only. */
#include "bench.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BLOCK 250  /* threads seeded into one store before the other takes its turn */
#define PAGE 20
#define SCAN_PAGES 5 /* page reads without the index: each may read every thread */
/* A timed read starts after this long asleep: on a loaded machine the read
 * after a page otherwise pays for the page's CPU (the scheduler preempts it:
 * a 20-message load measured 1.9 ms right after a page, 0.08 ms alone). */
#define SETTLE_US 200

typedef struct store_run {
    convo_store *s;
    char url[1024];
    char *file; /* a SQLite file this run made, removed at the end */
    double append_secs, extra_secs;
    size_t appends, extras;
    double *append_us; /* each append's time, for the median */
} store_run;

typedef struct size_point {
    size_t threads;
    double page_p50, page_mean, load_p50, scan_p50; /* ms */
    double pair_ratio_p50; /* the median of page / load over pairs read back to back */
    double round_trip_p50; /* ms: one raw write (0: the driver has none) */
} size_point;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The user of thread i: the first tenth of the threads belongs to the first tenth
 * of the users, the rest to the others, so that at both sizes measured every user
 * has threads/users of them: only the threads of others grow. */
static size_t user_of(const bench_threads_opts *o, size_t i)
{
    size_t small = o->threads / 10, small_users = o->users / 10 ? o->users / 10 : 1;
    if (i < small)
        return i % small_users;
    return small_users + (i - small) % (o->users - small_users ? o->users - small_users : 1);
}

/* url with its namespace made unique by tag: another SQLite file, or the
 * prefix / schema / database parameter of a server extended (added when absent). */
static int fresh_url(const char *url, const char *tag, store_run *r)
{
    static const struct { const char *scheme, *param; } ns[] = {
        {"redis://", "prefix"}, {"rediss://", "prefix"}, {"redis+cluster://", "prefix"},
        {"postgres://", "schema"},
        {"postgresql://", "schema"}, {"mongodb://", "database"}};
    if (strcmp(url, "memory:") == 0 || strcmp(url, "sqlite::memory:") == 0) {
        snprintf(r->url, sizeof r->url, "%s", url); /* every open is a new store */
        return 0;
    }
    if (strncmp(url, "sqlite:", 7) == 0) {
        if (strchr(url, '?')) /* a parameter would follow the file name */
            return -1;
        snprintf(r->url, sizeof r->url, "%s.%s", url, tag);
        r->file = strdup(r->url + 7);
        return r->file ? 0 : -1;
    }
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        if (strncmp(url, ns[i].scheme, strlen(ns[i].scheme)) != 0)
            continue;
        char key[32];
        const char *q = strchr(url, '?');
        for (const char *p = q; p; p = strchr(p + 1, '&')) {
            snprintf(key, sizeof key, "%s=", ns[i].param);
            if (strncmp(p + 1, key, strlen(key)) != 0)
                continue;
            size_t end = (size_t)(p + 1 + strcspn(p + 1, "&") - url);
            snprintf(r->url, sizeof r->url, "%.*s_%s%s", (int)end, url, tag, url + end);
            return 0;
        }
        snprintf(r->url, sizeof r->url, "%s%c%s=%s", url, q ? '&' : '?', ns[i].param, tag);
        return 0;
    }
    return -1;
}

static int open_run(store_run *r, const char *const *keys, convo_error *err)
{
    convo_store_opts so = CONVO_STORE_OPTS_INIT;
    so.indexed_keys = keys;
    return convo_open_ex(&r->s, r->url, &so, err);
}

/* Thread i as a user writes it: its extra (user_id, title), then one append a message. */
static int seed_thread(store_run *r, const bench_threads_opts *o, size_t i, char *const *msgs,
                       convo_error *err)
{
    char tid[64], patch[128];
    snprintf(tid, sizeof tid, "t%08zu", i);
    snprintf(patch, sizeof patch, "{\"user_id\":\"u%05zu\",\"title\":\"conversation %zu\"}",
             user_of(o, i), i);
    double t0 = bench_now();
    int rc = convo_save_extra(r->s, tid, patch, err);
    double t1 = bench_now();
    r->extra_secs += t1 - t0;
    r->extras++;
    for (size_t m = 0; m < o->messages && rc == 0; m++) {
        const char *msg = msgs[m % 2];
        t0 = bench_now();
        rc = convo_append(r->s, tid, &msg, NULL, 1, NULL, NULL, err);
        double secs = bench_now() - t0;
        r->append_secs += secs;
        r->append_us[r->appends++] = secs * 1e6;
    }
    return rc;
}

/* Seeds threads [from, to) into both stores, a block into each in turn, so that
 * both see the same load of a shared machine; which store goes first alternates
 * from block to block, so neither is always the one that follows the other. */
static int seed_both(store_run *indexed, store_run *bare, const bench_threads_opts *o, size_t from,
                size_t to, char *const *msgs, convo_error *err)
{
    int rc = 0;
    for (size_t b = from; b < to && rc == 0; b += BLOCK) {
        size_t e = b + BLOCK < to ? b + BLOCK : to;
        store_run *first = (b / BLOCK) % 2 ? bare : indexed;
        store_run *second = first == bare ? indexed : bare;
        for (size_t i = b; i < e && rc == 0; i++)
            rc = seed_thread(first, o, i, msgs, err);
        for (size_t i = b; i < e && rc == 0; i++)
            rc = seed_thread(second, o, i, msgs, err);
        bench_progress("threads: seeding", e, o->threads);
    }
    return rc;
}

static int read_page(convo_store *s, const char *where, size_t expect, double *ms,
                     convo_error *err)
{
    convo_thread_list_opts lo = CONVO_THREAD_LIST_OPTS_INIT;
    lo.where_json = where;
    lo.limit = PAGE;
    lo.with_extra = 1;
    lo.with_last_message = 1;
    convo_thread_page *p;
    usleep(SETTLE_US);
    double t0 = bench_now();
    int rc = convo_thread_list_ex(s, &lo, &p, err);
    *ms = (bench_now() - t0) * 1e3;
    if (rc == 0 && convo_thread_page_count(p) != expect) {
        snprintf(err->message, sizeof err->message, "a page of user 0 had %zu threads, not %zu",
                 convo_thread_page_count(p), expect);
        rc = CONVO_ERROR;
    }
    convo_thread_page_free(p);
    return rc;
}

/* One raw write of the driver (convo_bench_raw: on Redis a push, one round
 * trip), in ms; 0 when the driver has none. On a Redis Cluster a round trip is
 * the page's unit of cost beyond the loads: at most one per master. */
static double round_trip_ms(convo_store *s)
{
    static const char payload[] = "{\"role\":\"user\",\"content\":\"ping\"}";
    double secs = 0;
    convo_error e;
    if (convo_bench_raw(s, payload, sizeof payload - 1, 1, &secs, &e) != 0)
        return 0;
    return secs * 1e3;
}

/* The page of user 0, the load of a 20-message thread and a raw round trip,
 * one after the other, o->pages times each (so that each page has a load
 * taken in the same moment of a shared machine); a few pages of the store
 * without the index. */
static int measure(store_run *indexed, store_run *bare, const bench_threads_opts *o, size_t n,
                   size_point *pt, convo_error *err)
{
    double *page = calloc(o->pages, sizeof *page), *load = calloc(o->pages, sizeof *load);
    double *pair = calloc(o->pages, sizeof *pair), *trip = calloc(o->pages, sizeof *trip);
    double scan[SCAN_PAGES];
    /* user 0 has its threads among the first tenth: as many at both sizes */
    size_t per_user = o->threads / 10 / (o->users / 10 ? o->users / 10 : 1);
    size_t expect = per_user < PAGE ? per_user : PAGE;
    const char *where = "{\"user_id\":\"u00000\"}";
    int rc = page && load && pair && trip ? 0 : CONVO_ENOMEM;
    pt->threads = n;
    pt->page_mean = 0;
    for (size_t k = 0; k < o->pages && rc == 0; k++) {
        rc = read_page(indexed->s, where, expect, &page[k], err);
        convo_history *h;
        usleep(SETTLE_US);
        double t0 = bench_now();
        if (rc == 0 && (rc = convo_load(indexed->s, "load-20", NULL, &h, err)) == 0)
            convo_history_free(h);
        load[k] = (bench_now() - t0) * 1e3;
        pair[k] = load[k] > 0 ? page[k] / load[k] : 0;
        trip[k] = rc == 0 ? round_trip_ms(indexed->s) : 0;
        pt->page_mean += page[k] / (double)o->pages;
        bench_progress("threads: pages", k + 1, o->pages);
    }
    for (size_t k = 0; k < SCAN_PAGES && rc == 0; k++)
        rc = read_page(bare->s, where, expect, &scan[k], err);
    if (rc == 0) {
        qsort(page, o->pages, sizeof *page, cmp_double);
        qsort(load, o->pages, sizeof *load, cmp_double);
        qsort(scan, SCAN_PAGES, sizeof *scan, cmp_double);
        pt->page_p50 = page[o->pages / 2];
        pt->load_p50 = load[o->pages / 2];
        pt->scan_p50 = scan[SCAN_PAGES / 2];
        qsort(pair, o->pages, sizeof *pair, cmp_double);
        qsort(trip, o->pages, sizeof *trip, cmp_double);
        pt->pair_ratio_p50 = pair[o->pages / 2];
        pt->round_trip_p50 = trip[o->pages / 2];
    }
    free(page);
    free(load);
    free(pair);
    free(trip);
    return rc;
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n ? v[n / 2] : 0;
}

static void report(const bench_threads_opts *o, const char *driver, const size_point *pts,
                   const store_run *indexed, const store_run *bare)
{
    double ai = (double)indexed->appends / indexed->append_secs;
    double ab = (double)bare->appends / bare->append_secs;
    double mi = median(indexed->append_us, indexed->appends);
    double mb = median(bare->append_us, bare->appends);
    double ei = (double)indexed->extras / indexed->extra_secs;
    double eb = (double)bare->extras / bare->extra_secs;
    if (o->json) {
        printf("{\"scenario\":\"threads\",\"driver\":\"%s\",\"threads\":%zu,\"users\":%zu,"
               "\"messages_per_thread\":%zu,\"pages\":%zu,\"payload_bytes\":%zu,\"sizes\":[",
               driver, o->threads, o->users, o->messages, o->pages, o->payload);
        for (int i = 0; i < 2; i++)
            printf("%s{\"threads\":%zu,\"page_ms_p50\":%.4f,\"page_ms_mean\":%.4f,"
                   "\"load_ms_p50\":%.4f,\"page_to_load\":%.3f,\"page_to_load_pairs_p50\":%.3f,"
                   "\"raw_write_ms_p50\":%.4f,\"unindexed_page_ms_p50\":%.4f}",
                   i ? "," : "", pts[i].threads, pts[i].page_p50, pts[i].page_mean,
                   pts[i].load_p50, pts[i].page_p50 / pts[i].load_p50, pts[i].pair_ratio_p50,
                   pts[i].round_trip_p50, pts[i].scan_p50);
        printf("],\"page_growth\":%.3f,\"appends_per_sec_indexed\":%.1f,"
               "\"appends_per_sec_unindexed\":%.1f,\"append_ratio\":%.3f,"
               "\"append_p50_us_indexed\":%.2f,\"append_p50_us_unindexed\":%.2f,"
               "\"append_ratio_p50\":%.3f,"
               "\"save_extra_per_sec_indexed\":%.1f,\"save_extra_per_sec_unindexed\":%.1f,"
               "\"save_extra_ratio\":%.3f}\n",
               pts[1].page_p50 / pts[0].page_p50, ai, ab, ai / ab, mi, mb, mb / mi, ei, eb,
               ei / eb);
        return;
    }
    printf("threads on %s: %zu threads of %zu users, %zu messages each\n", driver, o->threads,
           o->users, o->messages);
    for (int i = 0; i < 2; i++)
        printf("  at %zu threads: the newest %d of one user (extra, last message) p50 %.4f ms "
               "(mean %.4f), loading a %d-message thread p50 %.4f ms: ratio %.2f (median of "
               "pairs %.2f), a raw write %.4f ms; without the index %.3f ms\n",
               pts[i].threads, PAGE, pts[i].page_p50, pts[i].page_mean, PAGE, pts[i].load_p50,
               pts[i].page_p50 / pts[i].load_p50, pts[i].pair_ratio_p50,
               pts[i].round_trip_p50, pts[i].scan_p50);
    printf("  page at %zu / at %zu threads: %.2f\n", pts[1].threads, pts[0].threads,
           pts[1].page_p50 / pts[0].page_p50);
    printf("  appends %.0f/s with the index, %.0f/s without: ratio %.2f (medians %.1f and %.1f "
           "us: %.2f); save_extra %.0f/s, %.0f/s: %.2f\n", ai, ab, ai / ab, mi, mb, mb / mi, ei,
           eb, ei / eb);
}

/* Every thread the run wrote, removed; SQLite files unlinked. */
static void clean(store_run *r, const bench_threads_opts *o)
{
    if (r->file) {
        convo_close(r->s);
        r->s = NULL;
        const char *suffix[] = {"", "-wal", "-shm"};
        char path[1100];
        for (int i = 0; i < 3; i++) {
            snprintf(path, sizeof path, "%s%s", r->file, suffix[i]);
            unlink(path);
        }
        free(r->file);
        return;
    }
    if (!r->s || strcmp(r->url, "memory:") == 0 || strcmp(r->url, "sqlite::memory:") == 0) {
        convo_close(r->s);
        return;
    }
    char tid[64];
    for (size_t i = 0; i < o->threads; i++) {
        snprintf(tid, sizeof tid, "t%08zu", i);
        convo_thread_delete(r->s, tid, NULL);
        bench_progress("threads: cleaning up", i + 1, o->threads);
    }
    convo_thread_delete(r->s, "load-20", NULL);
    convo_close(r->s);
}

int bench_threads(const char *url, const bench_threads_opts *o, convo_error *err)
{
    store_run indexed = {0}, bare = {0};
    char tag[64];
    snprintf(tag, sizeof tag, "cbi%s", bench_run_id());
    int rc = fresh_url(url, tag, &indexed);
    snprintf(tag, sizeof tag, "cbn%s", bench_run_id());
    if (rc == 0)
        rc = fresh_url(url, tag, &bare);
    if (rc != 0) {
        snprintf(err->message, sizeof err->message,
                 "bench threads needs memory:, sqlite:PATH (no parameters) or a server URL");
        free(indexed.file);
        free(bare.file);
        return CONVO_EINVAL;
    }
    const char *const keys[] = {"user_id", NULL};
    indexed.append_us = calloc(o->threads * o->messages + 1, sizeof(double));
    bare.append_us = calloc(o->threads * o->messages + 1, sizeof(double));
    if (!indexed.append_us || !bare.append_us)
        rc = CONVO_ENOMEM;
    if (rc == 0)
        rc = open_run(&indexed, keys, err);
    if (rc == 0)
        rc = open_run(&bare, NULL, err);
    unsigned seed = 3;
    char *msgs[2] = {bench_message("user", o->payload, &seed),
                     bench_message("assistant", o->payload, &seed)};
    char *load20[PAGE];
    for (size_t i = 0; i < PAGE; i++)
        load20[i] = msgs[i % 2];
    if (rc == 0)
        rc = convo_append(indexed.s, "load-20", (const char *const *)load20, NULL, PAGE, NULL,
                          NULL, err);
    size_point pts[2];
    size_t small = o->threads / 10;
    if (rc == 0)
        rc = seed_both(&indexed, &bare, o, 0, small, msgs, err);
    if (rc == 0)
        rc = measure(&indexed, &bare, o, small, &pts[0], err);
    if (rc == 0)
        rc = seed_both(&indexed, &bare, o, small, o->threads, msgs, err);
    if (rc == 0)
        rc = measure(&indexed, &bare, o, o->threads, &pts[1], err);
    if (rc == 0) {
        report(o, convo_store_driver(indexed.s), pts, &indexed, &bare);
        fflush(stdout); /* the clean-up below may take minutes on a server */
    }
    free(msgs[0]);
    free(msgs[1]);
    clean(&indexed, o);
    clean(&bare, o);
    free(indexed.append_us);
    free(bare.append_us);
    return rc;
}
