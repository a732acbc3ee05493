/* checkpoints.c — checkpoints and their pending writes: put (with messages
 * too), put_writes, get, list (one thread or every thread, before, filter) and
 * prune. Records are msgpack; the scripts are cp_*.lua, checkpoint.lua,
 * put_log.lua and put_refs.lua (docs/redis.md, "Checkpoints"). */
#include "redis_int.h"
#include <limits.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- checkpoints ---- */

/* A string part and a NUL separator (namespace, ids, versions hold none). */
static void pack_raw0(packbuf *pb, const char *s, int last)
{
    convo__rd_packbuf_write(pb, s, strlen(s));
    if (!last)
        convo__rd_packbuf_write(pb, "", 1);
}

/* Parts: the channel list [ch, version, ...]; the record's tail [parent,
 * metadata, body type, body, log_length]; then "NS\0CH\0VERSION" and
 * [type, bytes] of each value the snapshot brings. */
static int pack_checkpoint(const convo_checkpoint_in *cp, packbuf *pb)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, pb, convo__rd_packbuf_write);
    convo__rd_packbuf_mark(pb);
    msgpack_pack_array(&pk, 2 * cp->nchannels);
    for (size_t i = 0; i < cp->nchannels; i++) {
        convo__pack_str(&pk, cp->channels[i].channel);
        convo__pack_str(&pk, cp->channels[i].version);
    }
    convo__rd_packbuf_mark(pb);
    msgpack_pack_array(&pk, 5);
    convo__pack_str(&pk, cp->parent_id);
    convo__pack_str(&pk, cp->metadata_json);
    convo__pack_str(&pk, cp->body.type);
    if (cp->body.type)
        convo__pack_bin(&pk, cp->body.bytes, cp->body.len);
    else
        msgpack_pack_nil(&pk);
    msgpack_pack_int64(&pk, cp->log_length);
    convo__rd_packbuf_mark(pb);
    for (size_t i = 0; i < cp->nchannels; i++) {
        const convo_channel_in *ch = &cp->channels[i];
        if (!ch->value)
            continue;
        pack_raw0(pb, cp->checkpoint_ns, 0);
        pack_raw0(pb, ch->channel, 0);
        pack_raw0(pb, ch->version, 1);
        convo__rd_packbuf_mark(pb);
        msgpack_pack_array(&pk, 2);
        convo__pack_str(&pk, ch->value->type);
        convo__pack_bin(&pk, ch->value->bytes, ch->value->len);
        convo__rd_packbuf_mark(pb);
    }
    return pb->failed ? CONVO_ENOMEM : 0;
}

/* The start of a script that may give a checkpoint its order: the thread's
 * keys, and on one server P:store, the store's last order (checkpoint.lua). */
void convo__rd_cmd_cp_head(cmd *c, const convo_backend *b, const thread_keys *tk)
{
    if (b->cluster) {
        convo__rd_cmd_script_head(c, tk);
        return;
    }
    convo__rd_cmd_add(c, "EVALSHA", 7);
    convo__rd_cmd_add(c, "", 0);
    convo__rd_cmd_num(c, K_COUNT + 1);
    for (size_t i = 0; i < K_COUNT; i++)
        convo__rd_cmd_add(c, tk->k[i], tk->len[i]);
    convo__rd_cmd_str(c, b->store_key);
}

/* Puts this store makes or sees come after every order it saw before, even
 * on another master of a cluster with a slower clock. */
static void order_seen(convo_backend *b, long long order)
{
    int_fast64_t cur = atomic_load_explicit(&b->order_hint, memory_order_relaxed);
    while (cur < order && !atomic_compare_exchange_weak_explicit(
                              &b->order_hint, &cur, order, memory_order_relaxed,
                              memory_order_relaxed))
        ;
}

typedef struct put_call {
    convo_backend *b;
    const thread_keys *tk;
    const convo_checkpoint_in *cp;
    const packbuf *pb;     /* pack_checkpoint()'s parts */
    const packbuf *msgs;   /* convo__rd_pack_records()'s parts (put with messages), else NULL */
    int64_t created_at;
    const convo_swap *swaps; /* a put with log references: its swaps (pack_swaps()'s parts) */
    size_t nswaps;
    const packbuf *sw;
} put_call;

/* Per swap: the value's field ("NS\0ID\0TASK\0IDX" in writes or "NS\0CH\0VERSION"
 * in blobs), the checkpoint's field "NS\0ID", the new record part (a write's
 * last two objects, type and bytes, or a value's whole [type, bytes]) and the
 * reference's end in decimal; then the number of swaps (swaps.lua). */
static int pack_swaps(const char *ns, const convo_swap *w, size_t n, packbuf *pb)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, pb, convo__rd_packbuf_write);
    char num[24];
    convo__rd_packbuf_mark(pb);
    for (size_t i = 0; i < n; i++) {
        pack_raw0(pb, ns, 0);
        if (w[i].task_id) {
            snprintf(num, sizeof num, "%lld", (long long)w[i].idx);
            pack_raw0(pb, w[i].checkpoint_id, 0);
            pack_raw0(pb, w[i].task_id, 0);
            pack_raw0(pb, num, 1);
        } else {
            pack_raw0(pb, w[i].channel, 0);
            pack_raw0(pb, w[i].version, 1);
        }
        convo__rd_packbuf_mark(pb);
        pack_raw0(pb, ns, 0);
        pack_raw0(pb, w[i].checkpoint_id, 1);
        convo__rd_packbuf_mark(pb);
        if (!w[i].task_id)
            msgpack_pack_array(&pk, 2);
        convo__pack_str(&pk, w[i].new_value.type);
        convo__pack_bin(&pk, w[i].new_value.bytes, w[i].new_value.len);
        convo__rd_packbuf_mark(pb);
        convo__rd_packbuf_write(pb, num, convo__rd_fmt_num(num, w[i].log_length));
        convo__rd_packbuf_mark(pb);
    }
    convo__rd_packbuf_write(pb, num, convo__rd_fmt_num(num, (long long)n));
    convo__rd_packbuf_mark(pb);
    return pb->failed ? CONVO_ENOMEM : 0;
}

/* The swaps' arguments (commands take at most 8 numbers: these are parts). */
static void swap_parts(cmd *c, const put_call *p)
{
    for (size_t i = 0; i < p->nswaps; i++) {
        const convo_swap *w = &p->swaps[i];
        convo__rd_cmd_add(c, w->task_id ? "w" : "c", 1);
        convo__rd_cmd_part(c, p->sw, 4 * i);
        convo__rd_cmd_part(c, p->sw, 4 * i + 1);
        convo__rd_cmd_str(c, w->old_value.type);
        convo__rd_cmd_add(c, w->old_value.bytes ? w->old_value.bytes : "", w->old_value.len);
        convo__rd_cmd_part(c, p->sw, 4 * i + 2);
        convo__rd_cmd_part(c, p->sw, 4 * i + 3);
    }
    convo__rd_cmd_part(c, p->sw, 4 * p->nswaps);
}

/* The checkpoint's parts after the fixed arguments: channel list, tail, then
 * (msgs) the message records, then the value pairs. */
static void put_parts(cmd *c, const put_call *p)
{
    convo__rd_cmd_part(c, p->pb, 0);
    convo__rd_cmd_part(c, p->pb, 1);
    for (size_t i = 0; p->msgs && i < p->cp->nmessages; i++)
        convo__rd_cmd_part(c, p->msgs, i);
    for (size_t i = 2; i + 1 < p->pb->nmarks; i++)
        convo__rd_cmd_part(c, p->pb, i);
}

static int put_build(void *ctx, cmd *c, int create)
{
    const put_call *p = ctx;
    convo__rd_cmd_cp_head(c, p->b, p->tk);
    convo__rd_cmd_spec(c, p->tk);
    convo__rd_cmd_add(c, create ? "1" : "0", 1);
    convo__rd_cmd_num(c, p->b->ttl_ms);
    convo__rd_cmd_str(c, p->cp->checkpoint_ns);
    convo__rd_cmd_str(c, p->cp->checkpoint_id);
    convo__rd_cmd_num(c, p->created_at);
    convo__rd_cmd_num(c, atomic_load_explicit(&p->b->order_hint, memory_order_relaxed));
    convo__rd_cmd_num(c, p->cp->log_length);
    put_parts(c, p);
    return c->failed ? CONVO_ENOMEM : S_CP_PUT;
}

static int put_log_build(void *ctx, cmd *c, int create)
{
    const put_call *p = ctx;
    convo__rd_cmd_cp_head(c, p->b, p->tk);
    convo__rd_cmd_spec(c, p->tk);
    convo__rd_cmd_add(c, create ? "1" : "0", 1);
    convo__rd_cmd_num(c, p->b->ttl_ms);
    convo__rd_cmd_num(c, p->cp->expected_length);
    convo__rd_cmd_num(c, p->cp->expected_generation);
    convo__rd_cmd_num(c, (long long)p->cp->nmessages);
    convo__rd_cmd_str(c, p->cp->checkpoint_ns);
    convo__rd_cmd_str(c, p->cp->checkpoint_id);
    convo__rd_cmd_num(c, p->created_at);
    convo__rd_cmd_num(c, atomic_load_explicit(&p->b->order_hint, memory_order_relaxed));
    convo__rd_cmd_num(c, p->cp->log_length);
    put_parts(c, p);
    if (p->sw)
        swap_parts(c, p);
    return c->failed ? CONVO_ENOMEM : p->sw ? S_CP_PUT_REFS : S_CP_PUT_LOG;
}

/* Runs a put (with messages when msgs). With an expected length > 0 the
 * script runs alone first, without leave to create: a thread with messages
 * exists, and a missing one conflicts before anything (index entry included)
 * is written. A thread whose checkpoints are not indexed by log length yet
 * (CONVO_MIGRATE, nothing written) is migrated and the put sent again. */
static int put_run(convo_backend *b, const convo_checkpoint_in *cp, const convo_message_in *msgs,
                   const convo_swap *swaps, size_t nswaps, convo_error *err)
{
    thread_keys tk;
    packbuf pb = {0}, mb = {0}, sb = {0};
    if (convo__rd_keys_make(b, cp->thread_id, &tk) != 0)
        return convo__rd_oom(err);
    int64_t now = convo__rd_spec_now(&tk); /* the records' time is the script's NOW */
    int rc = pack_checkpoint(cp, &pb) ? convo__rd_oom(err) : 0;
    if (rc == 0 && msgs && (rc = convo__rd_pack_records(msgs, cp->nmessages, NULL, now, &mb)) != 0)
        rc = convo__rd_pack_error(rc, err);
    if (rc == 0 && swaps && pack_swaps(cp->checkpoint_ns, swaps, nswaps, &sb) != 0)
        rc = convo__rd_oom(err);
    put_call p = {b, &tk, cp, &pb, msgs ? &mb : NULL, now, swaps, nswaps, swaps ? &sb : NULL};
    build_fn build = msgs ? put_log_build : put_build;
    int known = convo__rd_recent_has(b, convo__rd_id_hash(cp->thread_id)) ||
                (msgs && cp->expected_length > 0);
    rconn *c;
    redisReply *r = NULL;
    if (rc == 0 && (rc = convo__rd_acquire(b, &c, err)) == 0) {
        rc = convo__rd_run_writer_as(b, c, cp->thread_id, known, build, &p, &r, err);
        for (int i = 0; rc == 0 && convo__rd_is_migrate(r) && i < RELAYOUT_TRIES; i++) {
            freeReplyObject(r);
            r = NULL;
            if ((rc = convo__rd_thread_relayout(b, c, cp->thread_id, err)) == 0)
                rc = convo__rd_run_writer_as(b, c, cp->thread_id, 1, build, &p, &r, err);
        }
        convo__rd_release(b, c);
    }
    if (rc == 0 && convo__rd_is_migrate(r))
        rc = convo__rd_relayout_gave_up(cp->thread_id, err);
    else if (rc == 0 && r->type == REDIS_REPLY_ERROR)
        rc = convo__rd_reply_error(r, err);
    else if (rc == 0 && r->type != REDIS_REPLY_INTEGER)
        rc = convo__error(err, CONVO_EIO, NULL, "redis: unexpected reply to a checkpoint put");
    if (rc == 0)
        order_seen(b, r->integer);
    freeReplyObject(r);
    convo__rd_packbuf_free(&pb);
    convo__rd_packbuf_free(&mb);
    convo__rd_packbuf_free(&sb);
    free(tk.buf);
    return rc;
}

int convo__rd_checkpoint_put(convo_backend *b, const convo_checkpoint_in *cp, convo_error *err)
{
    return put_run(b, cp, NULL, NULL, 0, err);
}

int convo__rd_checkpoint_put_log(convo_backend *b, const convo_checkpoint_in *cp,
                                 const convo_message_in *msgs, convo_error *err)
{
    return put_run(b, cp, msgs, NULL, 0, err);
}

/* put_refs.lua: the put with messages (none: expected length -1), its
 * generation condition, then the swaps, in one script. */
int convo__rd_checkpoint_put_refs(convo_backend *b, const convo_checkpoint_in *cp,
                                  const convo_message_in *msgs, size_t nmsgs,
                                  const convo_swap *swaps, size_t nswaps, convo_error *err)
{
    static const convo_message_in none[1];
    static const convo_swap no_swaps[1];
    convo_checkpoint_in c = *cp;
    c.nmessages = nmsgs;
    return put_run(b, &c, nmsgs ? msgs : none, swaps ? swaps : no_swaps, nswaps, err);
}

/* Parts: "NS\0ID", then per write "NS\0ID\0TASK\0IDX" and [task_id,
 * task_path, idx, channel, type, bytes]. */
static int pack_writes(const char *ns, const char *id, const char *task, const char *path,
                       const convo_write_in *w, size_t n, packbuf *pb)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, pb, convo__rd_packbuf_write);
    convo__rd_packbuf_mark(pb);
    pack_raw0(pb, ns, 0);
    pack_raw0(pb, id, 1);
    convo__rd_packbuf_mark(pb);
    for (size_t i = 0; i < n; i++) {
        char idx[24];
        snprintf(idx, sizeof idx, "%lld", (long long)w[i].idx);
        pack_raw0(pb, ns, 0);
        pack_raw0(pb, id, 0);
        pack_raw0(pb, task, 0);
        pack_raw0(pb, idx, 1);
        convo__rd_packbuf_mark(pb);
        msgpack_pack_array(&pk, 6);
        convo__pack_str(&pk, task);
        convo__pack_str(&pk, path);
        msgpack_pack_int64(&pk, w[i].idx);
        convo__pack_str(&pk, w[i].channel);
        convo__pack_str(&pk, w[i].value.type);
        convo__pack_bin(&pk, w[i].value.bytes, w[i].value.len);
        convo__rd_packbuf_mark(pb);
    }
    return pb->failed ? CONVO_ENOMEM : 0;
}

static int writes_send(convo_backend *b, rconn *c, const thread_keys *tk,
                       const convo_write_in *w, size_t n, const packbuf *pb, convo_error *err)
{
    cmd call = {0};
    convo__rd_cmd_script_head(&call, tk);
    convo__rd_cmd_num(&call, b->ttl_ms);
    convo__rd_cmd_part(&call, pb, 0);
    for (size_t i = 0; i < n; i++) {
        convo__rd_cmd_add(&call, w[i].idx < 0 ? "r" : "k", 1);
        convo__rd_cmd_part(&call, pb, 1 + 2 * i);
        convo__rd_cmd_part(&call, pb, 2 + 2 * i);
    }
    redisReply *r = NULL;
    int rc = convo__rd_pipeline_script(b, c, &call, 1, 0, S_CP_WRITES, &r, err);
    if (rc == 0 && r->type == REDIS_REPLY_ERROR)
        rc = convo__rd_reply_error(r, err);
    freeReplyObject(r);
    convo__rd_cmd_free(&call);
    return rc;
}

/* The checkpoint must exist when the script runs (never a resurrection), so
 * this never creates a thread and needs no index protocol. */
int convo__rd_checkpoint_put_writes(convo_backend *b, const char *thread_id, const char *ns,
                                    const char *checkpoint_id, const char *task_id,
                                    const char *task_path, const convo_write_in *writes, size_t n,
                                    convo_error *err)
{
    thread_keys tk;
    packbuf pb = {0};
    if (convo__rd_keys_make(b, thread_id, &tk) != 0)
        return convo__rd_oom(err);
    int rc = pack_writes(ns, checkpoint_id, task_id, task_path, writes, n, &pb);
    rc = rc ? convo__rd_oom(err) : 0;
    rconn *c;
    if (rc == 0 && (rc = convo__rd_acquire(b, &c, err)) == 0) {
        rc = writes_send(b, c, &tk, writes, n, &pb, err);
        convo__rd_release(b, c);
    }
    convo__rd_packbuf_free(&pb);
    free(tk.buf);
    return rc;
}

/* A NUL-terminated copy of a msgpack str (NULL for nil); *bad on anything else. */
static char *obj_str(const msgpack_object *o, int *bad)
{
    if (o->type == MSGPACK_OBJECT_NIL)
        return NULL;
    if (o->type != MSGPACK_OBJECT_STR || memchr(o->via.str.ptr, '\0', o->via.str.size)) {
        *bad = 1;
        return NULL;
    }
    char *s = malloc(o->via.str.size + 1);
    if (!s) {
        *bad = 1;
        return NULL;
    }
    memcpy(s, o->via.str.ptr, o->via.str.size);
    s[o->via.str.size] = '\0';
    return s;
}

static int obj_bytes(const msgpack_object *o, const char **p, size_t *len)
{
    if (o->type == MSGPACK_OBJECT_BIN) {
        *p = o->via.bin.ptr;
        *len = o->via.bin.size;
    } else if (o->type == MSGPACK_OBJECT_STR) {
        *p = o->via.str.ptr;
        *len = o->via.str.size;
    } else {
        return -1;
    }
    return 0;
}

/* Decodes one whole msgpack object filling s (a redis string). */
static int unpack_whole(msgpack_unpacked *u, const redisReply *s, msgpack_object_type type,
                        size_t size)
{
    size_t off = 0;
    if (s->type != REDIS_REPLY_STRING ||
        msgpack_unpack_next(u, s->str, s->len, &off) != MSGPACK_UNPACK_SUCCESS || off != s->len)
        return -1;
    const msgpack_object *o = &u->data;
    return o->type == type && o->via.array.size == size ? 0 : -1;
}

/* Adds channel i (name, version from the record) and its stored value. */
static int add_channel(convo_checkpoint *cp, const msgpack_object *names, size_t i,
                       const redisReply *value)
{
    int bad = 0, rc = 0;
    char *ch = obj_str(&names[2 * i], &bad), *ver = obj_str(&names[2 * i + 1], &bad);
    if (bad || !ch || !ver) {
        rc = CONVO_ECORRUPT;
    } else if (value->type == REDIS_REPLY_NIL) {
        rc = convo__checkpoint_add_channel(cp, ch, ver, NULL, NULL, 0);
    } else {
        msgpack_unpacked u;
        msgpack_unpacked_init(&u);
        const char *bytes;
        size_t len;
        char *type = NULL;
        if (unpack_whole(&u, value, MSGPACK_OBJECT_ARRAY, 2) != 0 ||
            !(type = obj_str(&u.data.via.array.ptr[0], &bad)) || bad ||
            obj_bytes(&u.data.via.array.ptr[1], &bytes, &len) != 0)
            rc = CONVO_ECORRUPT;
        else
            rc = convo__checkpoint_add_channel(cp, ch, ver, type, bytes, len);
        free(type);
        msgpack_unpacked_destroy(&u);
    }
    free(ch);
    free(ver);
    return rc;
}

/* One pending write: [task_id, task_path, idx, channel, type, bytes]. */
static int add_write(convo_checkpoint *cp, const redisReply *value)
{
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    int bad = 0, rc = CONVO_ECORRUPT;
    char *s[5] = {NULL};
    int64_t idx;
    const char *bytes;
    size_t len;
    if (unpack_whole(&u, value, MSGPACK_OBJECT_ARRAY, 6) == 0) {
        const msgpack_object *a = u.data.via.array.ptr;
        s[0] = obj_str(&a[0], &bad);
        s[1] = obj_str(&a[1], &bad);
        s[2] = obj_str(&a[3], &bad);
        s[3] = obj_str(&a[4], &bad);
        if (!bad && s[0] && s[1] && s[2] && s[3] && convo__unpack_int(&a[2], &idx) == 0 &&
            obj_bytes(&a[5], &bytes, &len) == 0)
            rc = convo__checkpoint_add_write(cp, s[0], s[1], idx, s[2], s[3], bytes, len);
    }
    for (int i = 0; i < 4; i++)
        free(s[i]);
    msgpack_unpacked_destroy(&u);
    return rc;
}

/* The record's tail [parent, metadata, body type, body, log_length] and
 * created_at make the checkpoint; values and writes are added after. */
static convo_checkpoint *cp_from_tail(const char *thread_id, const char *ns, const char *id,
                                      const msgpack_object *t, int64_t created_at)
{
    int bad = 0;
    int64_t log_length;
    const char *body = NULL;
    size_t body_len = 0;
    char *parent = obj_str(&t[0], &bad), *meta = obj_str(&t[1], &bad);
    char *type = obj_str(&t[2], &bad);
    if (type && obj_bytes(&t[3], &body, &body_len) != 0)
        bad = 1;
    convo_checkpoint *cp = NULL;
    if (!bad && meta && convo__unpack_int(&t[4], &log_length) == 0)
        cp = convo__checkpoint_new(thread_id, ns, id, parent, meta, type, body, body_len,
                                   log_length, created_at);
    free(parent);
    free(meta);
    free(type);
    return cp;
}

/* A record: order, created_at, channel list, tail; all four must be there. */
static int record_unpack(const redisReply *rec, msgpack_unpacked *u, int64_t *created_at);

/* The log_length in a record's tail (what layout 3 indexes, layout.c). */
int convo__rd_record_log_length(const redisReply *rec, int64_t *log_length)
{
    msgpack_unpacked u[4];
    for (int i = 0; i < 4; i++)
        msgpack_unpacked_init(&u[i]);
    int64_t created_at;
    int rc = record_unpack(rec, u, &created_at) ||
                     convo__unpack_int(&u[3].data.via.array.ptr[4], log_length) || *log_length < 0
                 ? CONVO_ECORRUPT
                 : 0;
    for (int i = 0; i < 4; i++)
        msgpack_unpacked_destroy(&u[i]);
    return rc;
}

static int record_unpack(const redisReply *rec, msgpack_unpacked *u, int64_t *created_at)
{
    size_t off = 0;
    int64_t order;
    if (rec->type != REDIS_REPLY_STRING)
        return -1;
    for (int i = 0; i < 4; i++)
        if (msgpack_unpack_next(&u[i], rec->str, rec->len, &off) != MSGPACK_UNPACK_SUCCESS)
            return -1;
    if (off != rec->len || convo__unpack_int(&u[0].data, &order) ||
        convo__unpack_int(&u[1].data, created_at) ||
        u[2].data.type != MSGPACK_OBJECT_ARRAY || u[2].data.via.array.size % 2 ||
        u[3].data.type != MSGPACK_OBJECT_ARRAY || u[3].data.via.array.size != 5)
        return -1;
    return 0;
}

/* Builds the checkpoint from fetch()'s {field, record, values, writes}. */
static int cp_build(const char *thread_id, const redisReply *r, char *field,
                    convo_checkpoint **out)
{
    const redisReply *values = r->element[2], *writes = r->element[3];
    msgpack_unpacked u[4];
    for (int i = 0; i < 4; i++)
        msgpack_unpacked_init(&u[i]);
    int64_t created_at;
    convo_checkpoint *cp = NULL;
    int rc = record_unpack(r->element[1], u, &created_at) ? CONVO_ECORRUPT : 0;
    size_t nch = rc == 0 ? u[2].data.via.array.size / 2 : 0;
    if (rc == 0 && (values->type != REDIS_REPLY_ARRAY || values->elements != nch ||
                    writes->type != REDIS_REPLY_ARRAY))
        rc = CONVO_ECORRUPT;
    if (rc == 0 && !(cp = cp_from_tail(thread_id, field, field + strlen(field) + 1,
                                       u[3].data.via.array.ptr, created_at)))
        rc = CONVO_ECORRUPT;
    for (size_t i = 0; rc == 0 && i < nch; i++)
        rc = add_channel(cp, u[2].data.via.array.ptr, i, values->element[i]);
    for (size_t i = 0; rc == 0 && i < writes->elements; i++)
        if (writes->element[i]->type != REDIS_REPLY_NIL)
            rc = add_write(cp, writes->element[i]);
    for (int i = 0; i < 4; i++)
        msgpack_unpacked_destroy(&u[i]);
    if (rc != 0) {
        convo_checkpoint_free(cp);
        return rc;
    }
    convo__checkpoint_finish(cp);
    *out = cp;
    return 0;
}

static int cp_decode(const char *thread_id, const redisReply *r, convo_checkpoint **out,
                     convo_error *err)
{
    *out = NULL;
    const redisReply *f = r->type == REDIS_REPLY_ARRAY && r->elements == 4 ? r->element[0] : NULL;
    char *field = NULL;
    int rc = CONVO_ECORRUPT;
    /* "NS\0ID" as two C strings */
    if (f && f->type == REDIS_REPLY_STRING && memchr(f->str, '\0', f->len) &&
        (field = malloc(f->len + 1))) {
        memcpy(field, f->str, f->len);
        field[f->len] = '\0';
        rc = cp_build(thread_id, r, field, out);
    } else if (f && f->type == REDIS_REPLY_STRING) {
        rc = memchr(f->str, '\0', f->len) ? CONVO_ENOMEM : CONVO_ECORRUPT;
    }
    free(field);
    if (rc == CONVO_ECORRUPT)
        return convo__error(err, rc, NULL, "redis: a stored checkpoint could not be decoded");
    return rc ? convo__rd_oom(err) : 0;
}

static int cp_get_send(convo_backend *b, rconn *c, const thread_keys *tk, const char *thread_id,
                       const char *ns, const char *id, convo_checkpoint **out, convo_error *err)
{
    cmd call = {0};
    convo__rd_cmd_script_head(&call, tk);
    convo__rd_cmd_str(&call, ns);
    convo__rd_cmd_str(&call, id ? id : "");
    redisReply *r = NULL;
    int rc = convo__rd_pipeline_script(b, c, &call, 1, 0, S_CP_GET, &r, err);
    if (rc == 0)
        rc = r->type == REDIS_REPLY_ERROR ? convo__rd_reply_error(r, err)
                                          : cp_decode(thread_id, r, out, err);
    freeReplyObject(r);
    convo__rd_cmd_free(&call);
    return rc;
}

int convo__rd_checkpoint_get(convo_backend *b, const char *thread_id, const char *ns,
                             const char *checkpoint_id, convo_checkpoint **out, convo_error *err)
{
    thread_keys tk;
    if (convo__rd_keys_make(b, thread_id, &tk) != 0)
        return convo__rd_oom(err);
    rconn *c;
    int rc = convo__rd_acquire(b, &c, err);
    if (rc == 0) {
        rc = cp_get_send(b, c, &tk, thread_id, ns, checkpoint_id, out, err);
        convo__rd_release(b, c);
    }
    free(tk.buf);
    return rc;
}

/* Adds the matching checkpoints of one list page; *full once limit is reached. */
static int list_take(const char *thread_id, const redisReply *r,
                     const convo_checkpoint_list_opts *o, void *filter,
                     convo_checkpoint_set *set, int *full, convo_error *err)
{
    int rc = 0;
    for (size_t i = 1; i < r->elements && rc == 0 && !*full; i++) {
        convo_checkpoint *cp;
        if ((rc = cp_decode(thread_id, r->element[i], &cp, err)) != 0)
            break;
        const char *meta = convo_checkpoint_metadata(cp);
        if (filter && !convo__json_contains(meta, strlen(meta), filter))
            convo_checkpoint_free(cp);
        else if (convo__checkpoint_set_add(set, cp) != 0)
            rc = convo__rd_oom(err);
        *full = o->limit && convo_checkpoint_set_count(set) >= o->limit;
    }
    return rc;
}

/* The checkpoints of one thread, newest first, a page (one script) at a time,
 * those put before `upper` (an ORDER in hex, "" = all): the filter is applied
 * here, so pages go on until limit matched. */
static int list_thread(convo_backend *b, rconn *c, const char *thread_id,
                       const convo_checkpoint_list_opts *o, void *filter, const char *upper,
                       convo_checkpoint_set *set, convo_error *err)
{
    thread_keys tk;
    if (convo__rd_keys_make(b, thread_id, &tk) != 0)
        return convo__rd_oom(err);
    char cursor[17];
    snprintf(cursor, sizeof cursor, "%s", upper);
    int rc = 0, full = o->limit && convo_checkpoint_set_count(set) >= o->limit;
    while (rc == 0 && !full) {
        size_t want = o->limit ? o->limit - convo_checkpoint_set_count(set) : 256;
        long long page = filter ? 64 : want < 16 ? 16 : want > 256 ? 256 : (long long)want;
        cmd call = {0};
        convo__rd_cmd_script_head(&call, &tk);
        convo__rd_cmd_str(&call, o->checkpoint_ns ? "1" : "0");
        convo__rd_cmd_str(&call, o->checkpoint_ns ? o->checkpoint_ns : "");
        convo__rd_cmd_str(&call, cursor);
        convo__rd_cmd_num(&call, page);
        redisReply *r = NULL;
        rc = convo__rd_pipeline_script(b, c, &call, 1, 0, S_CP_LIST, &r, err);
        convo__rd_cmd_free(&call);
        if (rc == 0 && r->type == REDIS_REPLY_ERROR)
            rc = convo__rd_reply_error(r, err);
        else if (rc == 0 && (r->type != REDIS_REPLY_ARRAY || r->elements < 1 ||
                             r->element[0]->type != REDIS_REPLY_STRING ||
                             r->element[0]->len >= sizeof cursor))
            rc = convo__error(err, CONVO_EIO, NULL, "redis: unexpected reply to a listing");
        if (rc == 0) {
            memcpy(cursor, r->element[0]->str, r->element[0]->len);
            cursor[r->element[0]->len] = '\0';
            rc = list_take(thread_id, r, o, filter, set, &full, err);
        }
        freeReplyObject(r);
        if (!cursor[0])
            break;
    }
    free(tk.buf);
    return rc;
}

/* The ORDER of checkpoint (before_thread_id, before_ns, before) as 16 hex
 * digits: the first object of its record. Listing takes what was put before. */
static int before_order(convo_backend *b, rconn *c, const convo_checkpoint_list_opts *o,
                        char upper[17], convo_error *err)
{
    /* the core fills both; the defaults it uses, should it not */
    const char *thread = o->before_thread_id ? o->before_thread_id : o->thread_id;
    const char *ns = o->before_ns ? o->before_ns : o->checkpoint_ns ? o->checkpoint_ns : "";
    thread_keys tk;
    if (!thread)
        return convo__error(err, CONVO_EINVAL, NULL, "before needs a thread id");
    if (convo__rd_keys_make(b, thread, &tk) != 0)
        return convo__rd_oom(err);
    size_t nlen = strlen(ns), ilen = strlen(o->before);
    char *field = malloc(nlen + ilen + 2);
    cmd q = {0};
    convo__rd_cmd_str(&q, "HGET");
    convo__rd_cmd_add(&q, tk.k[K_CP], tk.len[K_CP]);
    if (field) {
        memcpy(field, ns, nlen + 1); /* "NS\0ID" */
        memcpy(field + nlen + 1, o->before, ilen);
        convo__rd_cmd_add(&q, field, nlen + 1 + ilen);
    }
    redisReply *r = NULL;
    int rc = !field || q.failed ? convo__rd_oom(err) : convo__rd_pipeline(b, c, &q, 1, &r, err);
    if (rc == 0 && r->type == REDIS_REPLY_ERROR) {
        rc = convo__rd_reply_error(r, err);
    } else if (rc == 0 && r->type == REDIS_REPLY_NIL) {
        rc = convo__error(err, CONVO_ENOTFOUND, NULL, "checkpoint '%s' not found", o->before);
    } else if (rc == 0) {
        msgpack_unpacked u;
        msgpack_unpacked_init(&u);
        size_t off = 0;
        int64_t order;
        if (r->type != REDIS_REPLY_STRING ||
            msgpack_unpack_next(&u, r->str, r->len, &off) != MSGPACK_UNPACK_SUCCESS ||
            convo__unpack_int(&u.data, &order) || order < 0)
            rc = convo__error(err, CONVO_ECORRUPT, NULL,
                              "redis: a stored checkpoint could not be decoded");
        else
            snprintf(upper, 17, "%016llx", (unsigned long long)order);
        msgpack_unpacked_destroy(&u);
    }
    freeReplyObject(r);
    convo__rd_cmd_free(&q);
    free(field);
    free(tk.buf);
    return rc;
}

/* Every thread of the index in byte order, newest checkpoints first in each;
 * entries of threads that are gone simply list nothing. */
static int list_all(convo_backend *b, rconn *c, const convo_checkpoint_list_opts *o,
                    void *filter, const char *upper, convo_checkpoint_set *set, convo_error *err)
{
    char *after = NULL;
    int rc = 0, done = 0;
    while (rc == 0 && !done && !(o->limit && convo_checkpoint_set_count(set) >= o->limit)) {
        redisReply *r;
        if ((rc = convo__rd_index_range(b, c, after, 100, &r, err)) != 0)
            break;
        done = r->elements < 100;
        for (size_t i = 0; i < r->elements && rc == 0; i++) {
            const redisReply *e = r->element[i];
            if (e->type != REDIS_REPLY_STRING || memchr(e->str, '\0', e->len))
                rc = convo__error(err, CONVO_ECORRUPT, NULL, "redis: bad thread index entry");
            else if (!(o->limit && convo_checkpoint_set_count(set) >= o->limit))
                rc = list_thread(b, c, e->str, o, filter, upper, set, err);
        }
        free(after);
        after = rc == 0 && r->elements ? strdup(r->element[r->elements - 1]->str) : NULL;
        if (rc == 0 && r->elements && !after)
            rc = convo__rd_oom(err);
        freeReplyObject(r);
    }
    free(after);
    return rc;
}

int convo__rd_checkpoint_list(convo_backend *b, const convo_checkpoint_list_opts *o, void *filter,
                              convo_checkpoint_set **out, convo_error *err)
{
    convo_checkpoint_set *set = convo__checkpoint_set_new();
    if (!set)
        return convo__rd_oom(err);
    rconn *c;
    char upper[17] = "";
    int rc = convo__rd_acquire(b, &c, err);
    if (rc == 0) {
        if (o->before)
            rc = before_order(b, c, o, upper, err);
        if (rc == 0)
            rc = o->thread_id ? list_thread(b, c, o->thread_id, o, filter, upper, set, err)
                              : list_all(b, c, o, filter, upper, set, err);
        convo__rd_release(b, c);
    }
    if (rc != 0) {
        convo_checkpoint_set_free(set);
        return rc;
    }
    *out = set;
    return 0;
}

int convo__rd_checkpoint_prune(convo_backend *b, const char *thread_id, size_t keep_last,
                               convo_error *err)
{
    thread_keys tk;
    if (convo__rd_keys_make(b, thread_id, &tk) != 0)
        return convo__rd_oom(err);
    cmd call = {0};
    convo__rd_cmd_script_head(&call, &tk);
    convo__rd_cmd_num(&call, keep_last > (size_t)LLONG_MAX ? LLONG_MAX : (long long)keep_last);
    rconn *c;
    redisReply *r = NULL;
    int rc = convo__rd_acquire(b, &c, err);
    if (rc == 0) {
        rc = convo__rd_pipeline_script(b, c, &call, 1, 0, S_CP_PRUNE, &r, err);
        convo__rd_release(b, c);
    }
    if (rc == 0 && r->type == REDIS_REPLY_ERROR)
        rc = convo__rd_reply_error(r, err);
    freeReplyObject(r);
    convo__rd_cmd_free(&call);
    free(tk.buf);
    return rc;
}

int convo__rd_checkpoint_delete(convo_backend *b, const char *thread_id, const char *const *ns,
                                const char *const *ids, size_t n, uint64_t *removed,
                                convo_error *err)
{
    *removed = 0;
    thread_keys tk;
    if (convo__rd_keys_make(b, thread_id, &tk) != 0)
        return convo__rd_oom(err);
    cmd call = {0};
    convo__rd_cmd_script_head(&call, &tk);
    for (size_t i = 0; i < n; i++) {
        convo__rd_cmd_add(&call, ns[i], strlen(ns[i]));
        convo__rd_cmd_add(&call, ids[i], strlen(ids[i]));
    }
    rconn *c;
    redisReply *r = NULL;
    int rc = convo__rd_acquire(b, &c, err);
    if (rc == 0) {
        rc = convo__rd_pipeline_script(b, c, &call, 1, 0, S_CP_DELETE, &r, err);
        convo__rd_release(b, c);
    }
    if (rc == 0 && r->type == REDIS_REPLY_ERROR)
        rc = convo__rd_reply_error(r, err);
    else if (rc == 0 && r->type == REDIS_REPLY_INTEGER)
        *removed = (uint64_t)r->integer;
    else if (rc == 0)
        rc = convo__error(err, CONVO_ECORRUPT, NULL, "redis: unexpected checkpoint delete reply");
    freeReplyObject(r);
    convo__rd_cmd_free(&call);
    free(tk.buf);
    return rc;
}
