/* sqlite-wal-cost.c — where the SQLite driver's appends with the thread index
 * lose their mean: the writes of `convo bench --scenario threads` (a thread's
 * save_extra with its user_id, then one append a message; blocks of 250
 * threads into a store that declares user_id and one that does not, turn
 * about), with every commit's WAL frames and every WAL checkpoint and log
 * restart counted against the call that paid it. Counts do not depend on the
 * machine's load; the times printed beside them do.
 *
 * Built and run by scripts/sqlite-wal-cost.sh. It sees each SQLite connection
 * libconvo opens by defining sqlite3_open_v2 itself (the real one is found
 * with dlsym) and sets a WAL hook on it that does what SQLite's automatic
 * checkpoint does (a PASSIVE checkpoint once the log holds 1,000 frames), or,
 * with mode "none", never checkpoints: the log then only grows and is never
 * restarted, and at the end each store's frames are counted per B-tree
 * (pages_by_btree); with mode "restart", does what "auto" does and, when such a
 * checkpoint took the whole log into the database, starts the log over in
 * the same call (restart_log), rather than leaving that to the next write. WAL_COST_ONLY=indexed (or bare) writes into that store only and
 * prints nothing, for an instruction count of its calls under callgrind. */
#define _GNU_SOURCE
#include <convo.h>
#include <dlfcn.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define BLOCK 250
#define AUTO_FRAMES 1000

enum { SAVE_EXTRA, APPEND, OPS };
enum { INDEXED, BARE, STORES };

typedef struct counts {
    double frames[OPS], commits[OPS];
    double checkpoints[OPS], checkpoint_secs[OPS], restarts[OPS];
    double secs[OPS];
    double *append_us;
    size_t appends;
    double plain_secs; /* appends that neither checkpointed nor restarted the log */
    size_t plain;
} counts;

static counts stats[STORES];
static int last_frames[STORES];
static int current_op, checkpointing = 1, spiked; /* the call checkpointed or restarted */
/* mode "restart": after a checkpoint that took the whole log, the call that
 * ran it starts the log over before it returns (restart_log) */
static int restart_now, restart_due[STORES], restarting;
static sqlite3 *restarter[STORES];

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* After each commit: n is the log's frame count. Fewer than before means the
 * commit started the log over (SQLite then writes and syncs its header). */
static int wal_hook(void *ctx, sqlite3 *db, const char *name, int n)
{
    int s = (int)(long)ctx;
    counts *c = &stats[s];
    c->commits[current_op] += !restarting; /* a restart is part of the call's commit */
    if (n < last_frames[s]) {
        c->restarts[current_op]++;
        spiked = 1;
        c->frames[current_op] += n;
    } else
        c->frames[current_op] += n - last_frames[s];
    last_frames[s] = n;
    if (checkpointing && n >= AUTO_FRAMES) {
        double t0 = now();
        int log = -1, copied = -2;
        sqlite3_wal_checkpoint_v2(db, name, SQLITE_CHECKPOINT_PASSIVE, &log, &copied);
        restart_due[s] = restart_now && log == copied;
        c->checkpoints[current_op]++;
        spiked = 1;
        c->checkpoint_secs[current_op] += now() - t0;
    }
    return 0;
}

int sqlite3_open_v2(const char *file, sqlite3 **db, int flags, const char *vfs)
{
    int (*real)(const char *, sqlite3 **, int, const char *);
    *(void **)&real = dlsym(RTLD_NEXT, "sqlite3_open_v2");
    int rc = real(file, db, flags, vfs);
    const char *tail = file ? strrchr(file, '.') : NULL;
    if (rc == SQLITE_OK && tail && (!strcmp(tail, ".indexed") || !strcmp(tail, ".bare")))
        sqlite3_wal_hook(*db, wal_hook, (void *)(long)(strcmp(tail, ".bare") == 0));
    return rc;
}

/* Mode "restart": the log of store s, wholly checkpointed by the call under
 * way, is started over at once by a write transaction of one page on a
 * connection of the harness's (its commit writes the log's new header and
 * syncs it: the restart the next write would pay), counted against this call.
 * The row it writes, 'wal-cost restarts' in convo_meta, is the harness's. */
static void restart_log(int s, const char *dir)
{
    static const char *const names[] = {"indexed", "bare"};
    if (!restart_due[s])
        return;
    restart_due[s] = 0;
    if (!restarter[s]) {
        char path[1024];
        snprintf(path, sizeof path, "%s/wal-cost.%s", dir, names[s]);
        if (sqlite3_open_v2(path, &restarter[s], SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK)
            return;
        sqlite3_busy_timeout(restarter[s], 5000);
    }
    restarting = 1;
    /* a row that changes (SQLite writes no page for an update to the same value) */
    sqlite3_exec(restarter[s], "INSERT INTO convo_meta(key, value) VALUES('wal-cost restarts', 1)"
                               " ON CONFLICT(key) DO UPDATE SET value = value + 1", NULL, NULL, NULL);
    restarting = 0;
}

/* Mode "none": the log holds every frame the writes made; each frame's page
 * is named by dbstat (its table or index: no page changes hands, nothing is
 * deleted) and the frames are printed per B-tree and thread. */
static void pages_by_btree(const char *dir, int s, size_t threads)
{
    static const char *const names[] = {"indexed", "bare"};
    char path[1024], wal[1100];
    snprintf(path, sizeof path, "%s/wal-cost.%s", dir, names[s]);
    snprintf(wal, sizeof wal, "%s-wal", path);
    sqlite3 *db;
    sqlite3_stmt *st;
    FILE *f = fopen(wal, "rb");
    if (!f || sqlite3_open_v2(path, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK ||
        sqlite3_prepare_v2(db, "SELECT pageno, name FROM dbstat", -1, &st, NULL))
        return;
    enum { TREES = 64 };
    char tree[TREES][64];
    double frames[TREES] = {0};
    int n = 0, *owner = NULL;
    size_t pages = 0;
    while (sqlite3_step(st) == SQLITE_ROW) { /* each page's B-tree, once */
        size_t page = (size_t)sqlite3_column_int64(st, 0);
        const char *name = (const char *)sqlite3_column_text(st, 1);
        int i = 0;
        while (i < n && strcmp(tree[i], name))
            i++;
        if (i == n && n < TREES)
            snprintf(tree[n++], sizeof tree[0], "%s", name);
        if (page >= pages) {
            size_t grown = (page + 1) * 2;
            int *more = realloc(owner, grown * sizeof *owner);
            if (!more)
                break;
            for (size_t k = pages; k < grown; k++)
                more[k] = -1;
            owner = more;
            pages = grown;
        }
        owner[page] = i < n ? i : -1;
    }
    unsigned char h[32];
    unsigned page_size = 0;
    if (fread(h, 1, 32, f) == 32)
        page_size = (unsigned)h[8] << 24 | (unsigned)h[9] << 16 | (unsigned)h[10] << 8 | h[11];
    while (page_size && fread(h, 1, 24, f) == 24 && fseek(f, (long)page_size, SEEK_CUR) == 0) {
        size_t page = (size_t)h[0] << 24 | (size_t)h[1] << 16 | (size_t)h[2] << 8 | h[3];
        if (page < pages && owner[page] >= 0)
            frames[owner[page]]++;
    }
    printf("{\"store\":\"%s\",\"frames_per_thread\":{", names[s]);
    double total = 0;
    for (int i = 0, shown = 0; i < n; i++)
        if (frames[i] / (double)threads >= 0.0005) { /* the B-trees a thread writes */
            printf("%s\"%s\":%.3f", shown++ ? "," : "", tree[i], frames[i] / (double)threads);
        }
    for (int i = 0; i < n; i++)
        total += frames[i];
    printf("},\"total\":%.3f}\n", total / (double)threads);
    free(owner);
    sqlite3_finalize(st);
    sqlite3_close(db);
    fclose(f);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* user_of() of tools/bench_threads.c */
static size_t user_of(size_t threads, size_t users, size_t i)
{
    size_t small = threads / 10, small_users = users / 10 ? users / 10 : 1;
    if (i < small)
        return i % small_users;
    return small_users + (i - small) % (users - small_users ? users - small_users : 1);
}

static int seed_thread(convo_store *st, int s, size_t threads, size_t users, size_t i,
                       const char *const *msgs, const char *dir)
{
    char tid[32], patch[128];
    snprintf(tid, sizeof tid, "t%08zu", i);
    snprintf(patch, sizeof patch, "{\"user_id\":\"u%05zu\",\"title\":\"conversation %zu\"}",
             user_of(threads, users, i), i);
    counts *c = &stats[s];
    current_op = SAVE_EXTRA;
    double t0 = now();
    if (convo_save_extra(st, tid, patch, NULL) != 0)
        return -1;
    restart_log(s, dir);
    c->secs[SAVE_EXTRA] += now() - t0;
    current_op = APPEND;
    for (int m = 0; m < 3; m++) {
        spiked = 0;
        t0 = now();
        if (convo_append(st, tid, &msgs[m % 2], NULL, 1, NULL, NULL, NULL) != 0)
            return -1;
        restart_log(s, dir);
        double t = now() - t0;
        c->secs[APPEND] += t;
        if (!spiked) {
            c->plain_secs += t;
            c->plain++;
        }
        c->append_us[c->appends++] = t * 1e6;
    }
    return 0;
}

static void report(size_t threads, const char *mode)
{
    if (!stats[INDEXED].appends || !stats[BARE].appends)
        return; /* one store's writes only, for an instruction count */
    static const char *const names[] = {"indexed", "bare"};
    for (int s = 0; s < STORES; s++) {
        counts *c = &stats[s];
        qsort(c->append_us, c->appends, sizeof *c->append_us, cmp_double);
        printf("{\"store\":\"%s\",\"threads\":%zu,\"checkpoints\":\"%s\","
               "\"frames_per_save_extra\":%.3f,\"frames_per_append\":%.3f,"
               "\"checkpoints_in_save_extra\":%.0f,\"checkpoints_in_appends\":%.0f,"
               "\"restarts_in_save_extra\":%.0f,\"restarts_in_appends\":%.0f,"
               "\"checkpoint_s_in_appends\":%.3f,\"append_us_mean\":%.2f,\"append_us_p50\":%.2f,"
               "\"append_us_p99\":%.1f,\"plain_append_us_mean\":%.2f,"
               "\"save_extra_us_mean\":%.2f}\n",
               names[s], threads, mode, c->frames[SAVE_EXTRA] / c->commits[SAVE_EXTRA],
               c->frames[APPEND] / c->commits[APPEND], c->checkpoints[SAVE_EXTRA],
               c->checkpoints[APPEND], c->restarts[SAVE_EXTRA], c->restarts[APPEND],
               c->checkpoint_secs[APPEND], c->secs[APPEND] / (double)c->appends * 1e6,
               c->append_us[c->appends / 2], c->append_us[c->appends * 99 / 100],
               c->plain_secs / (double)c->plain * 1e6, c->secs[SAVE_EXTRA] / (double)threads * 1e6);
    }
    printf("{\"append_ratio\":%.3f,\"append_ratio_p50\":%.3f,\"plain_append_ratio\":%.3f}\n",
           stats[BARE].secs[APPEND] / stats[INDEXED].secs[APPEND] *
               (double)stats[INDEXED].appends / (double)stats[BARE].appends,
           stats[BARE].append_us[stats[BARE].appends / 2] /
               stats[INDEXED].append_us[stats[INDEXED].appends / 2],
           stats[BARE].plain_secs / (double)stats[BARE].plain /
               (stats[INDEXED].plain_secs / (double)stats[INDEXED].plain));
}

int main(int argc, char **argv)
{
    if (argc != 5 || (strcmp(argv[4], "auto") && strcmp(argv[4], "none") &&
                      strcmp(argv[4], "restart"))) {
        fprintf(stderr, "usage: sqlite-wal-cost DIR THREADS USERS auto|none|restart\n");
        return 2;
    }
    size_t threads = strtoul(argv[2], NULL, 10), users = strtoul(argv[3], NULL, 10);
    checkpointing = strcmp(argv[4], "none") != 0;
    restart_now = !strcmp(argv[4], "restart");
    if (threads < 10 || users < 10)
        return 2;
    static const char *const names[] = {"indexed", "bare"};
    const char *const keys[] = {"user_id", NULL};
    convo_store *st[STORES];
    for (int s = 0; s < STORES; s++) {
        char url[1024];
        snprintf(url, sizeof url, "sqlite:%s/wal-cost.%s", argv[1], names[s]);
        convo_store_opts so = CONVO_STORE_OPTS_INIT;
        so.indexed_keys = s == INDEXED ? keys : NULL;
        convo_error err;
        stats[s].append_us = calloc(threads * 3, sizeof(double));
        if (!stats[s].append_us || convo_open_ex(&st[s], url, &so, &err) != 0) {
            fprintf(stderr, "sqlite-wal-cost: %s: %s\n", url, err.message);
            return 1;
        }
    }
    char text[201], msgs[2][300];
    memset(text, 'x', 200);
    text[200] = '\0';
    snprintf(msgs[0], sizeof msgs[0], "{\"role\":\"user\",\"content\":\"%s\"}", text);
    snprintf(msgs[1], sizeof msgs[1], "{\"role\":\"assistant\",\"content\":\"%s\"}", text);
    const char *const m[2] = {msgs[0], msgs[1]};
    const char *only = getenv("WAL_COST_ONLY"); /* one store's writes (callgrind) */
    for (size_t b = 0; b < threads; b += BLOCK) {
        int first = (b / BLOCK) % 2 ? BARE : INDEXED; /* as the bench: turn about */
        for (int k = 0; k < STORES; k++) {
            int s = k ? !first : first;
            if (only && strcmp(only, names[s]))
                continue;
            for (size_t i = b; i < b + BLOCK && i < threads; i++)
                if (seed_thread(st[s], s, threads, users, i, m, argv[1]) != 0) {
                    fprintf(stderr, "sqlite-wal-cost: a write failed\n");
                    return 1;
                }
        }
    }
    report(threads, argv[4]);
    for (int s = 0; s < STORES && !checkpointing; s++)
        pages_by_btree(argv[1], s, threads);
    for (int s = 0; s < STORES; s++) {
        convo_close(st[s]);
        free(stats[s].append_us);
    }
    return 0;
}
