/* layout.c — the stored layout's migrations (docs/redis.md, "Layouts"): 1 -> 2
 * (store-wide checkpoint put orders, cp_migrate.lua) and 2 -> 3 (checkpoints
 * indexed by log length, cp_relayout.lua, from log lengths only the client can
 * decode), for every thread when a store is opened, and for one thread when a
 * call finds it in an older layout (CONVO_MIGRATE); 3 -> 4 (the thread index,
 * reindex.lua) and, on one server, 4 or 5 -> 6 (the activity window: meta's u
 * the activity time, values' activity sets again; reindex.lua too), 6 -> 7
 * (meta's p, a rewrite's time inside the window: nothing to change) and 6 or
 * 7 -> 8 (the extra's fields in meta: reindex.lua moves them). */
#include "redis_int.h"
#include <stdlib.h>
#include <string.h>

#define CP_LAYOUT "3" /* checkpoints indexed by log length */

/* P:store's v of this version: 8 on one server (the activity window, meta's
 * p, the extra's fields in meta); 9 on a cluster (the index sets by slot
 * range, a thread's on its own master; the cluster skipped 5 to 8). */
static const char *layout_of(const convo_backend *b)
{
    return b->cluster ? "9" : "8";
}

/* Sends cmds[0..n) in one pipeline, every step-th one (from 0) a call of
 * `script`; all again with EVAL when a node had lost it (NOSCRIPT): the
 * migration scripts change nothing twice. */
int convo__rd_scripts_each(convo_backend *b, rconn *c, cmd *cmds, size_t n, size_t step,
                           int script, redisReply **r, convo_error *err)
{
    for (int eval = 0; eval < 2; eval++) {
        for (size_t i = 0; i < n; i += step) {
            if (cmds[i].failed)
                return convo__rd_oom(err);
            cmds[i].argv[0] = eval ? "EVAL" : "EVALSHA";
            cmds[i].lens[0] = eval ? 4 : 7;
            cmds[i].argv[1] = eval ? convo__rd_scripts[script] : b->sha[script];
            cmds[i].lens[1] = strlen(cmds[i].argv[1]);
        }
        int rc = convo__rd_pipeline(b, c, cmds, n, r, err), lost = 0;
        if (rc != 0)
            return rc;
        for (size_t i = 0; i < n; i += step)
            lost |= convo__rd_is_noscript(r[i]);
        if (!lost || eval)
            break;
        convo__rd_replies_free(r, n);
    }
    for (size_t i = 0; i < n; i++)
        if (r[i]->type == REDIS_REPLY_ERROR)
            return convo__rd_reply_error(r[i], err);
    return 0;
}

/* cp_relayout's call for one thread: (field, log_length, record) of each
 * checkpoint of the HGETALL reply all; the numbers' text goes to *nums. */
static int relayout_call(cmd *c, const thread_keys *tk, const redisReply *all, char **nums,
                         convo_error *err)
{
    if (all->type != REDIS_REPLY_ARRAY || all->elements % 2)
        return convo__error(err, CONVO_EIO, NULL, "redis: unexpected reply reading checkpoints");
    if (all->elements && !(*nums = malloc(all->elements / 2 * 24)))
        return convo__rd_oom(err);
    convo__rd_cmd_script_head(c, tk);
    for (size_t i = 0; i < all->elements; i += 2) {
        const redisReply *field = all->element[i], *rec = all->element[i + 1];
        int64_t log_length;
        if (field->type != REDIS_REPLY_STRING || convo__rd_record_log_length(rec, &log_length))
            return convo__error(err, CONVO_ECORRUPT, NULL,
                                "redis: a stored checkpoint could not be decoded");
        char *num = *nums + i / 2 * 24;
        convo__rd_cmd_add(c, field->str, field->len);
        convo__rd_cmd_add(c, num, convo__rd_fmt_num(num, log_length));
        convo__rd_cmd_add(c, rec->str, rec->len);
    }
    return c->failed ? convo__rd_oom(err) : 0;
}

/* One round for threads tk[0..n): cp_migrate (layout 1 -> 2) and HGETALL cp
 * of each in one round trip, then cp_relayout of each in another. done[i] is
 * set for each thread in layout 3 after it. A thread with a record that does
 * not decode stays as it is (cp_relayout without triples changes nothing but
 * stale members) and counts in *corrupt: the others go on. */
static int relayout_round(convo_backend *b, rconn *c, const thread_keys *tk, size_t n, char *done,
                          size_t *corrupt, convo_error *err)
{
    cmd *reads = calloc(2 * n, sizeof *reads), *calls = calloc(n, sizeof *calls);
    redisReply **r1 = calloc(2 * n, sizeof *r1), **r2 = calloc(n, sizeof *r2);
    char **nums = calloc(n, sizeof *nums);
    int rc = reads && calls && r1 && r2 && nums ? 0 : convo__rd_oom(err);
    for (size_t i = 0; i < n && rc == 0; i++) {
        convo__rd_cmd_cp_head(&reads[2 * i], b, &tk[i]);
        convo__rd_cmd_str(&reads[2 * i + 1], "HGETALL");
        convo__rd_cmd_add(&reads[2 * i + 1], tk[i].k[K_CP], tk[i].len[K_CP]);
    }
    if (rc == 0)
        rc = convo__rd_scripts_each(b, c, reads, 2 * n, 2, S_CP_MIGRATE, r1, err);
    for (size_t i = 0; i < n && rc == 0; i++) {
        convo_error bad = {0};
        rc = relayout_call(&calls[i], &tk[i], r1[2 * i + 1], &nums[i], &bad);
        if (rc == CONVO_ECORRUPT) {
            (*corrupt)++;
            convo__rd_cmd_free(&calls[i]);
            calls[i] = (cmd){0};
            convo__rd_cmd_script_head(&calls[i], &tk[i]);
            rc = 0;
        } else if (rc != 0 && err) {
            *err = bad;
        }
    }
    if (rc == 0)
        rc = convo__rd_scripts_each(b, c, calls, n, 1, S_CP_RELAYOUT, r2, err);
    for (size_t i = 0; i < n && rc == 0; i++)
        done[i] = r2[i]->type == REDIS_REPLY_INTEGER && r2[i]->integer == 1;
    for (size_t i = 0; reads && i < 2 * n; i++)
        convo__rd_cmd_free(&reads[i]);
    for (size_t i = 0; calls && i < n; i++)
        convo__rd_cmd_free(&calls[i]);
    for (size_t i = 0; nums && i < n; i++)
        free(nums[i]);
    free(nums);
    if (r1)
        convo__rd_replies_free(r1, 2 * n);
    if (r2)
        convo__rd_replies_free(r2, n);
    free(reads);
    free(calls);
    free(r1);
    free(r2);
    return rc;
}

int convo__rd_is_migrate(const redisReply *r)
{
    return r && r->type == REDIS_REPLY_STATUS && r->len == 13 &&
           memcmp(r->str, "CONVO_MIGRATE", 13) == 0;
}

int convo__rd_thread_relayout(convo_backend *b, rconn *c, const char *id, convo_error *err)
{
    thread_keys tk;
    char done = 0;
    size_t corrupt = 0;
    if (convo__rd_keys_make(b, id, &tk) != 0)
        return convo__rd_oom(err);
    int rc = relayout_round(b, c, &tk, 1, &done, &corrupt, err);
    free(tk.buf);
    if (rc == 0 && corrupt)
        rc = convo__error(err, CONVO_ECORRUPT, NULL,
                          "redis: a stored checkpoint of thread %s could not be decoded (it "
                          "cannot be indexed for layout " CP_LAYOUT ")", id);
    return rc;
}

int convo__rd_relayout_gave_up(const char *id, convo_error *err)
{
    return convo__error(err, CONVO_ECONFLICT, NULL,
                        "thread %s: its checkpoints kept changing while they were indexed for "
                        "layout " CP_LAYOUT " (an older convo writing them?): nothing written", id);
}

/* Migrates the threads of an index page: their checkpoints to layout 3, then
 * created_at, updated_at and the index entries of layout 4 (reindex.lua);
 * *all = every one's checkpoints are in layout 3. */
static int migrate_page(convo_backend *b, rconn *c, const redisReply *ids, int *all,
                        convo_error *err)
{
    size_t n = ids->elements, left = 0, corrupt = 0;
    thread_keys *tk = calloc(n + 1, sizeof *tk);
    char *done = calloc(n + 1, 1);
    int rc = tk && done ? 0 : convo__rd_oom(err);
    for (size_t i = 0; i < n && rc == 0; i++) {
        const redisReply *e = ids->element[i];
        if (e->type != REDIS_REPLY_STRING || memchr(e->str, '\0', e->len))
            rc = convo__error(err, CONVO_ECORRUPT, NULL, "redis: bad thread index entry");
        else if (convo__rd_keys_make(b, e->str, &tk[i]) != 0)
            rc = convo__rd_oom(err);
    }
    if (rc == 0 && n > 0)
        rc = relayout_round(b, c, tk, n, done, &corrupt, err);
    /* changed meanwhile: once more, alone; one left behind (or undecodable) is
     * migrated by the call that meets it (CONVO_MIGRATE) */
    for (size_t i = 0; i < n && rc == 0; i++)
        if (!done[i] && (relayout_round(b, c, &tk[i], 1, &done[i], &corrupt, err) != 0 ||
                         !done[i]))
            left++;
    *all = left == 0;
    const char **names = rc == 0 ? calloc(n + 1, sizeof *names) : NULL;
    if (rc == 0 && !names)
        rc = convo__rd_oom(err);
    for (size_t i = 0; i < n && rc == 0; i++)
        names[i] = ids->element[i]->str;
    if (rc == 0)
        rc = convo__rd_ix_reindex(b, c, names, n, err);
    free(names);
    for (size_t i = 0; tk && i < n; i++)
        free(tk[i].buf);
    free(tk);
    free(done);
    return rc;
}

/* HGET P:store v, or (with value) HSET P:store v value; *now = it said
 * this version's layout, *older = it said an older one (absent: neither). A
 * newer layout than this version's is refused (CONVO_ENOTSUP): this version
 * would misread it, and its walk would undo it. */
static int store_version(convo_backend *b, rconn *c, const char *value, int *now, int *older,
                         convo_error *err)
{
    cmd q = {0};
    redisReply *r = NULL;
    convo__rd_cmd_str(&q, value ? "HSET" : "HGET");
    convo__rd_cmd_str(&q, b->store_key);
    convo__rd_cmd_add(&q, "v", 1);
    if (value)
        convo__rd_cmd_str(&q, value);
    int rc = q.failed ? convo__rd_oom(err) : convo__rd_pipeline(b, c, &q, 1, &r, err);
    if (rc == 0 && r->type == REDIS_REPLY_ERROR)
        rc = convo__rd_reply_error(r, err);
    if (rc == 0 && now) {
        long ours = strtol(layout_of(b), NULL, 10), v = -1;
        char text[10], *end;
        if (r->type == REDIS_REPLY_STRING && r->len > 0 && r->len < sizeof text) {
            memcpy(text, r->str, r->len);
            text[r->len] = '\0';
            if ((v = strtol(text, &end, 10)) < 0 || *end)
                v = -1; /* not a layout: walked and set, as an absent one */
        }
        *now = v == ours;
        *older = r->type == REDIS_REPLY_STRING && !*now;
        if (v > ours)
            rc = convo__error(err, CONVO_ENOTSUP, NULL,
                              "redis: the store's layout is %.*s, newer than this libconvo's "
                              "(%s%s): upgrade libconvo", (int)(r->len > 20 ? 20 : r->len),
                              r->str, layout_of(b), b->cluster ? " on a cluster" : "");
    }
    freeReplyObject(r);
    convo__rd_cmd_free(&q);
    return rc;
}

/* P:store's v = 8 (one server; 9 on a cluster) says every thread of the store
 * is in this version's layout; until then each open migrates the threads of
 * the index, 100 at a time, then sets it (unless the index is empty: an open
 * of a new prefix writes nothing). A thread written meanwhile (or not in the
 * index, or still changing) is migrated by its next checkpoint write or
 * rewrite (CONVO_MIGRATE); one left behind keeps v unset, so the next open
 * tries again. On one server every older layout takes the same walk:
 * reindex.lua moves the extra's fields into meta (layout 8) and writes each
 * thread's u and its values' activity sets from its P:ix:r score, which
 * layouts 4 and 5 kept as the thread's updated_at. */
int convo__rd_layout_migrate(convo_backend *b, rconn *c, int reindex, convo_error *err)
{
    convo_error mine = {0};
    int done = 0, all = 1, older = 0, rc = store_version(b, c, NULL, &done, &older, &mine);
    if (reindex) /* index keys declared for the first time: every thread again */
        done = 0;
    char *after = NULL;
    while (rc == 0 && !done) {
        redisReply *r;
        int page_all = 1;
        if ((rc = convo__rd_index_range(b, c, after, 100, &r, &mine)) != 0)
            break;
        /* a store without threads has nothing to migrate: a read-only open of a
         * new prefix writes nothing; a later open that finds threads sets v */
        int empty = !after && r->elements == 0;
        rc = migrate_page(b, c, r, &page_all, &mine);
        all &= page_all;
        done = r->elements < 100;
        free(after);
        after = rc == 0 && !done ? strdup(r->element[r->elements - 1]->str) : NULL;
        if (rc == 0 && !done && !after)
            rc = convo__rd_oom(&mine);
        freeReplyObject(r);
        if (rc == 0 && done && all && older)
            rc = convo__rd_ix_drop_layout4(b, c, &mine);
        if (rc == 0 && done && all && !empty)
            rc = store_version(b, c, layout_of(b), NULL, NULL, &mine);
    }
    free(after);
    /* ?wait=N with too few replicas: written on the master, and a later open
     * migrates again (it changes nothing twice); the store works meanwhile */
    if (rc == CONVO_ETIMEOUT && strcmp(mine.backend_code, "WAIT") == 0)
        return 0;
    if (rc != 0 && err)
        *err = mine;
    return rc;
}
