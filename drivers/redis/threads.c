/* threads.c — threads and their messages: append (RPUSHX or the append
 * script), load, save_extra, delete and fork. */
#include "redis_int.h"
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- append ---- */
/* The activity order changes in the same atomic write as the messages where
 * it changes: on one server (layout 6) an append inside its thread's window
 * (the activity time this store set less than WINDOW_US ago) is a MULTI
 * (RPUSHX, PTTL) that moves nothing, the thread's updated_at being its last
 * record's time; every other append is the append script (index.lua +
 * append.lua), which moves the thread in P:ix:r and its values' :r sets; on a
 * cluster the common one is append_fast.lua (docs/redis.md, "The activity
 * window", "Measuring"). */

/* The script's answer: first_seq, or {first_seq, count} for a replay. */
static int append_result(const redisReply *r, size_t n, convo_append_result *res,
                         convo_error *err)
{
    if (r->type == REDIS_REPLY_ERROR)
        return convo__rd_reply_error(r, err);
    if (r->type == REDIS_REPLY_INTEGER) {
        *res = (convo_append_result){r->integer, n, 0};
        return 0;
    }
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
        r->element[0]->type != REDIS_REPLY_INTEGER || r->element[1]->type != REDIS_REPLY_INTEGER)
        return convo__error(err, CONVO_EIO, NULL, "redis: unexpected reply to the append script");
    *res = (convo_append_result){r->element[0]->integer, (size_t)r->element[1]->integer, 1};
    return 0;
}

typedef struct append_call {
    const convo_backend *b;
    const thread_keys *tk;
    const convo_append_opts *opts;
    const packbuf *pb;
    size_t n;
} append_call;

/* Each key and argument costs the server time, so a script gets only what it
 * uses: on a cluster, without leave to create and without ttl, the list, the
 * idempotency hash, meta and extra (updated_at; the client writes the index). */
static int append_fast_build(const append_call *a, cmd *c)
{
    convo__rd_cmd_script_keys(c, a->tk, 4);
    const char *spec = a->tk->spec, *z = memchr(spec, '\0', a->tk->spec_len);
    convo__rd_cmd_add(c, spec, z ? (size_t)(z - spec) : a->tk->spec_len); /* the spec's clock */
    for (size_t i = 0; i < a->n; i++)
        convo__rd_cmd_part(c, a->pb, i);
    return c->failed ? CONVO_ENOMEM : S_APPEND_FAST;
}

static int append_build(void *ctx, cmd *c, int create)
{
    const append_call *a = ctx;
    const convo_append_opts *o = a->opts;
    if (a->b->cluster && !create && a->b->ttl_ms == 0 && !o->idempotency_key &&
        o->expected_length < 0 && o->expected_generation < 0)
        return append_fast_build(a, c);
    size_t nkeys = create || a->b->ttl_ms > 0 ? K_COUNT : 4;
    convo__rd_cmd_script_keys(c, a->tk, nkeys);
    convo__rd_cmd_spec(c, a->tk);
    convo__rd_cmd_add(c, create ? "1" : "0", 1);
    convo__rd_cmd_str(c, o->idempotency_key ? o->idempotency_key : "");
    convo__rd_cmd_num(c, o->expected_length);
    convo__rd_cmd_num(c, a->b->ttl_ms);
    convo__rd_cmd_num(c, o->expected_generation);
    for (size_t i = 0; i < a->n; i++)
        convo__rd_cmd_part(c, a->pb, i);
    return c->failed ? CONVO_ENOMEM : S_APPEND;
}

/* A deadline found on the list by append_plain(): every key permanent again
 * (persist.lua). The list gone meanwhile means the thread expired or was
 * deleted after the push, which then counts as made before that. */
static int append_persist(convo_backend *b, rconn *c, const thread_keys *tk, convo_error *err)
{
    cmd call = {0};
    redisReply *r = NULL;
    convo__rd_cmd_script_keys(&call, tk, K_COUNT);
    int rc = call.failed ? convo__rd_oom(err)
                         : convo__rd_pipeline_script(b, c, &call, 1, 0, S_PERSIST, &r, err);
    if (rc == 0 && r->type == REDIS_REPLY_ERROR)
        rc = convo__rd_reply_error(r, err);
    freeReplyObject(r);
    convo__rd_cmd_free(&call);
    return rc;
}

/* The common append on one server (no idempotency key, expected length or
 * generation, no ttl, a thread this store appended to lately, inside its
 * window) without a script, which costs the server several times a bare
 * push: MULTI, RPUSHX (writes nothing when the list is missing), the list's
 * PTTL, EXEC, in one round trip and one atomic step. Returns 1 when done, 0
 * when nothing was pushed (no list: a new thread, or one without messages),
 * or an error. A deadline found (a store with ttl left it) is removed after:
 * that cannot undo the append, so its failure is no error (the next write
 * takes the script, which persists). */
static int append_plain(convo_backend *b, rconn *c, const thread_keys *tk, uint64_t h,
                        const packbuf *pb, size_t n, convo_append_result *res, convo_error *err)
{
    cmd q[4] = {{0}};
    redisReply *r[4] = {NULL};
    convo__rd_cmd_str(&q[0], "MULTI");
    convo__rd_cmd_str(&q[1], "RPUSHX");
    convo__rd_cmd_add(&q[1], tk->k[K_MSGS], tk->len[K_MSGS]);
    for (size_t i = 0; i < n; i++)
        convo__rd_cmd_part(&q[1], pb, i);
    convo__rd_cmd_str(&q[2], "PTTL");
    convo__rd_cmd_add(&q[2], tk->k[K_MSGS], tk->len[K_MSGS]);
    convo__rd_cmd_str(&q[3], "EXEC");
    int rc = 0;
    for (int i = 0; i < 4 && rc == 0; i++)
        if (q[i].failed)
            rc = convo__rd_oom(err);
    if (rc == 0)
        rc = convo__rd_pipeline(b, c, q, 4, r, err);
    const redisReply *x = rc == 0 ? r[3] : NULL;
    if (rc == 0 && x->type == REDIS_REPLY_ERROR)
        rc = convo__rd_reply_error(x, err);
    else if (rc == 0 && (x->type != REDIS_REPLY_ARRAY || x->elements != 2))
        rc = convo__error(err, CONVO_EIO, NULL, "redis: unexpected reply to the append");
    else if (rc == 0 && x->element[0]->type == REDIS_REPLY_ERROR)
        rc = convo__rd_reply_error(x->element[0], err);
    else if (rc == 0 && x->element[0]->type != REDIS_REPLY_INTEGER)
        rc = convo__error(err, CONVO_EIO, NULL, "redis: unexpected reply to RPUSHX");
    else if (rc == 0 && x->element[0]->integer > 0) {
        *res = (convo_append_result){x->element[0]->integer - (long long)n, n, 0};
        const redisReply *pttl = x->element[1];
        if (pttl->type == REDIS_REPLY_INTEGER && pttl->integer >= 0 &&
            append_persist(b, c, tk, NULL) != 0)
            convo__rd_recent_forget(b, h);
        rc = 1;
    }
    convo__rd_replies_free(r, 4);
    for (int i = 0; i < 4; i++)
        convo__rd_cmd_free(&q[i]);
    return rc;
}

/* The clock at the head of the scripts' index argument (all of it on a cluster). */
static size_t spec_clock_len(const thread_keys *tk)
{
    const char *z = memchr(tk->spec, '\0', tk->spec_len);
    return z ? (size_t)(z - tk->spec) : tk->spec_len;
}

int convo__rd_append(convo_backend *b, const char *thread_id, const convo_message_in *msgs,
                     size_t n, const convo_append_opts *opts, convo_append_result *res,
                     convo_error *err)
{
    thread_keys tk;
    packbuf pb = {0};
    if (convo__rd_keys_make(b, thread_id, &tk) != 0)
        return convo__rd_oom(err);
    int64_t now = convo__rd_spec_now(&tk); /* the records' time is the script's NOW */
    int rc = convo__rd_pack_records(msgs, n, NULL, now, &pb);
    if (rc != 0)
        rc = convo__rd_pack_error(rc, err);
    append_call a = {b, &tk, opts, &pb, n};
    uint64_t h = convo__rd_id_hash(thread_id);
    int known = convo__rd_recent_has(b, h), listed = convo__rd_recent_has_messages(b, h);
    /* a cluster remembers more threads beside (4 ways) than in the recent
     * table (1): one it knows only there takes the script alone too; without
     * a message list that script answers CONVO_CREATE, a round trip more */
    if (!known && b->cluster && convo__rd_beside_has(b, h))
        known = listed = 1;
    int simple = !b->cluster && b->ttl_ms == 0 && !opts->idempotency_key &&
                 opts->expected_length < 0 && opts->expected_generation < 0;
    int pushed_before = simple && convo__rd_recent_has_messages(b, h);
    int plain = pushed_before && convo__rd_recent_in_window(b, h, now);
    /* on a cluster the common script (append_fast.lua) answers CONVO_CREATE
     * for a thread without a message list: one this store knows but never
     * appended to (made by save_extra, say) goes inside the protocol at once */
    int fast = b->cluster && b->ttl_ms == 0 && !opts->idempotency_key &&
               opts->expected_length < 0 && opts->expected_generation < 0;
    int alone = known && (!simple || (pushed_before && !plain)) && !(fast && !listed);
    rconn *c;
    redisReply *r = NULL;
    if (rc == 0 && (rc = convo__rd_acquire(b, &c, err)) == 0) {
        rc = plain ? append_plain(b, c, &tk, h, &pb, n, res, err) : 0;
        /* not plain, or nothing pushed: the script, alone for a thread this
         * store appended to (unless the plain push found no list); a simple
         * append of a thread without a message list as far as the store knows
         * (made by save_extra, say) goes inside the index protocol at once,
         * as only the script that may create can push to it */
        if (rc == 0)
            rc = convo__rd_run_writer_beside(b, c, thread_id, alone, tk.spec,
                                             spec_clock_len(&tk), append_build, &a, &r, err);
        else if (rc == 1)
            rc = 0;
        convo__rd_release(b, c);
    }
    if (rc == 0 && r)
        rc = append_result(r, n, res, err);
    if (rc == 0 && convo__rd_recent_has(b, h)) {
        convo__rd_recent_set_messages(b, h);
        if (r && !b->cluster && !res->replayed) /* the script set the activity time */
            convo__rd_recent_moved(b, h, convo__rd_spec_now(&tk));
    }
    freeReplyObject(r);
    convo__rd_packbuf_free(&pb);
    free(tk.buf);
    return rc;
}

/* ---- load ---- */

/* One stored message: msgpack [created_at, role, bytes]. */
static int decode_record(const redisReply *e, msgpack_unpacked *u, convo_history *h, int64_t seq)
{
    size_t off = 0;
    if (e->type != REDIS_REPLY_STRING ||
        msgpack_unpack_next(u, e->str, e->len, &off) != MSGPACK_UNPACK_SUCCESS || off != e->len)
        return CONVO_ECORRUPT;
    msgpack_object o = u->data;
    if (o.type != MSGPACK_OBJECT_ARRAY || o.via.array.size != 3)
        return CONVO_ECORRUPT;
    msgpack_object *f = o.via.array.ptr;
    int64_t at;
    if (f[0].type == MSGPACK_OBJECT_POSITIVE_INTEGER && f[0].via.u64 <= INT64_MAX)
        at = (int64_t)f[0].via.u64;
    else if (f[0].type == MSGPACK_OBJECT_NEGATIVE_INTEGER)
        at = f[0].via.i64;
    else
        return CONVO_ECORRUPT;
    if (f[1].type != MSGPACK_OBJECT_STR || f[1].via.str.size == 0 ||
        f[1].via.str.size > CONVO_MAX_ROLE_BYTES ||
        memchr(f[1].via.str.ptr, '\0', f[1].via.str.size))
        return CONVO_ECORRUPT;
    const char *bytes;
    size_t len;
    if (f[2].type == MSGPACK_OBJECT_BIN) {
        bytes = f[2].via.bin.ptr;
        len = f[2].via.bin.size;
    } else if (f[2].type == MSGPACK_OBJECT_STR) {
        bytes = f[2].via.str.ptr;
        len = f[2].via.str.size;
    } else {
        return CONVO_ECORRUPT;
    }
    char role[CONVO_MAX_ROLE_BYTES + 1];
    memcpy(role, f[1].via.str.ptr, f[1].via.str.size);
    role[f[1].via.str.size] = '\0';
    return convo__history_add(h, bytes, len, role, seq, at) ? CONVO_ENOMEM : 0;
}

/* Adds the elements of an LRANGE reply whose seq (first_seq + i) is in [from, to). */
static int add_records(const redisReply *list, int64_t first_seq, int64_t from, int64_t to,
                       convo_history *h, convo_error *err)
{
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    int rc = 0;
    int64_t lo = from > first_seq ? from - first_seq : 0;
    int64_t hi = (int64_t)list->elements;
    if (to - first_seq < hi)
        hi = to - first_seq;
    if (hi > lo && convo__history_reserve(h, (size_t)(hi - lo)) != 0)
        rc = CONVO_ENOMEM;
    for (int64_t i = lo; i < hi && rc == 0; i++)
        rc = decode_record(list->element[i], &u, h, first_seq + i);
    msgpack_unpacked_destroy(&u);
    if (rc == CONVO_ECORRUPT)
        return convo__error(err, rc, NULL, "redis: a stored message could not be decoded");
    return rc ? convo__rd_oom(err) : 0;
}

typedef struct extra_field {
    long long ord;
    const redisReply *key, *value;
    size_t json_at;
} extra_field;

static int by_ord(const void *a, const void *b)
{
    long long x = ((const extra_field *)a)->ord, y = ((const extra_field *)b)->ord;
    return (x > y) - (x < y);
}

int convo__rd_extra_field(const convo_backend *b, const redisReply *field)
{
    return b->cluster || (field->type == REDIS_REPLY_STRING && field->len > 0 &&
                          field->str[0] == '"');
}

/* The extra object as compact JSON text from the HGETALL reply of the extra
 * hash ("{}" when empty): 0, CONVO_ECORRUPT or CONVO_ENOMEM. Each field is
 * its key's JSON text and each value "ORDINAL JSON", both compact as jansson
 * wrote them, so the object is their texts joined in ordinal order, checked
 * in one pass (a listing page joins 20 of them: parsing each part with
 * jansson and dumping the object cost more than the rest of the page). On
 * one server the hash also holds the thread's c, u and p (layout 8): passed
 * over. */
int convo__rd_extra_text(const convo_backend *b, const redisReply *all, char **out, size_t *len)
{
    *out = NULL;
    if (all->type != REDIS_REPLY_ARRAY || all->elements % 2)
        return CONVO_ECORRUPT;
    size_t n = 0, total = 1;
    extra_field *f = calloc(all->elements / 2 + 1, sizeof *f);
    int rc = f ? 0 : CONVO_ENOMEM;
    for (size_t i = 0; i < all->elements / 2 && rc == 0; i++) {
        const redisReply *k = all->element[2 * i], *v = all->element[2 * i + 1];
        char *end = NULL;
        if (!convo__rd_extra_field(b, k))
            continue;
        f[n] = (extra_field){v->type == REDIS_REPLY_STRING ? strtoll(v->str, &end, 10) : 0, k, v,
                             0};
        total++; /* a comma, or the closing brace */
        if (k->type != REDIS_REPLY_STRING || k->len < 2 || k->str[0] != '"' ||
            v->type != REDIS_REPLY_STRING || end == v->str || *end != ' ' ||
            (size_t)(end + 1 - v->str) >= v->len)
            rc = CONVO_ECORRUPT;
        else
            f[n].json_at = (size_t)(end + 1 - v->str);
        if (rc == 0)
            total += k->len + 1 + v->len - f[n].json_at;
        n++;
    }
    if (n == 0)
        total = 2;
    char *text = rc == 0 ? malloc(total + 1) : NULL;
    if (rc == 0 && !text)
        rc = CONVO_ENOMEM;
    if (rc == 0) {
        qsort(f, n, sizeof *f, by_ord);
        char *p = text;
        *p++ = '{';
        for (size_t i = 0; i < n; i++) {
            if (i > 0)
                *p++ = ',';
            memcpy(p, f[i].key->str, f[i].key->len);
            p += f[i].key->len;
            *p++ = ':';
            memcpy(p, f[i].value->str + f[i].json_at, f[i].value->len - f[i].json_at);
            p += f[i].value->len - f[i].json_at;
        }
        *p++ = '}';
        *p = '\0';
        if (!convo__json_object_valid(text, total))
            rc = CONVO_ECORRUPT;
    }
    free(f);
    if (rc != 0) {
        free(text);
        return rc;
    }
    *out = text;
    *len = total;
    return 0;
}

/* Rebuilds the extra object from the HGETALL reply of the extra hash. */
static int extra_rebuild(const convo_backend *b, const redisReply *all, convo_history *h,
                         convo_error *err)
{
    if (all->type == REDIS_REPLY_ARRAY && all->elements == 0)
        return 0;
    char *text;
    size_t len;
    int rc = convo__rd_extra_text(b, all, &text, &len);
    if (rc == 0 && len > 2 && convo__history_set_extra(h, text, len) != 0)
        rc = CONVO_ENOMEM;
    free(text);
    if (rc == CONVO_ECORRUPT)
        return convo__error(err, rc, NULL, "redis: the stored extra object could not be decoded");
    return rc ? convo__rd_oom(err) : 0;
}

/* The reply to HMGET meta v g: v nil = no such thread; "4" = this layout, "3",
 * "2" and "1" the ones before (messages and extra are the same; only checkpoint
 * indexes, which checkpoint writes and rewrites migrate, differ). g is the
 * generation, nil = 0. */
static int check_layout(const redisReply *vg, const char *missing, int64_t *generation,
                        convo_error *err)
{
    if (vg->type != REDIS_REPLY_ARRAY || vg->elements != 2)
        return convo__error(err, CONVO_EIO, NULL, "redis: unexpected reply reading a thread");
    const redisReply *v = vg->element[0], *g = vg->element[1];
    if (v->type == REDIS_REPLY_NIL)
        return convo__error(err, CONVO_ENOTFOUND, NULL, "%s", missing);
    if (!(v->type == REDIS_REPLY_STRING && v->len == 1 && v->str[0] >= '1' && v->str[0] <= '4'))
        return convo__error(err, CONVO_ENOTSUP, NULL,
                            "redis: thread stored in an unknown layout (a newer convo?)");
    *generation = 0;
    if (g->type == REDIS_REPLY_NIL)
        return 0;
    char text[24], *end;
    if (g->type != REDIS_REPLY_STRING || g->len == 0 || g->len >= sizeof text)
        return convo__error(err, CONVO_ECORRUPT, NULL, "redis: bad thread generation");
    memcpy(text, g->str, g->len);
    text[g->len] = '\0';
    errno = 0;
    long long n = strtoll(text, &end, 10);
    if (*end || n < 0 || errno)
        return convo__error(err, CONVO_ECORRUPT, NULL, "redis: bad thread generation");
    *generation = n;
    return 0;
}

/* HMGET meta v g, as check_layout() reads it. */
static void cmd_layout(cmd *c, const thread_keys *tk)
{
    convo__rd_cmd_str(c, "HMGET");
    convo__rd_cmd_add(c, tk->k[K_META], tk->len[K_META]);
    convo__rd_cmd_add(c, "v", 1);
    convo__rd_cmd_add(c, "g", 1);
}

/* MULTI HMGET(v, g) LLEN LRANGE [HGETALL] EXEC: one round trip, one snapshot.
 * A tail is read as the last `tail` elements and trimmed here against LLEN. */
static int load_send(convo_backend *b, rconn *c, const thread_keys *tk, const convo_load_opts *o,
                     convo_history *h, convo_error *err)
{
    cmd cmds[6] = {{0}};
    size_t n = 0;
    convo__rd_cmd_str(&cmds[n++], "MULTI");
    cmd_layout(&cmds[n++], tk);
    convo__rd_cmd_str(&cmds[n], "LLEN");
    convo__rd_cmd_add(&cmds[n++], tk->k[K_MSGS], tk->len[K_MSGS]);
    convo__rd_cmd_str(&cmds[n], "LRANGE");
    convo__rd_cmd_add(&cmds[n], tk->k[K_MSGS], tk->len[K_MSGS]);
    int64_t limit_end = o->limit > 0 && o->from_seq <= INT64_MAX - o->limit
                            ? o->from_seq + o->limit - 1 : -1;
    convo__rd_cmd_num(&cmds[n], o->tail > 0 ? -o->tail : o->from_seq);
    convo__rd_cmd_num(&cmds[n++], o->tail > 0 ? -1 : limit_end);
    if (o->with_extra) {
        convo__rd_cmd_str(&cmds[n], "HGETALL");
        convo__rd_cmd_add(&cmds[n++], tk->k[K_EXTRA], tk->len[K_EXTRA]);
    }
    convo__rd_cmd_str(&cmds[n++], "EXEC");
    redisReply *replies[6] = {NULL};
    int rc = convo__rd_pipeline(b, c, cmds, n, replies, err);
    for (size_t i = 0; i < n; i++)
        convo__rd_cmd_free(&cmds[i]);
    if (rc != 0)
        return rc;
    const redisReply *x = replies[n - 1];
    if (x->type == REDIS_REPLY_ERROR)
        rc = convo__rd_reply_error(x, err);
    else if (x->type != REDIS_REPLY_ARRAY || x->elements != n - 2)
        rc = convo__error(err, CONVO_EIO, NULL, "redis: unexpected reply to a load");
    for (size_t i = 0; rc == 0 && i < x->elements; i++)
        if (x->element[i]->type == REDIS_REPLY_ERROR)
            rc = convo__rd_reply_error(x->element[i], err);
    int64_t generation;
    if (rc == 0)
        rc = check_layout(x->element[0], "thread not found", &generation, err);
    if (rc == 0) {
        int64_t len = x->element[1]->integer, from, to;
        const redisReply *list = x->element[2];
        convo__load_range(o, len, &from, &to);
        convo__history_set_length(h, len);
        convo__history_set_generation(h, generation);
        int64_t first = o->tail > 0 ? len - (int64_t)list->elements : o->from_seq;
        rc = add_records(list, first, from, to, h, err);
    }
    if (rc == 0 && o->with_extra)
        rc = extra_rebuild(b, x->element[3], h, err);
    convo__rd_replies_free(replies, n);
    return rc;
}

int convo__rd_load(convo_backend *b, const char *thread_id, const convo_load_opts *opts,
                   convo_history **out, convo_error *err)
{
    thread_keys tk;
    convo_history *h = convo__history_new();
    if (!h || convo__rd_keys_make(b, thread_id, &tk) != 0) {
        convo_history_free(h);
        return convo__rd_oom(err);
    }
    rconn *c;
    int rc = convo__rd_acquire(b, &c, err);
    if (rc == 0) {
        rc = load_send(b, c, &tk, opts, h, err);
        convo__rd_release(b, c);
    }
    free(tk.buf);
    if (rc != 0) {
        convo_history_free(h);
        return rc;
    }
    *out = h;
    return 0;
}

/* ---- save_extra ---- */

/* Field/value texts of the patch: each key as JSON text, each value as compact JSON. */
static int extra_texts(json_t *patch, char ***texts, size_t *ntexts)
{
    size_t n = json_object_size(patch), k = 0;
    char **t = calloc(2 * n + 1, sizeof *t);
    *texts = t;
    *ntexts = 0;
    if (!t)
        return CONVO_ENOMEM;
    const char *key;
    json_t *value;
    json_object_foreach(patch, key, value) {
        json_t *ks = json_string(key);
        t[k] = ks ? json_dumps(ks, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
        json_decref(ks);
        t[k + 1] = json_dumps(value, JSON_ENCODE_ANY | JSON_COMPACT);
        *ntexts = k + 2;
        if (!t[k] || !t[k + 1])
            return CONVO_ENOMEM;
        k += 2;
    }
    return 0;
}

typedef struct extra_call {
    const convo_backend *b;
    const thread_keys *tk;
    char **texts;
    size_t ntexts;
} extra_call;

static int extra_build(void *ctx, cmd *c, int create)
{
    const extra_call *x = ctx;
    convo__rd_cmd_script_head(c, x->tk);
    convo__rd_cmd_spec(c, x->tk);
    convo__rd_cmd_add(c, create ? "1" : "0", 1);
    convo__rd_cmd_num(c, (long long)x->b->limits.max_extra_bytes);
    convo__rd_cmd_num(c, x->b->ttl_ms);
    for (size_t i = 0; i < x->ntexts; i++)
        convo__rd_cmd_str(c, x->texts[i]);
    return c->failed ? CONVO_ENOMEM : S_EXTRA;
}

int convo__rd_save_extra(convo_backend *b, const char *thread_id, const char *patch,
                         void *patch_obj, convo_error *err)
{
    (void)patch;
    thread_keys tk;
    if (convo__rd_keys_make(b, thread_id, &tk) != 0)
        return convo__rd_oom(err);
    extra_call x = {b, &tk, NULL, 0};
    int rc = extra_texts(patch_obj, &x.texts, &x.ntexts) ? convo__rd_oom(err) : 0;
    rconn *c;
    redisReply *r = NULL;
    if (rc == 0 && (rc = convo__rd_acquire(b, &c, err)) == 0) {
        rc = convo__rd_run_writer(b, c, thread_id, extra_build, &x, &r, err);
        convo__rd_release(b, c);
    }
    if (rc == 0 && r->type == REDIS_REPLY_ERROR)
        rc = convo__rd_reply_error(r, err);
    uint64_t h = convo__rd_id_hash(thread_id);
    if (rc == 0 && !b->cluster && convo__rd_recent_has(b, h)) /* the script set it */
        convo__rd_recent_moved(b, h, convo__rd_spec_now(&tk));
    freeReplyObject(r);
    for (size_t i = 0; i < x.ntexts; i++)
        free(x.texts[i]);
    free(x.texts);
    free(tk.buf);
    return rc;
}

/* ---- delete ---- */

/* The script, then ZREM from the index and EXISTS, in one round trip; the
 * entry goes back when a writer re-created the thread in between. */
static int delete_send(convo_backend *b, rconn *c, const char *id, const thread_keys *tk,
                       convo_error *err)
{
    cmd cmds[3] = {{0}};
    convo__rd_cmd_script_head(&cmds[0], tk);
    convo__rd_cmd_spec(&cmds[0], tk);
    convo__rd_cmd_index(&cmds[1], b, "ZREM", id);
    convo__rd_cmd_str(&cmds[2], "EXISTS");
    convo__rd_cmd_add(&cmds[2], tk->k[K_META], tk->len[K_META]);
    redisReply *replies[3] = {NULL};
    int rc = convo__rd_pipeline_script(b, c, cmds, 3, 0, S_DELETE, replies, err);
    for (int i = 0; i < 3; i++)
        convo__rd_cmd_free(&cmds[i]);
    if (rc != 0)
        return rc;
    if (replies[0]->type == REDIS_REPLY_ERROR)
        rc = convo__rd_reply_error(replies[0], err);
    int recreated = replies[2]->type == REDIS_REPLY_INTEGER && replies[2]->integer == 1;
    convo__rd_replies_free(replies, 3);
    if (recreated) {
        cmd again = {0};
        redisReply *r = NULL;
        convo__rd_cmd_index(&again, b, "ZADD", id);
        int rc2 = convo__rd_pipeline(b, c, &again, 1, &r, err);
        freeReplyObject(r);
        convo__rd_cmd_free(&again);
        if (rc == 0)
            rc = rc2;
    }
    return rc;
}

int convo__rd_thread_delete(convo_backend *b, const char *thread_id, convo_error *err)
{
    thread_keys tk;
    if (convo__rd_keys_make(b, thread_id, &tk) != 0)
        return convo__rd_oom(err);
    /* our next write of this id goes straight to the index protocol */
    convo__rd_recent_forget(b, convo__rd_id_hash(thread_id));
    convo__rd_beside_forget(b, convo__rd_id_hash(thread_id));
    rconn *c;
    int rc = convo__rd_acquire(b, &c, err);
    if (rc == 0) {
        rc = delete_send(b, c, thread_id, &tk, err);
        convo__rd_release(b, c);
    }
    free(tk.buf);
    return rc;
}

/* ---- fork ---- */

/* Reads the source in one MULTI/EXEC (a consistent snapshot: messages of one
 * generation, which the destination takes) and checks the destination in the
 * same round trip. On success *snap is the EXEC reply: HMGET meta v g, LLEN,
 * LRANGE, HGETALL extra, HMGET meta xb xc xn, and with checkpoints (cps) HGETALL
 * cp, every cpidx member, HGETALL blobs, HGETALL writes; *generation the source's. */
static int fork_read(convo_backend *b, rconn *c, const thread_keys *src, const thread_keys *dst,
                     int64_t upto, int64_t expected_generation, int cps, redisReply **snap,
                     int64_t *generation, convo_error *err)
{
    enum { FORK_READS = 5, CP_READS = 4 };
    cmd cmds[FORK_READS + CP_READS + 3] = {{0}};
    redisReply *replies[FORK_READS + CP_READS + 3] = {NULL};
    size_t reads = cps ? FORK_READS + CP_READS : FORK_READS, n = reads + 3;
    convo__rd_cmd_str(&cmds[0], "MULTI");
    cmd_layout(&cmds[1], src);
    convo__rd_cmd_str(&cmds[2], "LLEN");
    convo__rd_cmd_add(&cmds[2], src->k[K_MSGS], src->len[K_MSGS]);
    convo__rd_cmd_str(&cmds[3], "LRANGE");
    convo__rd_cmd_add(&cmds[3], src->k[K_MSGS], src->len[K_MSGS]);
    /* LRANGE 1 0 is empty, where 0 -1 would be everything */
    convo__rd_cmd_num(&cmds[3], upto == 0 ? 1 : 0);
    convo__rd_cmd_num(&cmds[3], upto < 0 ? -1 : upto == 0 ? 0 : upto - 1);
    convo__rd_cmd_str(&cmds[4], "HGETALL");
    convo__rd_cmd_add(&cmds[4], src->k[K_EXTRA], src->len[K_EXTRA]);
    const char *fields[] = {"HMGET", src->k[K_META], "xb", "xc", "xn"};
    for (int i = 0; i < 5; i++)
        convo__rd_cmd_add(&cmds[5], fields[i], i == 1 ? src->len[K_META] : strlen(fields[i]));
    if (cps) {
        const int kinds[CP_READS] = {K_CP, K_CPIDX, K_BLOBS, K_WRITES};
        for (int i = 0; i < CP_READS; i++) {
            convo__rd_cmd_str(&cmds[6 + i], i == 1 ? "ZRANGEBYLEX" : "HGETALL");
            convo__rd_cmd_add(&cmds[6 + i], src->k[kinds[i]], src->len[kinds[i]]);
        }
        convo__rd_cmd_str(&cmds[7], "-");
        convo__rd_cmd_str(&cmds[7], "+");
    }
    convo__rd_cmd_str(&cmds[reads + 1], "EXEC");
    convo__rd_cmd_str(&cmds[reads + 2], "EXISTS");
    convo__rd_cmd_add(&cmds[reads + 2], dst->k[K_META], dst->len[K_META]);
    int rc = convo__rd_pipeline(b, c, cmds, n, replies, err);
    for (size_t i = 0; i < n; i++)
        convo__rd_cmd_free(&cmds[i]);
    if (rc != 0)
        return rc;
    redisReply *x = replies[reads + 1], *exists = replies[reads + 2];
    if (x->type == REDIS_REPLY_ERROR)
        rc = convo__rd_reply_error(x, err);
    else if (x->type != REDIS_REPLY_ARRAY || x->elements != reads)
        rc = convo__error(err, CONVO_EIO, NULL, "redis: unexpected reply reading a fork source");
    for (size_t i = 0; rc == 0 && i < reads; i++)
        if (x->element[i]->type == REDIS_REPLY_ERROR)
            rc = convo__rd_reply_error(x->element[i], err);
    if (rc == 0)
        rc = check_layout(x->element[0], "source thread not found", generation, err);
    if (rc == 0 && expected_generation >= 0 && *generation != expected_generation)
        rc = convo__error(err, CONVO_ECONFLICT, NULL,
                          "source thread is at generation %lld, expected %lld",
                          (long long)*generation, (long long)expected_generation);
    else if (rc == 0 && exists->type == REDIS_REPLY_INTEGER && exists->integer == 1)
        rc = convo__error(err, CONVO_ECONFLICT, NULL, "destination thread already exists");
    else if (rc == 0 && upto > x->element[1]->integer)
        rc = convo__error(err, CONVO_EINVAL, NULL, "fork upto %lld is past the end (%lld)",
                          (long long)upto, x->element[1]->integer);
    if (rc == 0) {
        *snap = x;
        replies[reads + 1] = NULL;
    }
    convo__rd_replies_free(replies, n);
    return rc;
}

static void cmd_reply_str(cmd *c, const redisReply *r)
{
    if (r->type == REDIS_REPLY_STRING)
        convo__rd_cmd_add(c, r->str, r->len);
    else
        convo__rd_cmd_add(c, "0", 1); /* HMGET of a missing field */
}

static size_t elements_of(const redisReply *r)
{
    return r->type == REDIS_REPLY_ARRAY ? r->elements : 0;
}

/* A number argument in buf (a command holds only a few of its own). */
static void cmd_count(cmd *c, char *buf, long long v)
{
    convo__rd_cmd_add(c, buf, convo__rd_fmt_num(buf, v));
}

/* The four lists a copy adds to the fork script's arguments (copy.lua), each
 * after its length: cp fields and records, cpidx members, blobs, writes. */
static void add_checkpoint_lists(cmd *c, const redisReply *snap, char counts[4][24])
{
    for (size_t k = 5; k < 9; k++) {
        const redisReply *l = snap->element[k];
        cmd_count(c, counts[k - 5], (long long)elements_of(l));
        for (size_t i = 0; i < elements_of(l); i++)
            cmd_reply_str(c, l->element[i]);
    }
}

/* ZADD, the fork script (a copy: copy.lua) on the destination, ZADD: records
 * and extra fields are copied verbatim, created_at included. */
static int fork_write(convo_backend *b, rconn *c, const char *dst, const thread_keys *tk,
                      const redisReply *snap, int64_t generation, int cps, convo_error *err)
{
    const redisReply *list = snap->element[2], *extra = snap->element[3], *m = snap->element[4];
    cmd cmds[3] = {{0}};
    char counts[6][24];
    convo__rd_cmd_index(&cmds[0], b, "ZADD", dst);
    if (cps)
        convo__rd_cmd_cp_head(&cmds[1], b, tk); /* P:store too, on one server */
    else
        convo__rd_cmd_script_head(&cmds[1], tk);
    convo__rd_cmd_spec(&cmds[1], tk);
    convo__rd_cmd_num(&cmds[1], b->ttl_ms);
    convo__rd_cmd_num(&cmds[1], (long long)list->elements);
    for (size_t i = 0; i < 3; i++)
        cmd_reply_str(&cmds[1], m->type == REDIS_REPLY_ARRAY && m->elements == 3 ? m->element[i]
                                                                                  : m);
    convo__rd_cmd_num(&cmds[1], generation);
    size_t fields = 0; /* on one server the hash holds c, u and p too: not copied */
    for (size_t i = 0; i + 1 < elements_of(extra); i += 2)
        fields += convo__rd_extra_field(b, extra->element[i]) ? 2 : 0;
    if (cps) {
        cmd_count(&cmds[1], counts[4], (long long)fields);
        cmd_count(&cmds[1], counts[5], atomic_load_explicit(&b->order_hint, memory_order_relaxed));
    }
    for (size_t i = 0; i < list->elements; i++)
        cmd_reply_str(&cmds[1], list->element[i]);
    for (size_t i = 0; i + 1 < elements_of(extra); i += 2)
        if (convo__rd_extra_field(b, extra->element[i])) {
            cmd_reply_str(&cmds[1], extra->element[i]);
            cmd_reply_str(&cmds[1], extra->element[i + 1]);
        }
    if (cps)
        add_checkpoint_lists(&cmds[1], snap, counts);
    convo__rd_cmd_index(&cmds[2], b, "ZADD", dst);
    redisReply *replies[3] = {NULL};
    int rc = convo__rd_pipeline_script(b, c, cmds, 3, 1, cps ? S_COPY : S_FORK, replies, err);
    if (rc == 0 && replies[1]->type == REDIS_REPLY_ERROR)
        rc = convo__rd_reply_error(replies[1], err);
    else if (rc == 0 && convo__rd_is_migrate(replies[1]))
        rc = 1; /* copy.lua met a checkpoint without its log length member */
    convo__rd_replies_free(replies, 3);
    for (int i = 0; i < 3; i++)
        convo__rd_cmd_free(&cmds[i]);
    return rc;
}

/* A source of layout 1 or 2 with checkpoints has no log length members, which
 * the copy script reads: it is indexed first (layout.c) and read again (also
 * when the script finds a checkpoint without its member). */
static int needs_relayout(const redisReply *snap)
{
    const redisReply *v = snap->element[0]->element[0];
    return v->type == REDIS_REPLY_STRING && v->len == 1 && (v->str[0] == '1' || v->str[0] == '2') &&
           elements_of(snap->element[5]) > 0;
}

static int fork_run(convo_backend *b, rconn *c, const char *src, const char *dst, int64_t upto,
                    int64_t expected_generation, int cps, convo_error *err)
{
    thread_keys ks = {0}, kd = {0};
    if (convo__rd_keys_make(b, src, &ks) != 0 || convo__rd_keys_make(b, dst, &kd) != 0) {
        free(ks.buf);
        return convo__rd_oom(err);
    }
    redisReply *snap = NULL;
    int64_t generation = 0;
    int rc = 0;
    for (int tries = 0;; tries++) {
        rc = fork_read(b, c, &ks, &kd, upto, expected_generation, cps, &snap, &generation, err);
        if (rc == 0 && cps && needs_relayout(snap))
            rc = 1;
        const redisReply *list = rc == 0 ? snap->element[2] : NULL;
        for (size_t i = 0; list && i < list->elements && rc == 0; i++)
            if (list->element[i]->type != REDIS_REPLY_STRING)
                rc = convo__error(err, CONVO_ECORRUPT, NULL, "redis: bad message record");
        if (rc == 0)
            rc = fork_write(b, c, dst, &kd, snap, generation, cps, err);
        freeReplyObject(snap);
        snap = NULL;
        if (rc != 1)
            break;
        rc = tries == RELAYOUT_TRIES ? convo__rd_relayout_gave_up(src, err)
                                     : convo__rd_thread_relayout(b, c, src, err);
        if (rc != 0)
            break;
    }
    if (rc == 0)
        convo__rd_ix_after(b, c, dst);
    free(ks.buf);
    free(kd.buf);
    return rc;
}

int convo__rd_thread_fork(convo_backend *b, const char *src, const char *dst, int64_t upto,
                          int64_t expected_generation, convo_error *err)
{
    rconn *c;
    int rc = convo__rd_acquire(b, &c, err);
    if (rc == 0) {
        rc = fork_run(b, c, src, dst, upto, expected_generation, 0, err);
        convo__rd_release(b, c);
    }
    return rc;
}

int convo__rd_thread_copy(convo_backend *b, const char *src, const char *dst, int64_t upto,
                          int64_t expected_generation, convo_error *err)
{
    rconn *c;
    int rc = convo__rd_acquire(b, &c, err);
    if (rc == 0) {
        rc = fork_run(b, c, src, dst, upto, expected_generation, 1, err);
        convo__rd_release(b, c);
    }
    return rc;
}
