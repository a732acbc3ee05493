/* rewrite.c — the tail rewrite (convo_replace_tail): one script, rewrite.lua,
 * on the thread's eight keys, so the removal, the new messages, the
 * generation, the idempotency record and the checkpoints past keep change
 * together or not at all (docs/redis.md, "The tail rewrite"). */
#include "redis_int.h"
#include <stdlib.h>
#include <string.h>

typedef struct rewrite_call {
    const convo_backend *b;
    int in_window; /* one server: the store set the thread's activity time lately */
    const thread_keys *tk;
    int64_t keep;
    const convo_rewrite_opts *o;
    const packbuf *pb;
    size_t n;
    char *ix_arg; /* one server outside the window: "P:ix:r\0ID" */
    size_t ix_arg_len;
} rewrite_call;

static int rewrite_build(const rewrite_call *w, cmd *c)
{
    convo__rd_cmd_script_head(c, w->tk);
    convo__rd_cmd_spec(c, w->tk);
    convo__rd_cmd_num(c, w->b->ttl_ms);
    convo__rd_cmd_num(c, w->keep);
    convo__rd_cmd_num(c, w->o->expected_length);
    convo__rd_cmd_num(c, w->o->expected_generation);
    convo__rd_cmd_str(c, w->o->idempotency_key ? w->o->idempotency_key : "");
    convo__rd_cmd_add(c, w->o->drop_checkpoints ? "1" : "0", 1);
    for (size_t i = 0; i < w->n; i++)
        convo__rd_cmd_part(c, w->pb, i);
    return c->failed ? CONVO_ENOMEM : 0;
}

/* rewrite_quick.lua's call: msgs and meta (and cp, cpidx on a cluster), the
 * clock, 'p' inside the window, "P:ix:r\0ID" outside it ('' on a cluster),
 * keep ('-' for a pop of the last message of the expected length), the
 * conditions, the records: every key and argument costs the server about
 * 1,000 instructions (docs/redis.md, "The quick script"). */
static int rewrite_quick_build(const rewrite_call *w, cmd *c)
{
    static const int keys[] = {K_MSGS, K_META, K_CP, K_CPIDX};
    const thread_keys *tk = w->tk;
    const char *z = memchr(tk->spec, '\0', tk->spec_len);
    int nkeys = w->b->cluster ? 4 : 2;
    convo__rd_cmd_add(c, "EVALSHA", 7);
    convo__rd_cmd_add(c, "", 0); /* set by convo__rd_pipeline_script() */
    convo__rd_cmd_num(c, nkeys);
    for (int i = 0; i < nkeys; i++)
        convo__rd_cmd_add(c, tk->k[keys[i]], tk->len[keys[i]]);
    convo__rd_cmd_add(c, tk->spec, z ? (size_t)(z - tk->spec) : tk->spec_len); /* NOW */
    if (w->ix_arg)
        convo__rd_cmd_add(c, w->ix_arg, w->ix_arg_len);
    else
        convo__rd_cmd_str(c, w->b->cluster ? "" : "p");
    if (w->n == 0 && w->o->expected_length >= 0 && w->keep == w->o->expected_length - 1)
        convo__rd_cmd_add(c, "-", 1);
    else
        convo__rd_cmd_num(c, w->keep);
    convo__rd_cmd_num(c, w->o->expected_length);
    convo__rd_cmd_num(c, w->o->expected_generation);
    for (size_t i = 0; i < w->n; i++)
        convo__rd_cmd_part(c, w->pb, i);
    return c->failed ? CONVO_ENOMEM : 0;
}

/* Decimal digits (at most 18) as a number, else -1. */
static long long decimal(const char *s, size_t len)
{
    long long v = 0;
    if (len == 0 || len > 18)
        return -1;
    for (size_t i = 0; i < len; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v;
}

/* rewrite_quick.lua's answer: the generation (as text) when an expected
 * length was given, else {removed, generation}. */
static int rewrite_quick_result(const rewrite_call *w, const redisReply *r,
                                convo_rewrite_result *res, convo_error *err)
{
    if (r->type == REDIS_REPLY_ERROR)
        return convo__rd_reply_error(r, err);
    long long removed = -1, gen = -1;
    if (r->type == REDIS_REPLY_STRING && w->o->expected_length >= 0) {
        removed = w->o->expected_length - w->keep;
        gen = decimal(r->str, r->len);
    } else if (r->type == REDIS_REPLY_ARRAY && r->elements == 2 &&
               r->element[0]->type == REDIS_REPLY_INTEGER &&
               r->element[1]->type == REDIS_REPLY_INTEGER) {
        removed = r->element[0]->integer;
        gen = r->element[1]->integer;
    }
    if (removed < 0 || gen < 1)
        return convo__error(err, CONVO_EIO, NULL, "redis: unexpected reply to a tail rewrite");
    *res = (convo_rewrite_result){w->keep, w->n, removed, gen, 0};
    return 0;
}

/* The script's answer {replayed, first_seq, count, removed, generation}. */
static int rewrite_result(const redisReply *r, convo_rewrite_result *res, convo_error *err)
{
    if (r->type == REDIS_REPLY_ERROR)
        return convo__rd_reply_error(r, err);
    long long v[5];
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 5)
        return convo__error(err, CONVO_EIO, NULL, "redis: unexpected reply to a tail rewrite");
    for (size_t i = 0; i < 5; i++) {
        if (r->element[i]->type != REDIS_REPLY_INTEGER || r->element[i]->integer < 0)
            return convo__error(err, CONVO_EIO, NULL,
                                "redis: unexpected reply to a tail rewrite");
        v[i] = r->element[i]->integer;
    }
    res->replayed = (int)v[0];
    res->first_seq = v[1];
    res->count = (size_t)v[2];
    res->removed = v[3];
    res->generation = v[4];
    return 0;
}

static int is_status(const redisReply *r, const char *what)
{
    return r->type == REDIS_REPLY_STATUS && r->len == strlen(what) &&
           memcmp(r->str, what, r->len) == 0;
}

/* The script: without ttl, idempotency key or drop_checkpoints the quick one
 * (rewrite_quick.lua: no prelude, no index.lua), which answers CONVO_SLOW,
 * having written nothing, for what it leaves to the common one (no checkpoint
 * code, the cheaper for the server); with drop_checkpoints, or once the common
 * one met checkpoints past keep (CONVO_CHECKPOINTS, nothing written), the one
 * that drops or names them. A thread whose checkpoints are not indexed by log
 * length yet (CONVO_MIGRATE, nothing written) is migrated and the script sent
 * again. */
static int rewrite_run(convo_backend *b, rconn *c, const char *id, const rewrite_call *w,
                       redisReply **r, int *ran, convo_error *err)
{
    cmd cmds[3] = {{0}}, *call = &cmds[0];
    redisReply *rr[3] = {NULL};
    /* the quick script moves no value's activity set: on one server, only
     * for a store without declared keys (layout 6 keeps those sets) */
    int quick = b->ttl_ms == 0 && !w->o->idempotency_key && (b->cluster || b->ix_nkeys == 0);
    int script = w->o->drop_checkpoints ? S_REWRITE_CP : quick ? S_REWRITE_QUICK : S_REWRITE;
    int rc = (script == S_REWRITE_QUICK ? rewrite_quick_build(w, call) : rewrite_build(w, call))
                 ? convo__rd_oom(err)
                 : 0;
    size_t n = 1;
    if (b->cluster) { /* the index's reads, after the script (docs/redis.md) */
        convo__rd_ix_read_cmds(b, w->tk, &cmds[1]);
        n = 3;
    }
    for (int migrated = 0; rc == 0;) {
        convo__rd_replies_free(rr, 3);
        rc = convo__rd_pipeline_script(b, c, cmds, n, 0, script, rr, err);
        *r = rr[0];
        rr[0] = NULL;
        if (rc != 0 || !(convo__rd_is_migrate(*r) || is_status(*r, "CONVO_CHECKPOINTS") ||
                         is_status(*r, "CONVO_SLOW")))
            break;
        if (is_status(*r, "CONVO_SLOW")) { /* the same call as the common script */
            script = S_REWRITE;
            convo__rd_cmd_free(call);
            *call = (cmd){0};
            if (rewrite_build(w, call) != 0)
                rc = convo__rd_oom(err);
        } else if (is_status(*r, "CONVO_CHECKPOINTS"))
            script = S_REWRITE_CP;
        else if (migrated++ >= RELAYOUT_TRIES)
            rc = convo__rd_relayout_gave_up(id, err);
        else
            rc = convo__rd_thread_relayout(b, c, id, err);
        freeReplyObject(*r);
        *r = NULL;
    }
    *ran = script;
    if (rc == 0 && b->cluster && (*r)->type != REDIS_REPLY_ERROR)
        (void)convo__rd_ix_write(b, c, id, rr[1], rr[2], NULL);
    convo__rd_replies_free(rr, 3);
    for (size_t i = 0; i < 3; i++)
        convo__rd_cmd_free(&cmds[i]);
    return rc;
}

/* The quick script's index argument outside the window: P:ix:r, NUL, the id. */
static int ix_arg_make(const convo_backend *b, const char *id, rewrite_call *w)
{
    size_t kl = strlen(b->ix_recent), il = strlen(id);
    if (!(w->ix_arg = malloc(kl + 1 + il)))
        return CONVO_ENOMEM;
    memcpy(w->ix_arg, b->ix_recent, kl);
    w->ix_arg[kl] = '\0';
    memcpy(w->ix_arg + kl + 1, id, il);
    w->ix_arg_len = kl + 1 + il;
    return 0;
}

int convo__rd_replace_tail(convo_backend *b, const char *thread_id, int64_t keep,
                           const convo_message_in *msgs, size_t n, const convo_rewrite_opts *opts,
                           convo_rewrite_result *res, convo_error *err)
{
    thread_keys tk;
    packbuf pb = {0};
    if (convo__rd_keys_make(b, thread_id, &tk) != 0)
        return convo__rd_oom(err);
    int rc = n ? convo__rd_pack_records(msgs, n, NULL, convo__rd_spec_now(&tk), &pb) : 0;
    if (rc != 0)
        rc = convo__rd_pack_error(rc, err);
    uint64_t h = convo__rd_id_hash(thread_id);
    int64_t now = convo__rd_spec_now(&tk);
    rewrite_call w = {b, !b->cluster && convo__rd_recent_in_window(b, h, now), &tk, keep, opts,
                      &pb, n, NULL, 0};
    if (rc == 0 && !b->cluster && !w.in_window && (rc = ix_arg_make(b, thread_id, &w)) != 0)
        rc = convo__rd_oom(err);
    rconn *c;
    redisReply *r = NULL;
    int ran = S_REWRITE;
    if (rc == 0 && (rc = convo__rd_acquire(b, &c, err)) == 0) {
        rc = rewrite_run(b, c, thread_id, &w, &r, &ran, err);
        convo__rd_release(b, c);
    }
    if (rc == 0)
        rc = ran == S_REWRITE_QUICK ? rewrite_quick_result(&w, r, res, err)
                                    : rewrite_result(r, res, err);
    /* the script moved the activity time (one server, outside the window) */
    if (rc == 0 && !b->cluster && !w.in_window && !res->replayed && convo__rd_recent_has(b, h))
        convo__rd_recent_moved(b, h, now);
    freeReplyObject(r);
    convo__rd_packbuf_free(&pb);
    free(w.ix_arg);
    free(tk.buf);
    return rc;
}
