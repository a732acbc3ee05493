/* checkpoint-diff.c — a driver's checkpoints against memory:'s, operation by
 * operation: a seeded random run of puts (new ones, with ordered ids, and in
 * namespace "sub" a fifth unordered, and puts again), put_writes (idx >= 0 and negative), prunes and deletes
 * by run (rare, so that SQLite's blocks of 16 fill and seal), reopens of the
 * store (alternately with ALT_URL: SQLite's seal=0), and reads — get by id,
 * latest, list with before, limit and a metadata filter — each done on both
 * stores and compared byte for byte (all but created_at). Threads of their own
 * get appends, save_extra of a declared key (user_id), forks and deletes, and
 * thread listings (by user_id or not, in each order and direction, walked page
 * by page with each store's own cursor) are compared too: ids, lengths, extra
 * and last messages. Every read crosses
 * whatever the driver keeps apart (SQLite layout 17's rows, hot table and
 * sealed segments; PostgreSQL schema 42's rows and segments, which seal only
 * ids above every id sealed before: hence the ordered ids of namespace "").
 * Run by tests/checkpoints.sh.
 *   tests/checkpoint_diff URL ALT_URL|- OPS SEED
 * Exit 0 when every result agreed, 1 naming the first that did not. */
#include <convo.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 2
#define NAMESPACES 2
#define MAX_IDS 8000

static const char *const thread_ids[THREADS] = {"t0", "t1"};
static const char *const namespaces[NAMESPACES] = {"", "sub"};

typedef struct lane { /* the checkpoints of one thread and namespace, in put order */
    char ids[MAX_IDS][48];
    int n;
    char versions[3][24]; /* each channel's current version */
} lane;

static lane lanes[THREADS][NAMESPACES];
static convo_store *stores[2]; /* memory:, the driver's */
static const char *urls[2];    /* the driver's, its alternate */
static const char *const indexed[] = {"user_id", NULL};
static uint64_t state;
static long op;
static int versions_made;

static unsigned rnd(unsigned n)
{
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    return (unsigned)(state % n);
}

static void fail(const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "checkpoint_diff: operation %ld: ", op);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    exit(1);
}

/* ---- results as text ---- */

typedef struct text {
    char *p;
    size_t len, cap;
} text;

static void add(text *t, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0 || (t->len + (size_t)n + 1 > t->cap &&
                  !(t->p = realloc(t->p, t->cap = (t->len + (size_t)n + 1) * 2))))
        fail("out of memory");
    va_start(ap, fmt);
    vsnprintf(t->p + t->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    t->len += (size_t)n;
}

static void add_blob(text *t, convo_blob b)
{
    add(t, "%s:%.*s", b.type ? b.type : "-", (int)b.len, b.bytes ? (const char *)b.bytes : "");
}

/* Everything of cp but created_at, which each store sets. */
static void add_checkpoint(text *t, const convo_checkpoint *cp)
{
    const char *parent = convo_checkpoint_parent_id(cp);
    add(t, "%s|%s|%s|parent %s|%s|log %lld|", convo_checkpoint_thread_id(cp),
        convo_checkpoint_ns(cp), convo_checkpoint_id(cp), parent ? parent : "-",
        convo_checkpoint_metadata(cp), (long long)convo_checkpoint_log_length(cp));
    add_blob(t, convo_checkpoint_body(cp));
    for (size_t i = 0; i < convo_checkpoint_channel_count(cp); i++) {
        const char *version;
        convo_blob v;
        add(t, "|%s@", convo_checkpoint_channel(cp, i, &version, &v));
        add(t, "%s=", version);
        add_blob(t, v);
    }
    for (size_t i = 0; i < convo_checkpoint_write_count(cp); i++) {
        const char *path, *channel;
        int64_t idx;
        convo_blob v;
        const char *task = convo_checkpoint_write(cp, i, &path, &idx, &channel, &v);
        add(t, "|w %s %s %lld %s=", task, path, (long long)idx, channel);
        add_blob(t, v);
    }
    add(t, "\n");
}

static void same(const char *what, text r[2])
{
    if (strcmp(r[0].p ? r[0].p : "", r[1].p ? r[1].p : "") != 0)
        fail("%s differs:\n  memory:     %s\n  the driver: %s", what, r[0].p, r[1].p);
    free(r[0].p);
    free(r[1].p);
}

static void same_rc(const char *what, const int rc[2], convo_error err[2])
{
    if (rc[0] != rc[1])
        fail("%s: memory %d (%s), the driver %d (%s)", what, rc[0], err[0].message, rc[1],
             err[1].message);
}

static int open_store(convo_store **s, const char *url, convo_error *err)
{
    convo_store_opts o = CONVO_STORE_OPTS_INIT;
    o.indexed_keys = indexed;
    return convo_open_ex(s, url, &o, err);
}

/* ---- writes ---- */

static void put(lane *l, int t, int ns, int again)
{
    char meta[160], body[640], values[3][48];
    int n = again ? (int)rnd((unsigned)l->n) : l->n;
    if (!again && l->n == MAX_IDS)
        return;
    if (!again && ns == 1 && rnd(5) == 0) /* an id that does not sort in put order */
        snprintf(l->ids[n], sizeof l->ids[n], "x%08x", rnd(1u << 30));
    else if (!again)
        snprintf(l->ids[n], sizeof l->ids[n], "1f0%05x-0000-6000-8000-%012d", n, t * 10 + ns);
    snprintf(meta, sizeof meta, "{\"step\":%d,\"run_id\":\"r%u\",\"source\":\"loop\",\"x\":%u}",
             n, rnd(4), rnd(3));
    int len = snprintf(body, sizeof body, "body-%d-", n);
    for (unsigned i = 0, k = rnd(500); i < k; i++) /* repetitive, as checkpoints are */
        body[len++] = "abcab"[rnd(5)];
    body[len] = '\0';
    convo_blob blobs[3];
    convo_channel_in channels[3];
    for (int i = 0; i < 3; i++) {
        if (!l->versions[i][0] || rnd(3) == 0)
            snprintf(l->versions[i], sizeof l->versions[i], "%d", ++versions_made);
        snprintf(values[i], sizeof values[i], "\"v%s-%d\"", l->versions[i], i);
        blobs[i] = (convo_blob){"json", values[i], strlen(values[i])};
        channels[i] = (convo_channel_in){i == 0 ? "a" : i == 1 ? "b" : "c", l->versions[i],
                                         &blobs[i]};
    }
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = thread_ids[t];
    cp.checkpoint_ns = namespaces[ns];
    cp.checkpoint_id = l->ids[n];
    cp.parent_id = n ? l->ids[n - 1] : NULL;
    cp.metadata_json = meta;
    if (rnd(5))
        cp.body = (convo_blob){"text", body, strlen(body)};
    cp.channels = channels;
    cp.nchannels = 1 + rnd(3);
    convo_error err[2];
    int rc[2];
    for (int s = 0; s < 2; s++)
        rc[s] = convo_checkpoint_put(stores[s], &cp, &err[s]);
    same_rc("put", rc, err);
    if (rc[0] == 0 && !again)
        l->n++;
}

static void put_writes(lane *l, int t, int ns)
{
    char task[16], values[2][24];
    convo_write_in w[2];
    size_t n = 1 + rnd(2);
    snprintf(task, sizeof task, "task-%u", rnd(3));
    for (size_t i = 0; i < n; i++) {
        snprintf(values[i], sizeof values[i], "\"w%u\"", rnd(1000));
        int64_t idx = rnd(5) == 0 ? -1 - (int64_t)rnd(2) : (int64_t)rnd(4);
        w[i] = (convo_write_in){idx, "a", {"json", values[i], strlen(values[i])}};
    }
    const char *id = l->ids[rnd((unsigned)l->n)];
    convo_error err[2];
    int rc[2];
    for (int s = 0; s < 2; s++)
        rc[s] = convo_checkpoint_put_writes(stores[s], thread_ids[t], namespaces[ns], id, task,
                                            "~p", w, n, &err[s]);
    same_rc("put_writes", rc, err);
}

static void prune(int t)
{
    size_t keep = 5 + rnd(40);
    convo_error err[2];
    int rc[2];
    for (int s = 0; s < 2; s++)
        rc[s] = convo_checkpoint_prune(stores[s], thread_ids[t], keep, &err[s]);
    same_rc("prune", rc, err);
}

static void delete_run(void)
{
    char filter[48];
    snprintf(filter, sizeof filter, "{\"run_id\":\"r%u\",\"x\":%u}", rnd(4), rnd(3));
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.filter_json = filter;
    if (rnd(2))
        o.thread_id = thread_ids[rnd(THREADS)];
    uint64_t removed[2] = {0, 0};
    convo_error err[2];
    int rc[2];
    for (int s = 0; s < 2; s++)
        rc[s] = convo_checkpoint_delete(stores[s], &o, &removed[s], &err[s]);
    same_rc("delete by run", rc, err);
    if (removed[0] != removed[1])
        fail("delete %s removed %llu on memory, %llu on the driver", filter,
             (unsigned long long)removed[0], (unsigned long long)removed[1]);
}

static void reopen(void)
{
    const char *url = urls[1] && rnd(3) == 0 ? urls[1] : urls[0];
    convo_error err;
    convo_close(stores[1]);
    if (open_store(&stores[1], url, &err) != 0)
        fail("reopening: %s", err.message);
}

/* ---- reads ---- */

static void get(int t, int ns, const char *id)
{
    text r[2] = {{0}, {0}};
    for (int s = 0; s < 2; s++) {
        convo_checkpoint *cp = NULL;
        convo_error err;
        int rc = convo_checkpoint_get(stores[s], thread_ids[t], namespaces[ns], id, &cp, &err);
        if (rc)
            add(&r[s], "error %d", rc);
        else
            add_checkpoint(&r[s], cp);
        convo_checkpoint_free(cp);
    }
    char what[96];
    snprintf(what, sizeof what, "get %s/%s/%s", thread_ids[t], namespaces[ns], id ? id : "latest");
    same(what, r);
}

static void list(int t, int ns, const char *before, size_t limit, const char *filter)
{
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = thread_ids[t];
    o.checkpoint_ns = namespaces[ns];
    o.before = before;
    o.limit = limit;
    o.filter_json = filter;
    text r[2] = {{0}, {0}};
    for (int s = 0; s < 2; s++) {
        convo_checkpoint_set *set = NULL;
        convo_error err;
        int rc = convo_checkpoint_list(stores[s], &o, &set, &err);
        if (rc) {
            add(&r[s], "error %d", rc);
            continue;
        }
        add(&r[s], "%zu\n", convo_checkpoint_set_count(set));
        for (size_t i = 0; i < convo_checkpoint_set_count(set); i++)
            add_checkpoint(&r[s], convo_checkpoint_set_get(set, i));
        convo_checkpoint_set_free(set);
    }
    char what[160];
    snprintf(what, sizeof what, "list %s/%s before %s limit %zu filter %s", thread_ids[t],
             namespaces[ns], before ? before : "-", limit, filter ? filter : "-");
    same(what, r);
}

/* ---- threads and their listing ---- */

static unsigned last_user; /* the user_id a save_extra set last: a listing of it finds the
                              thread written last, which SQLite lists apart (layout 15) */

static void thread_write(void)
{
    static char id[16] = "th0"; /* half the time the thread written before: SQLite's open entry */
    char other[16], text[80];
    const char *m = text;
    if (rnd(2))
        snprintf(id, sizeof id, "th%u", rnd(12));
    snprintf(other, sizeof other, "th%u", rnd(12));
    unsigned kind = rnd(20);
    convo_error err[2];
    int rc[2];
    for (int s = 0; s < 2; s++) {
        if (kind < 10) {
            if (s == 0)
                snprintf(text, sizeof text, "{\"role\":\"user\",\"n\":%ld}", op);
            rc[s] = convo_append(stores[s], id, &m, NULL, 1, NULL, NULL, &err[s]);
        } else if (kind < 17) { /* keys in the order PostgreSQL's jsonb keeps them */
            if (s == 0)
                snprintf(text, sizeof text, rnd(4) ? "{\"k\":%u,\"user_id\":\"u%u\"}"
                                                   : "{\"k\":%u,\"user_id\":%u}",
                         rnd(2), last_user = rnd(4));
            rc[s] = convo_save_extra(stores[s], id, text, &err[s]);
        } else if (kind < 19) {
            rc[s] = convo_thread_fork(stores[s], id, other, -1, &err[s]);
        } else {
            rc[s] = convo_thread_delete(stores[s], id, &err[s]);
        }
    }
    same_rc(kind < 10 ? "append" : kind < 17 ? "save_extra" : kind < 19 ? "fork" : "delete", rc,
            err);
}

/* One page as text into r; *next its cursor (malloc'd, NULL at the end). */
static void thread_page(convo_store *s, const convo_thread_list_opts *o, text *r, char **next)
{
    convo_thread_page *p = NULL;
    convo_error err;
    *next = NULL;
    int rc = convo_thread_list_ex(s, o, &p, &err);
    if (rc) {
        add(r, "error %d", rc);
        return;
    }
    for (size_t i = 0; i < convo_thread_page_count(p); i++) {
        size_t len = 0;
        const char *last = convo_thread_page_last_message(p, i, &len);
        const char *extra = convo_thread_page_extra(p, i);
        add(r, "%s %lld %s %.*s\n", convo_thread_page_id(p, i),
            (long long)convo_thread_page_length(p, i), extra ? extra : "-", (int)len,
            last ? last : "-");
    }
    const char *n = convo_thread_page_next(p);
    if (n && !(*next = strdup(n)))
        fail("out of memory");
    convo_thread_page_free(p);
}

static void thread_walk(void)
{
    char where[48];
    convo_thread_list_opts o[2] = {CONVO_THREAD_LIST_OPTS_INIT, CONVO_THREAD_LIST_OPTS_INIT};
    unsigned w = rnd(3);
    snprintf(where, sizeof where,
             w == 1 ? "{\"user_id\":\"u%u\"}" : "{\"k\":1,\"user_id\":\"u%u\"}",
             rnd(2) ? last_user : rnd(4));
    o[0].where_json = w ? where : NULL;
    o[0].order = (int)rnd(3);
    o[0].reverse = (int)rnd(2);
    o[0].limit = 1 + rnd(6);
    o[0].with_extra = (int)rnd(2);
    o[0].with_last_message = (int)rnd(2);
    o[1] = o[0];
    char *cursor[2] = {NULL, NULL};
    for (int page = 0; page < 50; page++) {
        text r[2] = {{0}, {0}};
        for (int s = 0; s < 2; s++) {
            thread_page(stores[s], &o[s], &r[s], &cursor[s]);
            free((char *)o[s].after);
            o[s].after = cursor[s];
        }
        char what[160];
        snprintf(what, sizeof what, "thread list where %s order %d reverse %d limit %zu page %d",
                 o[0].where_json ? o[0].where_json : "-", o[0].order, o[0].reverse,
                 o[0].limit, page);
        same(what, r);
        if (!cursor[0] != !cursor[1])
            fail("%s: one store has a next page, the other not", what);
        if (!cursor[0])
            break;
    }
    free((char *)o[0].after);
    free((char *)o[1].after);
}

static void step(void)
{
    int t = (int)rnd(THREADS), ns = rnd(4) == 0;
    lane *l = &lanes[t][ns];
    unsigned kind = rnd(100);
    char filter[32];
    if (rnd(100) < 15) { /* a listing right after, so that the thread written last is one */
        for (unsigned i = 0, n = 1 + rnd(2); i < n; i++)
            thread_write();
        if (rnd(2) == 0)
            thread_walk();
    } else if (kind < 60 || l->n == 0)
        put(l, t, ns, 0);
    else if (kind < 66)
        put(l, t, ns, 1);
    else if (kind < 80)
        put_writes(l, t, ns);
    else if (kind < 82 && rnd(20) == 0)
        prune(t);
    else if (kind < 84 && rnd(20) == 0)
        delete_run();
    else if (kind < 85)
        reopen();
    else if (kind < 92)
        get(t, ns, l->ids[rnd((unsigned)l->n)]);
    else if (kind < 94)
        get(t, ns, NULL);
    else if (kind < 97) {
        snprintf(filter, sizeof filter, "{\"run_id\":\"r%u\"}", rnd(4));
        list(t, ns, NULL, 0, rnd(2) ? filter : NULL);
    } else
        list(t, ns, l->ids[rnd((unsigned)l->n)], 1 + rnd(20), NULL);
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s URL ALT_URL|- OPS SEED\n", argv[0]);
        return 2;
    }
    urls[0] = argv[1];
    urls[1] = strcmp(argv[2], "-") ? argv[2] : NULL;
    long ops = atol(argv[3]);
    state = strtoull(argv[4], NULL, 10) | 1;
    convo_error err;
    if (open_store(&stores[0], "memory:", &err) != 0 || open_store(&stores[1], urls[0], &err) != 0)
        fail("open: %s", err.message);
    for (op = 0; op < ops; op++)
        step();
    thread_walk();
    for (int t = 0; t < THREADS; t++)
        for (int ns = 0; ns < NAMESPACES; ns++) {
            list(t, ns, NULL, 0, NULL);
            for (int i = 0; i < lanes[t][ns].n; i++)
                get(t, ns, lanes[t][ns].ids[i]);
        }
    convo_close(stores[0]);
    convo_close(stores[1]);
    printf("checkpoint_diff: %ld operations, every read the same as memory:'s\n", ops);
    return 0;
}
