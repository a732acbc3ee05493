/* body.c — checkpoint bodies stored as what they add (docs/checkpoints.md
 * "Checkpoint bodies as deltas"): a put with log references stores its body as
 * a delta against a base body, and the base once, as the value of the reserved
 * channel __convo_body__ at version <the checkpoint id that introduced it>.
 * Every checkpoint lists that channel, so a read is still one driver call, and
 * prune, delete, copy and export keep a base as long as a checkpoint lists it,
 * as they keep any channel value. A body that has drifted from its base (the
 * delta over half of it) becomes a new base.
 *
 * Stored layout (body type "convo/delta", msgpack), the smaller of:
 *   version 1: [1, type: str, length: int, ops: bin]
 *     type: the body's own type; length: its bytes; ops: the delta against the
 *     base, a sequence of COPY (0x00, varint offset, varint length: bytes of the
 *     base) and ADD (0x01, varint length, the bytes).
 *   version 2: [2, [style, code]]  (body_json.c: a JSON body against a JSON base;
 *     its type is the base's) */
#include "internal.h"
#include <msgpack.h>
#include <stdlib.h>
#include <string.h>

#define DELTA_LAYOUT 1
#define JSON_LAYOUT 2
#define MIN_MATCH 8

typedef struct buf {
    unsigned char *p;
    size_t len, cap;
} buf;

static int put_bytes(buf *b, const void *s, size_t n)
{
    if (b->len + n > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 256;
        while (cap < b->len + n)
            cap *= 2;
        unsigned char *p = realloc(b->p, cap);
        if (!p)
            return -1;
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    return 0;
}

static int put_varint(buf *b, uint64_t v)
{
    unsigned char t[10];
    size_t n = 0;
    do {
        t[n] = v & 0x7f;
        v >>= 7;
        if (v)
            t[n] |= 0x80;
        n++;
    } while (v);
    return put_bytes(b, t, n);
}

static int get_varint(const unsigned char *p, size_t len, size_t *at, uint64_t *out)
{
    uint64_t v = 0;
    for (int shift = 0; *at < len && shift < 64; shift += 7) {
        unsigned char c = p[(*at)++];
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80)) {
            *out = v;
            return 0;
        }
    }
    return -1;
}

static uint32_t hash8(const unsigned char *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return (uint32_t)((v * 0x9E3779B97F4A7C15ULL) >> 32);
}

static int flush_add(buf *ops, const unsigned char *t, size_t from, size_t to)
{
    if (to == from)
        return 0;
    unsigned char op = 1;
    return put_bytes(ops, &op, 1) || put_varint(ops, to - from) ||
           put_bytes(ops, t + from, to - from);
}

/* ops turning base into target: greedy matches of at least MIN_MATCH bytes. */
static int diff(const unsigned char *base, size_t blen, const unsigned char *t, size_t tlen,
                buf *ops)
{
    size_t size = 64;
    while (size < 2 * blen)
        size *= 2;
    int64_t *table = malloc(size * sizeof *table);
    if (!table)
        return -1;
    for (size_t i = 0; i < size; i++)
        table[i] = -1;
    for (size_t i = 0; i + MIN_MATCH <= blen; i++)
        table[hash8(base + i) & (size - 1)] = (int64_t)i;
    size_t j = 0, pending = 0;
    int bad = 0;
    while (!bad && j + MIN_MATCH <= tlen) {
        int64_t c = table[hash8(t + j) & (size - 1)];
        if (c < 0 || memcmp(base + c, t + j, MIN_MATCH) != 0) {
            j++;
            continue;
        }
        size_t n = MIN_MATCH;
        while ((size_t)c + n < blen && j + n < tlen && base[c + n] == t[j + n])
            n++;
        unsigned char op = 0;
        bad = flush_add(ops, t, pending, j) || put_bytes(ops, &op, 1) ||
              put_varint(ops, (uint64_t)c) || put_varint(ops, n);
        j += n;
        pending = j;
    }
    if (!bad)
        bad = flush_add(ops, t, pending, tlen);
    free(table);
    return bad ? -1 : 0;
}

/* Runs ops over base into t (NULL: only checks them); 0 when they are
 * well formed and make exactly tlen bytes. */
static int run_ops(const unsigned char *base, size_t blen, const unsigned char *ops, size_t olen,
                   unsigned char *t, size_t tlen)
{
    size_t at = 0, w = 0;
    while (at < olen) {
        unsigned char op = ops[at++];
        uint64_t a, n;
        if (op == 0) {
            if (get_varint(ops, olen, &at, &a) || get_varint(ops, olen, &at, &n) || a > blen ||
                n > blen - a || n > tlen - w)
                return -1;
            if (t && n) /* an empty base may have no bytes at all */
                memcpy(t + w, base + a, n);
        } else if (op == 1) {
            if (get_varint(ops, olen, &at, &n) || n > olen - at || n > tlen - w)
                return -1;
            if (t)
                memcpy(t + w, ops + at, n);
            at += n;
        } else {
            return -1;
        }
        w += n;
    }
    return w == tlen ? 0 : -1;
}

/* The stored length is trusted for the allocation only once the ops make it. */
static int apply(const unsigned char *base, size_t blen, const unsigned char *ops, size_t olen,
                 size_t tlen, unsigned char **out)
{
    if (run_ops(base, blen, ops, olen, NULL, tlen) != 0)
        return CONVO_ECORRUPT;
    unsigned char *t = malloc(tlen ? tlen : 1);
    if (!t)
        return CONVO_ENOMEM;
    run_ops(base, blen, ops, olen, t, tlen);
    *out = t;
    return 0;
}

typedef struct delta {
    msgpack_unpacked up;
    int64_t layout;
    const char *type; /* version 1 */
    size_t type_len;
    int64_t length;
    const unsigned char *ops;
    size_t ops_len;
    const msgpack_object *code; /* version 2 */
} delta;

static int decode(const void *bytes, size_t len, delta *d)
{
    msgpack_unpacked_init(&d->up);
    size_t off = 0;
    if (!bytes || msgpack_unpack_next(&d->up, bytes, len, &off) != MSGPACK_UNPACK_SUCCESS ||
        off != len)
        return -1;
    const msgpack_object *o = &d->up.data;
    if (o->type != MSGPACK_OBJECT_ARRAY || o->via.array.size < 2 ||
        convo__unpack_int(&o->via.array.ptr[0], &d->layout))
        return -1;
    const msgpack_object *a = o->via.array.ptr;
    if (d->layout == JSON_LAYOUT && o->via.array.size == 2) {
        d->code = &a[1];
        return a[1].type == MSGPACK_OBJECT_ARRAY && a[1].via.array.size == 2 ? 0 : -1;
    }
    if (d->layout != DELTA_LAYOUT || o->via.array.size != 4 ||
        a[1].type != MSGPACK_OBJECT_STR || a[1].via.str.size == 0 ||
        convo__unpack_int(&a[2], &d->length) || d->length < 0 ||
        a[3].type != MSGPACK_OBJECT_BIN)
        return -1;
    d->type = a[1].via.str.ptr;
    d->type_len = a[1].via.str.size;
    d->ops = (const unsigned char *)a[3].via.bin.ptr;
    d->ops_len = a[3].via.bin.size;
    return 0;
}

int convo__body_check(const void *bytes, size_t len, convo_error *err)
{
    delta d;
    int bad = decode(bytes, len, &d);
    msgpack_unpacked_destroy(&d.up);
    return bad ? convo__error(err, CONVO_EINVAL, NULL, "a body of type %s is malformed",
                              CONVO_DELTA_TYPE)
               : 0;
}

/* ---- writing ---- */

/* The version-1 record of body against base (NULL: the body is its own base,
 * one COPY of it whole). */
static int pack_ops(const cp_channel *base, const convo_blob *body, msgpack_sbuffer *sb)
{
    buf ops = {0};
    unsigned char op = 0;
    int bad = base ? diff(base->bytes, base->len, body->bytes, body->len, &ops)
              : body->len ? put_bytes(&ops, &op, 1) || put_varint(&ops, 0) ||
                                put_varint(&ops, body->len)
                          : 0;
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    if (!bad)
        bad = msgpack_pack_array(&pk, 4) || msgpack_pack_int64(&pk, DELTA_LAYOUT) ||
              convo__pack_str(&pk, body->type) || msgpack_pack_int64(&pk, (int64_t)body->len) ||
              convo__pack_bin(&pk, ops.p, ops.len);
    free(ops.p);
    return bad ? -1 : 0;
}

/* ---- the checkpoint's names a version-2 code refers to ---- */

typedef struct named {
    const char *channel, *version;
} named;

static int by_channel(const void *a, const void *b)
{
    return strcmp(((const named *)a)->channel, ((const named *)b)->channel);
}

/* nm from the n pairs in p (the reserved channel left out), sorted in place;
 * *versions malloc'd. */
static int names_make(convo_jdelta_names *nm, const char *id, named *p, size_t n,
                      const char ***versions)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strcmp(p[i].channel, CONVO_BODY_CHANNEL) != 0)
            p[k++] = p[i];
    qsort(p, k, sizeof *p, by_channel);
    *versions = malloc((k ? k : 1) * sizeof **versions);
    if (!*versions)
        return -1;
    for (size_t i = 0; i < k; i++)
        (*versions)[i] = p[i].version;
    *nm = (convo_jdelta_names){id, *versions, k};
    return 0;
}

static int names_of_put(const convo_checkpoint_in *cp, convo_jdelta_names *nm,
                        const char ***versions)
{
    named *p = malloc((cp->nchannels ? cp->nchannels : 1) * sizeof *p);
    if (!p)
        return -1;
    for (size_t i = 0; i < cp->nchannels; i++)
        p[i] = (named){cp->channels[i].channel, cp->channels[i].version};
    int rc = names_make(nm, cp->checkpoint_id, p, cp->nchannels, versions);
    free(p);
    return rc;
}

static int names_of_read(const convo_checkpoint *cp, convo_jdelta_names *nm,
                         const char ***versions)
{
    named *p = malloc((cp->nchannels ? cp->nchannels : 1) * sizeof *p);
    if (!p)
        return -1;
    for (size_t i = 0; i < cp->nchannels; i++)
        p[i] = (named){cp->channels[i].channel, cp->channels[i].version};
    int rc = names_make(nm, cp->id, p, cp->nchannels, versions);
    free(p);
    return rc;
}

/* The version-2 record, when the body is JSON coded exactly against the base
 * (checked by decoding it): 0; 2 the same, but the body has keys the base has
 * not; 1 when not coded; -1 out of memory. */
static int pack_json(const cp_channel *base, const convo_checkpoint_in *cp, msgpack_sbuffer *sb)
{
    msgpack_packer pk;
    msgpack_packer_init(&pk, sb, msgpack_sbuffer_write);
    convo_jdelta_names nm;
    const char **versions = NULL;
    if (names_of_put(cp, &nm, &versions) != 0 || msgpack_pack_array(&pk, 2) ||
        msgpack_pack_int64(&pk, JSON_LAYOUT)) {
        free(versions);
        return -1;
    }
    int rc = convo__jdelta_encode(base->bytes, base->len, cp->body.bytes, cp->body.len, &nm, &pk);
    int new_keys = rc == 2;
    rc = new_keys ? 0 : rc;
    if (rc == 0) { /* exact, or not taken */
        delta d;
        char *again = NULL;
        size_t len = 0;
        if (decode(sb->data, sb->size, &d) != 0 ||
            convo__jdelta_decode(base->bytes, base->len, d.code, &nm, &again, &len) ||
            len != cp->body.len || memcmp(again, cp->body.bytes, len) != 0)
            rc = 1;
        msgpack_unpacked_destroy(&d.up);
        free(again);
    }
    free(versions);
    return rc == 0 && new_keys ? 2 : rc;
}

int convo__body_plan(const convo_checkpoint *parent, const convo_checkpoint_in *cp,
                     convo_body_plan *out, convo_error *err)
{
    memset(out, 0, sizeof *out);
    if (!cp->body.type)
        return 0;
    const cp_channel *base = NULL;
    for (size_t i = 0; parent && i < parent->nchannels; i++)
        if (strcmp(parent->channels[i].channel, CONVO_BODY_CHANNEL) == 0 &&
            parent->channels[i].type &&
            strcmp(parent->channels[i].type, cp->body.type) == 0)
            base = &parent->channels[i];
    msgpack_sbuffer v1, v2;
    msgpack_sbuffer_init(&v1);
    msgpack_sbuffer_init(&v2);
    int rc = 0, json = base ? pack_json(base, cp, &v2) : 1;
    if (json < 0 || (base && pack_ops(base, &cp->body, &v1)))
        rc = -1;
    msgpack_sbuffer *best = json == 0 && v2.size < v1.size ? &v2 : &v1;
    /* drifted (the delta over half the body, or keys the base has not): a new base */
    if (rc == 0 && base && (json == 2 || best->size > cp->body.len / 2))
        base = NULL;
    if (rc == 0 && !base) {
        msgpack_sbuffer_clear(&v1);
        best = &v1;
        rc = pack_ops(NULL, &cp->body, &v1);
    }
    msgpack_sbuffer *other = best == &v1 ? &v2 : &v1;
    msgpack_sbuffer_destroy(other);
    if (rc != 0) {
        msgpack_sbuffer_destroy(best);
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    }
    out->delta = (convo_blob){CONVO_DELTA_TYPE, best->data, best->size};
    out->channel = (convo_channel_in){CONVO_BODY_CHANNEL, base ? base->version : cp->checkpoint_id,
                                      base ? NULL : &out->base};
    out->base = cp->body;
    out->active = 1;
    return 0;
}

void convo__body_plan_free(convo_body_plan *p)
{
    free((void *)p->delta.bytes);
    memset(p, 0, sizeof *p);
}

/* ---- reading ---- */

int convo__body_resolve(convo_checkpoint *cp, convo_error *err)
{
    if (!cp->body_type || strcmp(cp->body_type, CONVO_DELTA_TYPE) != 0)
        return 0;
    size_t k = cp->nchannels;
    for (size_t i = 0; i < cp->nchannels; i++)
        if (strcmp(cp->channels[i].channel, CONVO_BODY_CHANNEL) == 0)
            k = i;
    delta d;
    int rc = decode(cp->body, cp->body_len, &d) ? CONVO_ECORRUPT : 0;
    const cp_channel *base = k < cp->nchannels ? &cp->channels[k] : NULL;
    unsigned char *body = NULL;
    size_t len = 0;
    char *type = NULL;
    if (rc == 0 && (!base || !base->type))
        rc = CONVO_ECORRUPT;
    if (rc == 0 && d.layout == JSON_LAYOUT) {
        convo_jdelta_names nm;
        const char **versions = NULL;
        rc = names_of_read(cp, &nm, &versions) ? CONVO_ENOMEM
             : convo__jdelta_decode(base->bytes, base->len, d.code, &nm, (char **)&body, &len);
        free(versions);
    }
    else if (rc == 0 && (len = (size_t)d.length, 1))
        rc = apply(base->bytes, base->len, d.ops, d.ops_len, len, &body);
    if (rc == 0 && !(type = d.layout == JSON_LAYOUT ? strdup(base->type)
                                                    : strndup(d.type, d.type_len)))
        rc = CONVO_ENOMEM;
    msgpack_unpacked_destroy(&d.up);
    if (rc != 0) {
        free(body);
        if (rc == CONVO_ENOMEM)
            return convo__error(err, rc, NULL, "out of memory");
        convo__error(err, CONVO_ECORRUPT, NULL,
                     "checkpoint %s: its body (a delta) or its base is missing or malformed",
                     cp->id);
        convo__error_name_thread(err, cp->thread_id);
        return CONVO_ECORRUPT;
    }
    free(cp->body);
    free(cp->body_type);
    cp->body = body;
    cp->body_type = type;
    cp->body_len = len;
    /* the base is the library's, not a channel of the snapshot */
    cp_channel gone = cp->channels[k];
    memmove(&cp->channels[k], &cp->channels[k + 1],
            (cp->nchannels - k - 1) * sizeof *cp->channels);
    cp->nchannels--;
    free(gone.channel);
    free(gone.version);
    free(gone.type);
    free(gone.bytes);
    convo__items_free(gone.items);
    return 0;
}
