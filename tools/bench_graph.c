/* bench_graph.c — `convo bench --scenario conversation --graph`: a conversation
 * shaped as LangGraph's runtime writes it (issue 24 §6), through log
 * references: per turn an input checkpoint whose __start__ value holds the
 * user's message, the __start__ task's pending write, the checkpoint that
 * commits it, the node's write (the answer) and the checkpoint that commits
 * that — 3 checkpoints and 2 pending writes a turn. Reports turns/s, the put
 * time per turn near turn 100 and near the last, a checkpoint read, and the
 * bytes stored against the same messages appended alone (what the
 * checkpoints cost outside the log). */
#include "bench.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW 20 /* turns averaged for "per turn at turn N" */

typedef struct graph_run {
    convo_store *s;
    const char *thread;
    char **log;      /* the messages so far (texts), seqs 0.. */
    int64_t *seqs;   /* their seqs (the hints a binding keeps) */
    size_t n, cap;
    unsigned seed;
    double raw;      /* bytes of message content */
    size_t payload;
} graph_run;

static int keep(graph_run *g, char *msg, int64_t seq)
{
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 256;
        char **l = realloc(g->log, cap * sizeof *l);
        int64_t *q = l ? realloc(g->seqs, cap * sizeof *q) : NULL;
        if (l)
            g->log = l;
        if (!l || !q)
            return CONVO_ENOMEM;
        g->seqs = q;
        g->cap = cap;
    }
    g->log[g->n] = msg;
    g->seqs[g->n++] = seq;
    return 0;
}

/* A LangGraph-shaped body (the checkpoint without its values). */
static int body_of(char *buf, size_t size, size_t turn, int step, const char *id)
{
    return snprintf(buf, size,
                    "{\"v\":4,\"ts\":\"2026-11-26T10:00:00.%06zu+00:00\",\"id\":\"%s\","
                    "\"channel_versions\":{\"__start__\":\"%016zu.%d\",\"messages\":\"%016zu.%d\","
                    "\"branch:to:agent\":\"%016zu.%d\"},\"versions_seen\":{\"__input__\":{},"
                    "\"__start__\":{\"__start__\":\"%016zu.%d\"},\"agent\":"
                    "{\"branch:to:agent\":\"%016zu.%d\"}}}",
                    turn % 1000000, id, 3 * turn + 1, step, 3 * turn + 2, step, 3 * turn + 2,
                    step, 3 * turn + 1, step, 3 * turn + 2, step);
}

static int put(graph_run *g, const char *id, const char *parent, int step, size_t turn,
               const char *version, const convo_items_in *start, const convo_items_in *msgs,
               int64_t prefix)
{
    char body[1024], meta[128];
    int bl = body_of(body, sizeof body, turn, step, id);
    snprintf(meta, sizeof meta, "{\"source\":\"%s\",\"step\":%d,\"parents\":{}}",
             step < 0 ? "input" : "loop", (int)(2 * turn) + step);
    convo_channel_in ch[2];
    const convo_items_in *items[2];
    size_t n = 0;
    if (start) {
        ch[n] = (convo_channel_in){"__start__", version, NULL};
        items[n++] = start;
    }
    ch[n] = (convo_channel_in){"messages", version, NULL};
    items[n++] = msgs;
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = g->thread;
    cp.checkpoint_id = id;
    cp.parent_id = parent;
    cp.metadata_json = meta;
    cp.body = (convo_blob){"json", body, (size_t)bl};
    cp.channels = ch;
    cp.nchannels = n;
    cp.channel_items = items;
    int64_t prefixes[2] = {0, 0};
    prefixes[n - 1] = prefix;
    cp.channel_log_prefix = prefixes;
    convo_error err;
    int rc = convo_checkpoint_put(g->s, &cp, &err);
    if (rc != 0)
        fprintf(stderr, "convo: bench: put %s: %s\n", id, err.message);
    return rc;
}

static int write_msg(graph_run *g, const char *id, const char *task, const char *msg)
{
    convo_items_in it = CONVO_ITEMS_IN_INIT;
    it.items = &msg;
    it.n = 1;
    const convo_items_in *per[1] = {&it};
    convo_write_in w = {0, "messages", {NULL, NULL, 0}};
    convo_writes_in in = CONVO_WRITES_IN_INIT;
    in.thread_id = g->thread;
    in.checkpoint_id = id;
    in.task_id = task;
    in.writes = &w;
    in.n = 1;
    in.items = per;
    convo_error err;
    int rc = convo_checkpoint_put_writes_ex(g->s, &in, &err);
    if (rc != 0)
        fprintf(stderr, "convo: bench: writes %s: %s\n", id, err.message);
    return rc;
}

/* The messages list as a binding passes it: the log's first k messages (those
 * whose seq is their place), then the rest item by item; *out receives the seqs
 * of the rest. Returns k. */
static int64_t as_prefix(graph_run *g, convo_items_in *msgs, int64_t *out)
{
    size_t k = 0;
    while (k < g->n && g->seqs[k] == (int64_t)k)
        k++;
    msgs->items = (const char *const *)g->log + k;
    msgs->seqs = g->seqs + k;
    msgs->n = g->n - k;
    msgs->seqs_out = out;
    return (int64_t)k;
}

/* One turn: 3 checkpoints, 2 pending writes, 2 messages into the log. */
static int turn(graph_run *g, size_t t)
{
    char in[32], c0[32], c1[32], prev[32], v[32];
    snprintf(in, sizeof in, "%08zu-in", t);
    snprintf(c0, sizeof c0, "%08zu-0", t);
    snprintf(c1, sizeof c1, "%08zu-1", t);
    snprintf(prev, sizeof prev, "%08zu-1", t - 1);
    char *user = bench_message("user", g->payload / 2, &g->seed);
    char *answer = bench_message("assistant", g->payload, &g->seed);
    if (!user || !answer) {
        free(user);
        free(answer);
        return CONVO_ENOMEM;
    }
    g->raw += (double)(strlen(user) + strlen(answer));
    convo_items_in start = CONVO_ITEMS_IN_INIT;
    start.items = (const char *const *)&user;
    start.n = 1;
    start.key = "messages";
    /* the input: messages unchanged (the previous list, all known) */
    convo_items_in msgs = CONVO_ITEMS_IN_INIT;
    msgs.log = 1;
    int64_t out[2];
    int64_t k = as_prefix(g, &msgs, NULL);
    snprintf(v, sizeof v, "%zu.in", t);
    int rc = put(g, in, t ? prev : NULL, -1, t, v, &start, &msgs, k);
    if (rc == 0)
        rc = write_msg(g, in, "start", user);
    if (rc == 0)
        rc = keep(g, user, -1);
    else
        free(user);
    if (rc == 0) {
        k = as_prefix(g, &msgs, out);
        snprintf(v, sizeof v, "%zu.0", t);
        rc = put(g, c0, in, 0, t, v, NULL, &msgs, k);
        if (rc == 0)
            g->seqs[g->n - 1] = out[msgs.n - 1];
    }
    if (rc == 0)
        rc = write_msg(g, c0, "agent", answer);
    if (rc == 0 && (rc = keep(g, answer, -1)) == 0) {
        k = as_prefix(g, &msgs, out);
        snprintf(v, sizeof v, "%zu.1", t);
        rc = put(g, c1, c0, 1, t, v, NULL, &msgs, k);
        if (rc == 0)
            g->seqs[g->n - 1] = out[msgs.n - 1];
    } else if (rc != 0) {
        free(answer);
    }
    return rc;
}

static void free_run(graph_run *g)
{
    for (size_t i = 0; i < g->n; i++)
        free(g->log[i]);
    free(g->log);
    free(g->seqs);
}

int bench_graph(const char *url, size_t turns, size_t payload, int json, convo_error *err)
{
    convo_store *s;
    int rc = convo_open(&s, url, err);
    if (rc != 0)
        return rc;
    char thread[96], plain[96];
    snprintf(thread, sizeof thread, "bench-%s-graph", bench_run_id());
    snprintf(plain, sizeof plain, "bench-%s-graph-log", bench_run_id());
    graph_run g = {s, thread, NULL, NULL, 0, 0, 7, 0, payload};
    int64_t b0 = 0, b1 = 0, b2 = 0;
    int have_bytes = convo_store_bytes(s, &b0, NULL) == 0;
    double *per = calloc(turns ? turns : 1, sizeof *per);
    if (!per)
        rc = CONVO_ENOMEM;
    double t0 = bench_now();
    for (size_t t = 0; rc == 0 && t < turns; t++) {
        double a = bench_now();
        rc = turn(&g, t);
        per[t] = bench_now() - a;
        bench_progress("conversation --graph", t + 1, turns);
    }
    double secs = bench_now() - t0;
    if (rc == 0 && have_bytes)
        rc = convo_store_bytes(s, &b1, err);
    /* the same messages appended alone: what the log costs by itself */
    for (size_t i = 0; rc == 0 && i < g.n; i += 2)
        rc = convo_append(s, plain, (const char *const *)&g.log[i], NULL, i + 1 < g.n ? 2 : 1,
                          NULL, NULL, err);
    if (rc == 0 && have_bytes)
        rc = convo_store_bytes(s, &b2, err);
    double get_ms = 0, get_known_ms = 0;
    if (rc == 0 && turns) {
        char last[32];
        snprintf(last, sizeof last, "%08zu-1", turns - 1);
        const int reps = 20;
        double a = bench_now();
        for (int i = 0; rc == 0 && i < reps; i++) {
            convo_checkpoint *cp;
            rc = convo_checkpoint_get(s, thread, "", last, &cp, err);
            convo_checkpoint_free(cp);
        }
        get_ms = (bench_now() - a) * 1e3 / reps;
        /* the same get by a binding that holds every message but the last turn's
         * (convo_checkpoint_get_ex with the known prefix) */
        convo_checkpoint *cp = NULL;
        if (rc == 0)
            rc = convo_checkpoint_get(s, thread, "", last, &cp, err);
        convo_checkpoint_get_opts o = CONVO_CHECKPOINT_GET_OPTS_INIT;
        o.thread_id = thread;
        o.checkpoint_id = last;
        o.known_generation = convo_checkpoint_generation(cp);
        o.known_origin = convo_checkpoint_log_origin(cp);
        o.known_length = g.n >= 2 ? (int64_t)g.n - 2 : 0;
        convo_checkpoint_free(cp);
        a = bench_now();
        for (int i = 0; rc == 0 && i < reps; i++) {
            rc = convo_checkpoint_get_ex(s, &o, &cp, err);
            convo_checkpoint_free(cp);
        }
        get_known_ms = (bench_now() - a) * 1e3 / reps;
    }
    if (rc == 0) {
        size_t at = turns > 100 ? 100 : turns / 2;
        double early = 0, late = 0;
        size_t ne = 0, nl = 0;
        for (size_t t = at >= WINDOW / 2 ? at - WINDOW / 2 : 0; t < turns && ne < WINDOW; t++, ne++)
            early += per[t];
        for (size_t t = turns > WINDOW ? turns - WINDOW : 0; t < turns; t++, nl++)
            late += per[t];
        early = ne ? early / (double)ne : 0;
        late = nl ? late / (double)nl : 0;
        double total = (double)(b1 - b0), logb = (double)(b2 - b1);
        double outside = total - logb, cps = 3.0 * (double)turns;
        if (json)
            printf("{\"scenario\":\"conversation\",\"mode\":\"graph\",\"driver\":\"%s\","
                   "\"turns\":%zu,\"payload_bytes\":%zu,\"seconds\":%.6f,\"turns_per_sec\":%.1f,"
                   "\"turn_ms_at_%zu\":%.3f,\"turn_ms_last\":%.3f,\"get_ms\":%.3f,"
                   "\"get_known_ms\":%.3f,"
                   "\"raw_bytes\":%.0f,\"stored_bytes\":%.0f,\"log_alone_bytes\":%.0f,"
                   "\"bytes_per_checkpoint_outside_log\":%.1f,\"storage_ratio\":%.3f}\n",
                   convo_store_driver(s), turns, payload, secs, (double)turns / secs, at,
                   early * 1e3, late * 1e3, get_ms, get_known_ms, g.raw, have_bytes ? total : -1,
                   have_bytes ? logb : -1, have_bytes ? outside / cps : -1,
                   have_bytes ? total / g.raw : -1);
        else
            printf("conversation --graph on %s: %zu turns (3 checkpoints, 2 pending writes "
                   "each) in %.3f s = %.0f turns/s; per turn %.3f ms at turn %zu, %.3f ms at "
                   "the last (%.2fx); get of the last checkpoint %.3f ms (%.3f ms holding all "
                   "but the last turn's messages: convo_checkpoint_get_ex); message content "
                   "%.0f bytes, stored %.0f bytes (%.2fx), the log alone %.0f: %.0f bytes per "
                   "checkpoint outside the log\n",
                   convo_store_driver(s), turns, secs, (double)turns / secs, early * 1e3, at,
                   late * 1e3, early > 0 ? late / early : 0, get_ms, get_known_ms, g.raw, total,
                   total / g.raw, logb, outside / cps);
    }
    convo_thread_delete(s, thread, NULL);
    convo_thread_delete(s, plain, NULL);
    free(per);
    free_run(&g);
    convo_close(s);
    return rc;
}
