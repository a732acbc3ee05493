/* ix.c — the thread index (layout 8 on one server, 9 on a cluster; docs/redis.md,
 * "The thread index"): the
 * declared extra keys (recorded in P:store), the index key of a value, and the
 * index writes the client makes itself: on a cluster after each write (the
 * index lives in other slots than the thread), and the reindexing of threads
 * (migration, first declaration of keys, repairs found by a listing). */
#include "redis_int.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


void convo__rd_ix_free(convo_backend *b)
{
    for (size_t i = 0; i < b->ix_nkeys; i++) {
        free(b->ix_keys[i]);
        free(b->ix_field[i]);
    }
    free(b->ix_keys);
    free(b->ix_field);
    free(b->ix_fields);
    free(b->ix_prefix);
    free(b->ix_recent);
    for (int i = 0; i < IX_SHARDS; i++) {
        free(b->ix_shard[i]);
        free(b->ix_vbase[i]);
    }
}

/* A key as JSON text: the field of the extra hash that holds it (threads.c). */
static char *field_text(const char *key)
{
    json_t *s = json_string(key);
    char *t = s ? json_dumps(s, JSON_ENCODE_ANY | JSON_COMPACT) : NULL;
    json_decref(s);
    return t;
}

/* b->ix_keys and the fields from a JSON array of key names. */
static int keys_set(convo_backend *b, const char *text, size_t len)
{
    json_t *a = json_loadb(text, len, 0, NULL);
    size_t n = json_is_array(a) ? json_array_size(a) : 0, total = 0;
    int rc = json_is_array(a) ? 0 : CONVO_ECORRUPT;
    b->ix_keys = calloc(n + 1, sizeof *b->ix_keys);
    b->ix_field = calloc(n + 1, sizeof *b->ix_field);
    if (rc == 0 && (!b->ix_keys || !b->ix_field))
        rc = CONVO_ENOMEM;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const char *k = json_string_value(json_array_get(a, i));
        if (!k) {
            rc = CONVO_ECORRUPT;
            break;
        }
        b->ix_keys[i] = strdup(k);
        b->ix_field[i] = field_text(k);
        b->ix_nkeys = i + 1;
        if (!b->ix_keys[i] || !b->ix_field[i])
            rc = CONVO_ENOMEM;
        else
            total += strlen(b->ix_field[i]) + 1;
    }
    json_decref(a);
    if (rc == 0 && total > 0 && !(b->ix_fields = malloc(total)))
        rc = CONVO_ENOMEM;
    for (size_t i = 0; i < n && rc == 0; i++) { /* "\0F1\0F2..." */
        size_t flen = strlen(b->ix_field[i]);
        b->ix_fields[b->ix_fields_len++] = '\0';
        memcpy(b->ix_fields + b->ix_fields_len, b->ix_field[i], flen);
        b->ix_fields_len += flen;
    }
    return rc;
}

static char *keys_json(char *const *keys)
{
    json_t *a = json_array();
    for (size_t i = 0; a && keys[i]; i++)
        if (json_array_append_new(a, json_string(keys[i])) != 0) {
            json_decref(a);
            return NULL;
        }
    char *t = a ? json_dumps(a, JSON_COMPACT) : NULL;
    json_decref(a);
    return t;
}

/* HGET P:store ik, or HSETNX P:store ik value; the reply in *out. */
static int store_ik(convo_backend *b, rconn *c, const char *value, redisReply **out,
                    convo_error *err)
{
    cmd q = {0};
    convo__rd_cmd_str(&q, value ? "HSETNX" : "HGET");
    convo__rd_cmd_str(&q, b->store_key);
    convo__rd_cmd_add(&q, "ik", 2);
    if (value)
        convo__rd_cmd_str(&q, value);
    int rc = q.failed ? convo__rd_oom(err) : convo__rd_pipeline(b, c, &q, 1, out, err);
    convo__rd_cmd_free(&q);
    if (rc == 0 && (*out)->type == REDIS_REPLY_ERROR) {
        rc = convo__rd_reply_error(*out, err);
        freeReplyObject(*out);
    }
    return rc;
}

/* The shards of the index sets on a cluster (layout 9): shard i holds the
 * threads of slots [1024 i, 1024 i + 1024) in "P:ix:{T}:s:" (every thread)
 * and "P:ix:{T}:v:F V:" (a value's), T a tag of slot 1024 i + 512: with the
 * contiguous slot ranges a cluster is made with, a thread's sets are on its
 * own master but for the ranges that straddle two masters. */
static int shards_make(convo_backend *b)
{
    for (int i = 0; b->cluster && i < IX_SHARDS; i++) {
        size_t len;
        const char *k = convo__rcl_index_key(b->cluster, IX_SHARD_SLOTS * (unsigned)i +
                                                              IX_SHARD_SLOTS / 2, &len);
        const char *tag = strchr(k, '{');
        size_t n = tag ? strlen(b->ix_prefix) + strlen(tag) + 4 : 0;
        if (!tag || !(b->ix_shard[i] = malloc(n)) || !(b->ix_vbase[i] = malloc(n)))
            return CONVO_ENOMEM;
        sprintf(b->ix_shard[i], "%s%s:s:", b->ix_prefix, tag);
        sprintf(b->ix_vbase[i], "%s%s:v:", b->ix_prefix, tag);
    }
    return 0;
}

/* The declared keys: recorded in P:store's ik (a JSON array, sorted) by the
 * first opener that declares some; later openers use them, and one declaring
 * others is refused. *reindex: recorded now, so the threads already stored
 * must be indexed by them. */
int convo__rd_ix_open(convo_backend *b, rconn *c, int *reindex, convo_error *err)
{
    *reindex = 0;
    if (!(b->ix_prefix = malloc(strlen(b->prefix) + 5)) ||
        !(b->ix_recent = malloc(strlen(b->prefix) + 6)))
        return convo__rd_oom(err);
    sprintf(b->ix_prefix, "%s:ix:", b->prefix);
    sprintf(b->ix_recent, "%s:ix:r", b->prefix);
    if (shards_make(b) != 0)
        return convo__rd_oom(err);
    char *declared = b->limits.indexed_keys ? keys_json(b->limits.indexed_keys) : NULL;
    if (b->limits.indexed_keys && !declared)
        return convo__rd_oom(err);
    redisReply *r = NULL;
    int rc = store_ik(b, c, NULL, &r, err);
    if (rc == 0 && r->type == REDIS_REPLY_NIL && declared) {
        freeReplyObject(r);
        r = NULL;
        if ((rc = store_ik(b, c, declared, &r, err)) == 0 && r->type == REDIS_REPLY_INTEGER &&
            r->integer == 1)
            *reindex = 1;
        freeReplyObject(r);
        r = NULL;
        if (rc == 0) /* another opener may have recorded others first */
            rc = store_ik(b, c, NULL, &r, err);
    }
    if (rc == 0 && r->type == REDIS_REPLY_STRING) {
        if (declared && (strlen(declared) != r->len || memcmp(declared, r->str, r->len) != 0))
            rc = convo__error(err, CONVO_EINVAL, NULL,
                              "redis: the store indexes the extra keys %.*s; this opener declares "
                              "%s (the keys are declared once for a store)",
                              (int)(r->len > 2000 ? 2000 : r->len), r->str, declared);
        else if ((rc = keys_set(b, r->str, r->len)) != 0)
            rc = rc == CONVO_ENOMEM
                     ? convo__rd_oom(err)
                     : convo__error(err, CONVO_ECORRUPT, NULL, "redis: bad index keys in the store");
    }
    freeReplyObject(r);
    free(declared);
    return rc;
}

int convo__rd_ix_field_of(const convo_backend *b, const char *key)
{
    for (size_t i = 0; i < b->ix_nkeys; i++)
        if (strcmp(b->ix_keys[i], key) == 0)
            return (int)i;
    return -1;
}

/* "P:ix:{F V}:" for field text F and a value's JSON text, as index.lua makes
 * it (numbers as %.17g, texts over 200 bytes cut), or on a cluster the
 * value's sets in shard i, "P:ix:{T}:v:F V:"; NULL when such a value is not
 * indexed (an object or an array) or out of memory. */
char *convo__rd_ix_kv(const convo_backend *b, int shard, const char *field, const char *json,
                      size_t len)
{
    if (len == 0 || json[0] == '{' || json[0] == '[')
        return NULL;
    char num[40];
    if (json[0] == '-' || (json[0] >= '0' && json[0] <= '9')) {
        char text[64];
        if (len >= sizeof text)
            len = sizeof text - 1; /* a JSON number is never that long from jansson */
        memcpy(text, json, len);
        text[len] = '\0';
        double x = strtod(text, NULL);
        if (x == 0)
            x = 0; /* -0 */
        len = (size_t)snprintf(num, sizeof num, "%.17g", x);
        json = num;
    }
    int cut = len > IX_VALUE_MAX;
    const char *base = shard >= 0 ? b->ix_vbase[shard] : b->ix_prefix;
    size_t vlen = cut ? IX_VALUE_MAX : len, plen = strlen(base), flen = strlen(field);
    char *k = malloc(plen + flen + vlen + 5);
    if (!k)
        return NULL;
    char *p = k;
    memcpy(p, base, plen);
    p += plen;
    if (shard < 0)
        *p++ = '{';
    memcpy(p, field, flen);
    p += flen;
    memcpy(p, json, vlen);
    p += vlen;
    if (cut)
        *p++ = '\n';
    memcpy(p, shard < 0 ? "}:" : ":", shard < 0 ? 3 : 2);
    return k;
}

/* The shard of thread id on a cluster: its slot's range of 1024 (layout 9;
 * layout 4 took its id's hash modulo 16, wherever that put it). */
int convo__rd_ix_shard(const convo_backend *b, const char *id)
{
    return b->cluster ? (int)(convo__rd_id_slot(id) / IX_SHARD_SLOTS) : 0;
}

/* ---- the cluster's index writes ---- */

typedef struct owned {
    char **s;
    size_t n, cap;
} owned;

static const char *keep(owned *o, char *s)
{
    if (!s)
        return NULL;
    if (o->n == o->cap) {
        size_t cap = o->cap ? o->cap * 2 : 16;
        char **g = realloc(o->s, cap * sizeof *g);
        if (!g) {
            free(s);
            return NULL;
        }
        o->s = g;
        o->cap = cap;
    }
    return o->s[o->n++] = s;
}

static void owned_free(owned *o)
{
    for (size_t i = 0; i < o->n; i++)
        free(o->s[i]);
    free(o->s);
}

static char *concat(const char *a, const char *b)
{
    char *s = malloc(strlen(a) + strlen(b) + 1);
    if (s)
        sprintf(s, "%s%s", a, b);
    return s;
}

static void zadd(cmd *q, const char *key, const char *score, size_t slen, const char *id)
{
    convo__rd_cmd_str(q, "ZADD");
    convo__rd_cmd_str(q, key);
    convo__rd_cmd_add(q, score, slen);
    convo__rd_cmd_str(q, id);
}

/* The ZADDs of one thread from what was read of it: meta's c and u (m), the
 * declared extra values (x, HMGET of the fields). Adds to cmds (room for 3 +
 * 3 * nkeys); returns how many, or -1 (out of memory). */
static long sync_cmds(convo_backend *b, const char *id, const redisReply *m, const redisReply *x,
                      cmd *cmds, owned *o)
{
    if (m->type != REDIS_REPLY_ARRAY || m->elements != 2 ||
        m->element[0]->type != REDIS_REPLY_STRING || m->element[1]->type != REDIS_REPLY_STRING)
        return 0; /* gone, or not in layout 4 yet: nothing to index */
    const redisReply *c = m->element[0], *u = m->element[1];
    int at = convo__rd_ix_shard(b, id);
    const char *shard = b->ix_shard[at];
    const char *kr = keep(o, concat(shard, "r")), *kc = keep(o, concat(shard, "c")),
               *ki = keep(o, concat(shard, "i"));
    if (!kr || !kc || !ki)
        return -1;
    long n = 0;
    zadd(&cmds[n++], kr, u->str, u->len, id);
    zadd(&cmds[n++], kc, c->str, c->len, id);
    zadd(&cmds[n++], ki, "0", 1, id);
    for (size_t i = 0; x && x->type == REDIS_REPLY_ARRAY && i < x->elements; i++) {
        const redisReply *v = x->element[i];
        const char *sp = v->type == REDIS_REPLY_STRING ? memchr(v->str, ' ', v->len) : NULL;
        if (!sp || i >= b->ix_nkeys)
            continue;
        char *kv = convo__rd_ix_kv(b, at, b->ix_field[i], sp + 1,
                                   v->len - (size_t)(sp + 1 - v->str));
        if (!kv)
            continue; /* not an indexed value (or no memory: repaired on read) */
        const char *k1 = keep(o, concat(kv, "r")), *k2 = keep(o, concat(kv, "c")),
                   *k3 = keep(o, concat(kv, "i"));
        free(kv);
        if (!k1 || !k2 || !k3)
            return -1;
        zadd(&cmds[n++], k1, u->str, u->len, id);
        zadd(&cmds[n++], k2, c->str, c->len, id);
        zadd(&cmds[n++], k3, "0", 1, id);
    }
    return n;
}

/* The reads a cluster's index entries are written from: HMGET meta c u, and
 * HMGET extra of the declared fields (EXISTS extra when none), into two[0..2). */
void convo__rd_ix_read_cmds(const convo_backend *b, const thread_keys *tk, cmd *two)
{
    convo__rd_cmd_str(&two[0], "HMGET");
    convo__rd_cmd_add(&two[0], tk->k[K_META], tk->len[K_META]);
    convo__rd_cmd_add(&two[0], "c", 1);
    convo__rd_cmd_add(&two[0], "u", 1);
    convo__rd_cmd_str(&two[1], b->ix_nkeys ? "HMGET" : "EXISTS");
    convo__rd_cmd_add(&two[1], tk->k[K_EXTRA], tk->len[K_EXTRA]);
    for (size_t k = 0; k < b->ix_nkeys; k++)
        convo__rd_cmd_str(&two[1], b->ix_field[k]);
}

/* A cluster: the entries of thread id from its reads (m, x: the replies to
 * convo__rd_ix_read_cmds), in one round trip pipelined over the masters. */
int convo__rd_ix_write(convo_backend *b, rconn *c, const char *id, const redisReply *m,
                       const redisReply *x, convo_error *err)
{
    if (!b->cluster || !m)
        return 0;
    size_t per = 3 + 3 * b->ix_nkeys;
    cmd *writes = calloc(per, sizeof *writes);
    redisReply **r = calloc(per, sizeof *r);
    owned o = {0};
    int rc = writes && r ? 0 : convo__rd_oom(err);
    long n = rc == 0 ? sync_cmds(b, id, m, b->ix_nkeys ? x : NULL, writes, &o) : 0;
    if (n < 0)
        rc = convo__rd_oom(err);
    for (long i = 0; i < n && rc == 0; i++)
        if (writes[i].failed)
            rc = convo__rd_oom(err);
    if (rc == 0 && n > 0 && (rc = convo__rd_pipeline(b, c, writes, (size_t)n, r, err)) == 0)
        convo__rd_replies_free(r, (size_t)n);
    for (size_t i = 0; writes && i < per; i++)
        convo__rd_cmd_free(&writes[i]);
    owned_free(&o);
    free(writes);
    free(r);
    return rc;
}

/* Reads each thread's c, u and declared values (one round trip), then writes
 * its entries (one more, pipelined over the masters). A cluster only: on one
 * server the scripts keep the index. */
int convo__rd_ix_sync(convo_backend *b, rconn *c, const char *const *ids, size_t n,
                      convo_error *err)
{
    if (!b->cluster || n == 0)
        return 0;
    size_t per = 3 + 3 * b->ix_nkeys;
    cmd *reads = calloc(2 * n, sizeof *reads), *writes = calloc(n * per, sizeof *writes);
    redisReply **r1 = calloc(2 * n, sizeof *r1), **r2 = calloc(n * per, sizeof *r2);
    thread_keys *tk = calloc(n, sizeof *tk);
    owned o = {0};
    int rc = reads && writes && r1 && r2 && tk ? 0 : convo__rd_oom(err);
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (convo__rd_keys_make(b, ids[i], &tk[i]) != 0) {
            rc = convo__rd_oom(err);
            break;
        }
        convo__rd_ix_read_cmds(b, &tk[i], &reads[2 * i]);
        if (reads[2 * i].failed || reads[2 * i + 1].failed)
            rc = convo__rd_oom(err);
    }
    if (rc == 0)
        rc = convo__rd_pipeline(b, c, reads, 2 * n, r1, err);
    size_t nw = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        long got = sync_cmds(b, ids[i], r1[2 * i], b->ix_nkeys ? r1[2 * i + 1] : NULL,
                             &writes[nw], &o);
        if (got < 0)
            rc = convo__rd_oom(err);
        else
            nw += (size_t)got;
    }
    for (size_t i = 0; i < nw && rc == 0; i++)
        if (writes[i].failed)
            rc = convo__rd_oom(err);
    if (rc == 0 && nw > 0)
        rc = convo__rd_pipeline(b, c, writes, nw, r2, err);
    for (size_t i = 0; i < nw && rc == 0; i++)
        if (r2[i]->type == REDIS_REPLY_ERROR)
            rc = convo__rd_reply_error(r2[i], err);
    if (r1 && reads)
        for (size_t i = 0; i < 2 * n; i++) {
            freeReplyObject(r1[i]);
            convo__rd_cmd_free(&reads[i]);
        }
    for (size_t i = 0; writes && i < n * per; i++) {
        if (i < nw)
            freeReplyObject(r2[i]);
        convo__rd_cmd_free(&writes[i]);
    }
    for (size_t i = 0; tk && i < n; i++)
        free(tk[i].buf);
    owned_free(&o);
    free(reads);
    free(writes);
    free(r1);
    free(r2);
    free(tk);
    return rc;
}

/* After a write to a thread on a cluster: its entries. A failure here leaves
 * the write made (an error would make a caller store it again): the entries
 * are then repaired by a listing that meets them or by convo_sweep. */
void convo__rd_ix_after(convo_backend *b, rconn *c, const char *id)
{
    if (b->cluster)
        (void)convo__rd_ix_sync(b, c, &id, 1, NULL);
}

/* The reindex script on each thread (layout 4, its entries again), then on a
 * cluster its entries from the client. */
int convo__rd_ix_reindex(convo_backend *b, rconn *c, const char *const *ids, size_t n,
                         convo_error *err)
{
    if (n == 0)
        return 0;
    cmd *calls = calloc(n, sizeof *calls);
    redisReply **r = calloc(n, sizeof *r);
    thread_keys *tk = calloc(n, sizeof *tk);
    int rc = calls && r && tk ? 0 : convo__rd_oom(err);
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (convo__rd_keys_make(b, ids[i], &tk[i]) != 0) {
            rc = convo__rd_oom(err);
            break;
        }
        convo__rd_cmd_script_head(&calls[i], &tk[i]);
        convo__rd_cmd_spec(&calls[i], &tk[i]);
    }
    if (rc == 0)
        rc = convo__rd_scripts_each(b, c, calls, n, 1, S_REINDEX, r, err);
    if (rc == 0)
        rc = convo__rd_ix_sync(b, c, ids, n, err);
    for (size_t i = 0; calls && r && i < n; i++) {
        freeReplyObject(r[i]);
        convo__rd_cmd_free(&calls[i]);
    }
    for (size_t i = 0; tk && i < n; i++)
        free(tk[i].buf);
    free(calls);
    free(r);
    free(tk);
    return rc;
}

/* ---- layout 4's sets on a cluster ---- */

#define LAYOUT4_SHARDS 16 /* its shards: the id's hash modulo 16, at slot 1024 i + 512 */

/* Each "P:ix:{F V}:..." key SCAN found: a value's set of layout 4, unlinked. */
static int drop_batch(convo_backend *b, rconn *c, const redisReply *keys, void *ctx,
                      convo_error *err)
{
    (void)ctx;
    size_t n = keys->elements;
    cmd *q = n ? calloc(n, sizeof *q) : NULL;
    redisReply **r = n ? calloc(n, sizeof *r) : NULL;
    int rc = n == 0 || (q && r) ? 0 : convo__rd_oom(err);
    for (size_t i = 0; i < n && rc == 0; i++) {
        const redisReply *k = keys->element[i];
        convo__rd_cmd_str(&q[i], "UNLINK");
        if (k->type == REDIS_REPLY_STRING)
            convo__rd_cmd_add(&q[i], k->str, k->len);
        if (q[i].failed)
            rc = convo__rd_oom(err);
    }
    if (rc == 0 && n > 0 && (rc = convo__rd_pipeline(b, c, q, n, r, err)) == 0)
        convo__rd_replies_free(r, n);
    for (size_t i = 0; q && i < n; i++)
        convo__rd_cmd_free(&q[i]);
    free(q);
    free(r);
    return rc;
}

/* After every thread of a cluster store of layout 4 is indexed in layout 9's
 * sets: layout 4's go, its shards "P:ix:{T}:r|c|i" (T the same tags) and its
 * values' sets "P:ix:{F V}:r|c|i" (a field's JSON text starts with '"'), found
 * by SCAN on every master. Not read by this version; an older one that opens
 * the store makes them again (docs/redis.md, "Layouts"). */
int convo__rd_ix_drop_layout4(convo_backend *b, rconn *c, convo_error *err)
{
    if (!b->cluster)
        return 0;
    cmd q[3 * LAYOUT4_SHARDS] = {{0}};
    redisReply *r[3 * LAYOUT4_SHARDS] = {NULL};
    char names[3 * LAYOUT4_SHARDS][160]; /* a prefix is at most 128 bytes */
    int rc = 0;
    for (int i = 0; i < LAYOUT4_SHARDS && rc == 0; i++) {
        size_t len;
        const char *k4 = convo__rcl_index_key(b->cluster, 1024u * (unsigned)i + 512u, &len);
        const char *tag = strchr(k4, '{');
        for (int k = 0; k < 3 && tag; k++) {
            cmd *one = &q[3 * i + k];
            int n = snprintf(names[3 * i + k], sizeof names[0], "%s%s:%c", b->ix_prefix, tag,
                             "rci"[k]);
            convo__rd_cmd_str(one, "UNLINK");
            convo__rd_cmd_add(one, names[3 * i + k], (size_t)n);
            if (one->failed || n >= (int)sizeof names[0])
                rc = convo__rd_oom(err);
        }
        if (!tag)
            rc = convo__rd_oom(err);
    }
    if (rc == 0 && (rc = convo__rd_pipeline(b, c, q, 3 * LAYOUT4_SHARDS, r, err)) == 0)
        convo__rd_replies_free(r, 3 * LAYOUT4_SHARDS);
    for (int i = 0; i < 3 * LAYOUT4_SHARDS; i++)
        convo__rd_cmd_free(&q[i]);
    return rc == 0 ? convo__rd_scan_each(b, c, ":ix:{\"*", drop_batch, NULL, err) : rc;
}

/* ---- sweep ---- */

/* The members (with scores) of a ZSCAN page of base + "r" whose thread is
 * gone: their entries in base + r, c, i go, then they are reindexed. */
static int sweep_members(convo_backend *b, rconn *c, const char *base, const redisReply *m,
                         convo_error *err)
{
    size_t n = m->elements / 2, ngone = 0;
    if (n == 0)
        return 0;
    cmd *q = calloc(3 * n, sizeof *q);
    redisReply **r = calloc(3 * n, sizeof *r);
    thread_keys *tk = calloc(n, sizeof *tk);
    const char **gone = calloc(n, sizeof *gone);
    char *kinds[3] = {concat(base, "r"), concat(base, "c"), concat(base, "i")};
    int rc = q && r && tk && gone && kinds[0] && kinds[1] && kinds[2] ? 0 : convo__rd_oom(err);
    for (size_t i = 0; i < n && rc == 0; i++) {
        const redisReply *id = m->element[2 * i];
        if (id->type != REDIS_REPLY_STRING || memchr(id->str, '\0', id->len) ||
            convo__rd_keys_make(b, id->str, &tk[i]) != 0) {
            rc = id->type == REDIS_REPLY_STRING ? convo__rd_oom(err)
                                                : convo__error(err, CONVO_ECORRUPT, NULL,
                                                               "redis: bad thread index entry");
            break;
        }
        convo__rd_cmd_str(&q[i], "EXISTS");
        convo__rd_cmd_add(&q[i], tk[i].k[K_META], tk[i].len[K_META]);
    }
    if (rc == 0)
        rc = convo__rd_pipeline(b, c, q, n, r, err);
    for (size_t i = 0; i < n && rc == 0; i++)
        if (r[i]->type == REDIS_REPLY_INTEGER && r[i]->integer == 0)
            gone[ngone++] = m->element[2 * i]->str;
    if (r)
        convo__rd_replies_free(r, n);
    for (size_t i = 0; q && i < n; i++) {
        convo__rd_cmd_free(&q[i]);
        q[i] = (cmd){0};
    }
    for (size_t i = 0; i < ngone && rc == 0; i++)
        for (int k = 0; k < 3; k++) {
            convo__rd_cmd_str(&q[3 * i + (size_t)k], "ZREM");
            convo__rd_cmd_str(&q[3 * i + (size_t)k], kinds[k]);
            convo__rd_cmd_str(&q[3 * i + (size_t)k], gone[i]);
        }
    if (rc == 0 && ngone > 0 && (rc = convo__rd_pipeline(b, c, q, 3 * ngone, r, err)) == 0)
        convo__rd_replies_free(r, 3 * ngone);
    if (rc == 0)
        rc = convo__rd_ix_reindex(b, c, gone, ngone, err);
    for (size_t i = 0; q && i < 3 * n; i++)
        convo__rd_cmd_free(&q[i]);
    for (size_t i = 0; tk && i < n; i++)
        free(tk[i].buf);
    for (int k = 0; k < 3; k++)
        free(kinds[k]);
    free(q);
    free(r);
    free(tk);
    free(gone);
    return rc;
}

/* One index set's members whose thread is gone: removed from the set's three
 * kinds (base "P:ix:...:" + r, c, i), then reindexed (a thread re-created
 * meanwhile gets its entries back). It walks base + kind: r, or i for a
 * value on one server (as when layout 5 kept no :r there). ZSCAN returns every
 * member present throughout, whatever is removed meanwhile. */
static int sweep_set(convo_backend *b, rconn *c, const char *base, char kind, convo_error *err)
{
    char *key = malloc(strlen(base) + 2), cursor[32] = "0";
    int rc = key ? 0 : convo__rd_oom(err);
    if (key)
        sprintf(key, "%s%c", base, kind);
    do {
        cmd q = {0};
        redisReply *r = NULL;
        convo__rd_cmd_str(&q, "ZSCAN");
        convo__rd_cmd_str(&q, key);
        convo__rd_cmd_str(&q, cursor);
        convo__rd_cmd_str(&q, "COUNT");
        convo__rd_cmd_str(&q, "500");
        if (rc == 0)
            rc = q.failed ? convo__rd_oom(err) : convo__rd_pipeline(b, c, &q, 1, &r, err);
        convo__rd_cmd_free(&q);
        if (rc == 0 && (r->type != REDIS_REPLY_ARRAY || r->elements != 2 ||
                        r->element[0]->type != REDIS_REPLY_STRING ||
                        r->element[0]->len >= sizeof cursor ||
                        r->element[1]->type != REDIS_REPLY_ARRAY))
            rc = r->type == REDIS_REPLY_ERROR
                     ? convo__rd_reply_error(r, err)
                     : convo__error(err, CONVO_EIO, NULL, "redis: unexpected ZSCAN reply");
        if (rc == 0) {
            memcpy(cursor, r->element[0]->str, r->element[0]->len);
            cursor[r->element[0]->len] = '\0';
            rc = sweep_members(b, c, base, r->element[1], err);
        }
        freeReplyObject(r);
    } while (rc == 0 && strcmp(cursor, "0") != 0);
    free(key);
    return rc;
}

/* Each "P:ix:{...}:r" key SCAN found (":i" on one server): the sets of one
 * value, or a shard. */
static int sweep_batch(convo_backend *b, rconn *c, const redisReply *keys, void *ctx,
                       convo_error *err)
{
    char kind = *(const char *)ctx;
    int rc = 0;
    for (size_t i = 0; i < keys->elements && rc == 0; i++) {
        const redisReply *k = keys->element[i];
        if (k->type != REDIS_REPLY_STRING || k->len < 2 || memchr(k->str, '\0', k->len))
            continue;
        char *base = strndup(k->str, k->len - 1); /* without the kind */
        rc = base ? sweep_set(b, c, base, kind, err) : convo__rd_oom(err);
        free(base);
    }
    return rc;
}

/* convo_sweep's part for layout 4: entries of threads that are gone (expired,
 * deleted on a cluster, a crash) removed from every index set. */
int convo__rd_ix_sweep(convo_backend *b, rconn *c, convo_error *err)
{
    int rc = b->cluster ? 0 : sweep_set(b, c, b->ix_prefix, 'r', err);
    char kind = b->cluster ? 'r' : 'i';
    if (rc == 0)
        rc = convo__rd_scan_each(b, c, b->cluster ? ":ix:{*:r" : ":ix:{*}:i", sweep_batch, &kind,
                                 err);
    return rc;
}
