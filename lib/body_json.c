/* body_json.c — a JSON body (or a msgpack map, as LangGraph Python writes its
 * bodies) coded as what it changes in its base's tree
 * (docs/checkpoints.md "Checkpoint bodies as deltas", version 2): unchanged
 * subtrees are one byte, the checkpoint's own id and ISO times against the
 * base's are a few, the rest is msgpack. Exact: a body is coded only when
 * decoding the code gives back its very bytes (checked on every put). */
#include "internal.h"
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* ext types inside the code */
enum {
    X_NULL = 1,
    X_ID = 2,
    X_TIME = 3,
    X_PREFIX = 4,
    X_REPLACE = 5,
    X_VERSION = 6,
    X_SEQ = 7,
    X_VERSIONS = 8
};
#define VERSIONS_MAX 64 /* values of one ext 8 */
#define MIN_PREFIX 4
#define MAX_DEPTH 64

static int same(json_t *a, json_t *b)
{
    if (json_typeof(a) != json_typeof(b))
        return 0;
    switch (json_typeof(a)) {
    case JSON_OBJECT: {
        if (json_object_size(a) != json_object_size(b))
            return 0;
        void *i = json_object_iter(a), *j = json_object_iter(b);
        for (; i && j; i = json_object_iter_next(a, i), j = json_object_iter_next(b, j)) {
            size_t n = json_object_iter_key_len(i);
            if (n != json_object_iter_key_len(j) ||
                memcmp(json_object_iter_key(i), json_object_iter_key(j), n) != 0 ||
                !same(json_object_iter_value(i), json_object_iter_value(j)))
                return 0;
        }
        return 1;
    }
    case JSON_ARRAY:
        if (json_array_size(a) != json_array_size(b))
            return 0;
        for (size_t k = 0; k < json_array_size(a); k++)
            if (!same(json_array_get(a, k), json_array_get(b, k)))
                return 0;
        return 1;
    case JSON_STRING:
        return json_string_length(a) == json_string_length(b) &&
               memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) == 0;
    case JSON_INTEGER:
        return json_integer_value(a) == json_integer_value(b);
    case JSON_REAL:
        return memcmp(&(double){json_real_value(a)}, &(double){json_real_value(b)},
                      sizeof(double)) == 0;
    default:
        return 1;
    }
}

/* ---- ISO-8601 times: YYYY-MM-DDTHH:MM:SS[.fraction]suffix ---- */

typedef struct iso {
    int digits;         /* of the fraction */
    const char *suffix; /* "Z", "+00:00", ... (not owned) */
    size_t suffix_len;
    int64_t units;      /* since 0000-03-01 in 10^-digits s */
} iso;

static int64_t days_from_civil(int64_t y, int64_t m, int64_t d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400, yoe = y - era * 400;
    int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    return era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + doy;
}

static void civil_from_days(int64_t z, int64_t *y, int64_t *m, int64_t *d)
{
    int64_t era = (z >= 0 ? z : z - 146096) / 146097, doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp + (mp < 10 ? 3 : -9);
    *y = yoe + era * 400 + (*m <= 2);
}

static int digits_at(const char *s, size_t n, size_t at, size_t count, int64_t *out)
{
    int64_t v = 0;
    if (at + count > n)
        return -1;
    for (size_t i = at; i < at + count; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    *out = v;
    return 0;
}

static int iso_parse(const char *s, size_t n, iso *t)
{
    int64_t y, mo, d, h, mi, sec, frac = 0;
    if (n < 19 || s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' ||
        digits_at(s, n, 0, 4, &y) || digits_at(s, n, 5, 2, &mo) || digits_at(s, n, 8, 2, &d) ||
        digits_at(s, n, 11, 2, &h) || digits_at(s, n, 14, 2, &mi) || digits_at(s, n, 17, 2, &sec))
        return -1;
    size_t at = 19;
    t->digits = 0;
    if (at < n && s[at] == '.') {
        while (at + 1 + (size_t)t->digits < n && s[at + 1 + t->digits] >= '0' &&
               s[at + 1 + t->digits] <= '9' && t->digits < 9)
            t->digits++;
        if (t->digits == 0 || digits_at(s, n, at + 1, (size_t)t->digits, &frac))
            return -1;
        at += 1 + (size_t)t->digits;
    }
    if (n - at > 8)
        return -1;
    t->suffix = s + at;
    t->suffix_len = n - at;
    int64_t scale = 1;
    for (int i = 0; i < t->digits; i++)
        scale *= 10;
    int64_t secs = days_from_civil(y, mo, d) * 86400 + h * 3600 + mi * 60 + sec;
    if (secs > (INT64_MAX - frac) / scale || secs < INT64_MIN / scale)
        return -1; /* nanoseconds after 2262: no time in 64 bits, kept as a string */
    t->units = secs * scale + frac;
    return 0;
}

/* 0 when a + b fits in 64 bits (*sum set), else -1 */
static int add_units(int64_t a, int64_t b, int64_t *sum)
{
    if ((b > 0 && a > INT64_MAX - b) || (b < 0 && a < INT64_MIN - b))
        return -1;
    *sum = a + b;
    return 0;
}

/* The text of units in shape, in out (at least 40 bytes); its length. */
static size_t iso_format(const iso *shape, int64_t units, char *out)
{
    int64_t scale = 1;
    for (int i = 0; i < shape->digits; i++)
        scale *= 10;
    int64_t frac = units % scale, secs = units / scale;
    if (frac < 0)
        frac += scale, secs--;
    int64_t days = secs / 86400, rem = secs % 86400;
    if (rem < 0)
        rem += 86400, days--;
    int64_t y, m, d;
    civil_from_days(days, &y, &m, &d);
    if (y < 0 || y > 9999)
        return 0;
    int n = snprintf(out, 32, "%04lld-%02lld-%02lldT%02lld:%02lld:%02lld", (long long)y,
                     (long long)m, (long long)d, (long long)(rem / 3600),
                     (long long)(rem / 60 % 60), (long long)(rem % 60));
    if (shape->digits)
        n += snprintf(out + n, 12, ".%0*lld", shape->digits, (long long)frac);
    memcpy(out + n, shape->suffix, shape->suffix_len);
    return (size_t)n + shape->suffix_len;
}

/* ---- varints in ext payloads ---- */

static size_t varint_put(unsigned char *p, uint64_t v)
{
    size_t n = 0;
    do {
        p[n] = v & 0x7f;
        v >>= 7;
        if (v)
            p[n] |= 0x80;
        n++;
    } while (v);
    return n;
}

static int varint_get(const unsigned char *p, size_t len, size_t *at, uint64_t *out)
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

/* ---- counters with a random tail (JS LangGraph's channel versions) ---- */

/* "0000000000002992.jfhgkzdobc": a zero-padded decimal counter of `width`
 * digits (at most 18 significant), a dot, and a tail of 1..12 characters of
 * [0-9a-z] (a base-36 number; only the counter part is read when tail is
 * NULL). 0 when s has that shape. */
#define SEQ_TAIL_MAX 12
static int seq_parse(const char *s, size_t n, size_t *width, uint64_t *counter,
                     uint64_t *tail, size_t *tail_len)
{
    size_t w = 0, zeros = 0;
    while (w < n && s[w] >= '0' && s[w] <= '9')
        w++;
    while (zeros + 1 < w && s[zeros] == '0')
        zeros++;
    if (w == 0 || w - zeros > 18 || w >= n || s[w] != '.')
        return -1;
    *width = w;
    *counter = 0;
    for (size_t i = zeros; i < w; i++)
        *counter = *counter * 10 + (uint64_t)(s[i] - '0');
    if (!tail)
        return 0;
    size_t len = n - w - 1;
    if (len == 0 || len > SEQ_TAIL_MAX)
        return -1;
    *tail = 0;
    for (size_t i = w + 1; i < n; i++) {
        int d = s[i] >= '0' && s[i] <= '9'   ? s[i] - '0'
                : s[i] >= 'a' && s[i] <= 'z' ? s[i] - 'a' + 10
                                             : -1;
        if (d < 0)
            return -1;
        *tail = *tail * 36 + (uint64_t)d;
    }
    *tail_len = len;
    return 0;
}

/* Bytes that hold any base-36 number of len digits. */
static size_t seq_tail_bytes(size_t len)
{
    uint64_t max = 1;
    size_t k = 0;
    for (size_t i = 0; i < len; i++)
        max *= 36;
    for (max -= 1; max; max >>= 8)
        k++;
    return k ? k : 1;
}

/* ---- encoding ---- */

typedef struct coder {
    msgpack_packer *pk;
    const char *id;
    size_t id_len;
    const char *const *versions; /* the checkpoint's channel versions */
    size_t nversions;
    int new_keys; /* the body has keys where its base has none */
} coder;

static int pack_ext(msgpack_packer *pk, int8_t type, const void *p, size_t n)
{
    return msgpack_pack_ext_with_body(pk, n ? p : "", n ? n : 1, type);
}

static int enc(coder *c, json_t *t, json_t *b, int depth);

static int enc_string(coder *c, json_t *t, json_t *b)
{
    const char *s = json_string_value(t);
    size_t n = json_string_length(t);
    if (n == c->id_len && memcmp(s, c->id, n) == 0)
        return pack_ext(c->pk, X_ID, NULL, 0);
    unsigned char p[16];
    for (size_t i = 0; i < c->nversions; i++)
        if (strlen(c->versions[i]) == n && memcmp(c->versions[i], s, n) == 0)
            return pack_ext(c->pk, X_VERSION, p, varint_put(p, i));
    if (b && json_is_string(b)) {
        const char *bs = json_string_value(b);
        size_t bn = json_string_length(b);
        iso tb, tt;
        char text[48];
        int64_t dv;
        if (iso_parse(bs, bn, &tb) == 0 && iso_parse(s, n, &tt) == 0 &&
            tt.digits == tb.digits && tt.suffix_len == tb.suffix_len &&
            memcmp(tt.suffix, tb.suffix, tt.suffix_len) == 0 &&
            iso_format(&tb, tt.units, text) == n && memcmp(text, s, n) == 0 &&
            tb.units != INT64_MIN && add_units(tt.units, -tb.units, &dv) == 0) {
            uint64_t z = ((uint64_t)dv << 1) ^ (uint64_t)(dv >> 63);
            return pack_ext(c->pk, X_TIME, p, varint_put(p, z));
        }
        size_t w, bw, len;
        uint64_t num, bnum, tail;
        if (seq_parse(s, n, &w, &num, &tail, &len) == 0 &&
            seq_parse(bs, bn, &bw, &bnum, NULL, NULL) == 0 && w == bw) {
            /* the counter as a difference to the base's, the tail in base 36 */
            unsigned char q[32];
            int64_t dv = (int64_t)(num - bnum);
            size_t at = varint_put(q, ((uint64_t)dv << 1) ^ (uint64_t)(dv >> 63));
            q[at++] = (unsigned char)len;
            for (size_t i = 0, k = seq_tail_bytes(len); i < k; i++, tail >>= 8)
                q[at++] = (unsigned char)(tail & 0xff);
            return pack_ext(c->pk, X_SEQ, q, at);
        }
        size_t k = 0;
        while (k < n && k < bn && s[k] == bs[k])
            k++;
        if (k >= MIN_PREFIX) {
            size_t h = varint_put(p, k);
            return msgpack_pack_ext(c->pk, h + n - k, X_PREFIX) ||
                   msgpack_pack_ext_body(c->pk, p, h) ||
                   msgpack_pack_ext_body(c->pk, s + k, n - k);
        }
    }
    return msgpack_pack_str_with_body(c->pk, s, n);
}

/* The index of the checkpoint's version s (n bytes), or -1. */
static long version_index(const coder *c, const char *s, size_t n)
{
    for (size_t i = 0; i < c->nversions; i++)
        if (strlen(c->versions[i]) == n && memcmp(c->versions[i], s, n) == 0)
            return (long)i;
    return -1;
}

/* t against b, same keys in the same order, changed up to position last:
 * ext 8 when every one of those values is unchanged or one of the
 * checkpoint's versions (channel_versions, a node's versions_seen); 1 when
 * not, so the caller codes it as an array. */
static int enc_versions(coder *c, json_t *t, json_t *b, size_t last)
{
    unsigned char p[VERSIONS_MAX * 2];
    size_t at = 0, k = 0;
    if (last > VERSIONS_MAX || c->nversions >= 16383)
        return 1;
    for (void *i = json_object_iter(t), *j = json_object_iter(b); k < last;
         i = json_object_iter_next(t, i), j = json_object_iter_next(b, j), k++) {
        json_t *v = json_object_iter_value(i);
        long x = 0;
        if (!same(v, json_object_iter_value(j))) {
            if (!json_is_string(v) ||
                (json_string_length(v) == c->id_len &&
                 memcmp(json_string_value(v), c->id, c->id_len) == 0) ||
                (x = version_index(c, json_string_value(v), json_string_length(v))) < 0)
                return 1;
            x++;
        }
        at += varint_put(p + at, (uint64_t)x);
    }
    return pack_ext(c->pk, X_VERSIONS, p, at) ? -1 : 0;
}

static int enc_object(coder *c, json_t *t, json_t *b, int depth)
{
    int positional = b && json_object_size(t) == json_object_size(b);
    size_t last = 0, k = 0;
    for (void *i = json_object_iter(t), *j = b ? json_object_iter(b) : NULL; positional && i;
         i = json_object_iter_next(t, i), j = json_object_iter_next(b, j), k++) {
        size_t n = json_object_iter_key_len(i);
        if (n != json_object_iter_key_len(j) ||
            memcmp(json_object_iter_key(i), json_object_iter_key(j), n) != 0)
            positional = 0;
        else if (!same(json_object_iter_value(i), json_object_iter_value(j)))
            last = k + 1;
    }
    if (positional && last && enc_versions(c, t, b, last) == 0)
        return 0;
    if (positional) { /* the base's keys in its order: the values, trailing ones unchanged left out */
        int rc = msgpack_pack_array(c->pk, last);
        void *i = json_object_iter(t), *j = json_object_iter(b);
        for (k = 0; rc == 0 && k < last;
             k++, i = json_object_iter_next(t, i), j = json_object_iter_next(b, j))
            rc = enc(c, json_object_iter_value(i), json_object_iter_value(j), depth + 1);
        return rc;
    }
    int rc = msgpack_pack_map(c->pk, json_object_size(t));
    for (void *i = json_object_iter(t); rc == 0 && i; i = json_object_iter_next(t, i)) {
        const char *key = json_object_iter_key(i);
        size_t n = json_object_iter_key_len(i);
        json_t *bv = NULL;
        size_t at = 0;
        for (void *j = b ? json_object_iter(b) : NULL; j; j = json_object_iter_next(b, j), at++)
            if (json_object_iter_key_len(j) == n && memcmp(json_object_iter_key(j), key, n) == 0) {
                bv = json_object_iter_value(j);
                break;
            }
        c->new_keys |= !bv;
        rc = bv ? msgpack_pack_uint64(c->pk, at) : msgpack_pack_str_with_body(c->pk, key, n);
        if (rc == 0)
            rc = enc(c, json_object_iter_value(i), bv, depth + 1);
    }
    return rc;
}

/* An array in place of an object of the base: coded alone, in an ext. */
static int enc_replace(coder *c, json_t *t, int depth)
{
    msgpack_sbuffer sb;
    msgpack_sbuffer_init(&sb);
    msgpack_packer pk;
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
    coder inner = {&pk, c->id, c->id_len, c->versions, c->nversions, 0};
    int rc = enc(&inner, t, NULL, depth + 1);
    if (rc == 0)
        rc = pack_ext(c->pk, X_REPLACE, sb.data, sb.size);
    msgpack_sbuffer_destroy(&sb);
    return rc;
}

static int enc(coder *c, json_t *t, json_t *b, int depth)
{
    if (depth > MAX_DEPTH)
        return -1;
    if (b && same(t, b))
        return msgpack_pack_nil(c->pk);
    switch (json_typeof(t)) {
    case JSON_OBJECT:
        return enc_object(c, t, b && json_is_object(b) ? b : NULL, depth);
    case JSON_ARRAY: {
        if (b && json_is_object(b))
            return enc_replace(c, t, depth);
        json_t *ba = b && json_is_array(b) ? b : NULL;
        int rc = msgpack_pack_array(c->pk, json_array_size(t));
        for (size_t k = 0; rc == 0 && k < json_array_size(t); k++)
            rc = enc(c, json_array_get(t, k),
                     ba && k < json_array_size(ba) ? json_array_get(ba, k) : NULL, depth + 1);
        return rc;
    }
    case JSON_STRING:
        return enc_string(c, t, b);
    case JSON_INTEGER:
        return msgpack_pack_int64(c->pk, json_integer_value(t));
    case JSON_REAL:
        return msgpack_pack_double(c->pk, json_real_value(t));
    case JSON_TRUE:
        return msgpack_pack_true(c->pk);
    case JSON_FALSE:
        return msgpack_pack_false(c->pk);
    default:
        return pack_ext(c->pk, X_NULL, NULL, 0);
    }
}

/* ---- decoding ---- */

static json_t *dec(const coder *c, const msgpack_object *o, json_t *b, int depth);

/* X_SEQ: counter difference zv (read up to p[at]), tail length, tail bytes,
 * against base string bs. */
static json_t *dec_seq(const unsigned char *p, size_t n, size_t at, uint64_t zv,
                       const char *bs, size_t bn)
{
    size_t width;
    uint64_t bnum, tail = 0;
    if (seq_parse(bs, bn, &width, &bnum, NULL, NULL) || at >= n)
        return NULL;
    size_t len = p[at++];
    if (len == 0 || len > SEQ_TAIL_MAX || n - at != seq_tail_bytes(len))
        return NULL;
    for (size_t i = n; i-- > at;)
        tail = tail << 8 | p[i];
    int64_t dv = (int64_t)(zv >> 1) ^ -(int64_t)(zv & 1);
    uint64_t num = bnum + (uint64_t)dv;
    char text[24 + SEQ_TAIL_MAX + 64];
    if (num > UINT64_C(999999999999999999) || width > 64)
        return NULL;
    char digits[24];
    size_t k = 0;
    do {
        digits[k++] = (char)('0' + num % 10);
        num /= 10;
    } while (num);
    if (k > width)
        return NULL;
    memset(text, '0', width - k);
    for (size_t i = 0; i < k; i++)
        text[width - 1 - i] = digits[i];
    text[width] = '.';
    for (size_t i = len; i-- > 0; tail /= 36)
        text[width + 1 + i] = "0123456789abcdefghijklmnopqrstuvwxyz"[tail % 36];
    return tail ? NULL : json_stringn(text, width + 1 + len);
}

static json_t *dec_string_ext(const coder *c, int8_t type, const unsigned char *p, size_t n,
                              json_t *b)
{
    size_t at = 0;
    uint64_t v;
    if (type == X_ID)
        return json_stringn(c->id, c->id_len);
    if (type == X_VERSION)
        return varint_get(p, n, &at, &v) == 0 && at == n && v < c->nversions
                   ? json_string(c->versions[v])
                   : NULL;
    if (!b || !json_is_string(b) || varint_get(p, n, &at, &v))
        return NULL;
    const char *bs = json_string_value(b);
    size_t bn = json_string_length(b);
    if (type == X_SEQ)
        return dec_seq(p, n, at, v, bs, bn);
    if (type == X_PREFIX) {
        if (v > bn)
            return NULL;
        char *s = malloc(v + (n - at) + 1);
        if (!s)
            return NULL;
        memcpy(s, bs, v);
        memcpy(s + v, p + at, n - at);
        json_t *r = json_stringn(s, v + (n - at));
        free(s);
        return r;
    }
    iso tb;
    char text[48];
    if (at != n || iso_parse(bs, bn, &tb))
        return NULL;
    int64_t dv = (int64_t)(v >> 1) ^ -(int64_t)(v & 1), units;
    size_t len = add_units(tb.units, dv, &units) ? 0 : iso_format(&tb, units, text);
    return len ? json_stringn(text, len) : NULL;
}

/* ext 8 against object b: per leading key of b, 0 (its value unchanged) or
 * 1 + the index of one of the checkpoint's versions. */
static json_t *dec_versions(const coder *c, const unsigned char *p, size_t n, json_t *b)
{
    if (!b || !json_is_object(b))
        return NULL;
    json_t *r = json_object();
    size_t at = 0;
    for (void *j = json_object_iter(b); r && j; j = json_object_iter_next(b, j)) {
        uint64_t x = 0;
        if (at < n && (varint_get(p, n, &at, &x) || x > c->nversions))
            x = UINT64_MAX;
        json_t *v = x == UINT64_MAX ? NULL
                    : x ? json_string(c->versions[x - 1])
                        : json_incref(json_object_iter_value(j));
        if (!v || json_object_setn_new_nocheck(r, json_object_iter_key(j),
                                               json_object_iter_key_len(j), v)) {
            json_decref(r);
            r = NULL;
        }
    }
    if (r && at < n) { /* more positions than b has keys */
        json_decref(r);
        r = NULL;
    }
    return r;
}

static json_t *dec_ext(const coder *c, const msgpack_object *o, json_t *b, int depth)
{
    const unsigned char *p = (const unsigned char *)o->via.ext.ptr;
    size_t n = o->via.ext.size;
    switch (o->via.ext.type) {
    case X_NULL:
        return json_null();
    case X_ID:
    case X_VERSION:
    case X_TIME:
    case X_PREFIX:
    case X_SEQ:
        return dec_string_ext(c, o->via.ext.type, p, n, b);
    case X_VERSIONS:
        return dec_versions(c, p, n, b);
    case X_REPLACE: {
        msgpack_unpacked up;
        msgpack_unpacked_init(&up);
        size_t off = 0;
        json_t *r = NULL;
        if (msgpack_unpack_next(&up, (const char *)p, n, &off) == MSGPACK_UNPACK_SUCCESS &&
            off == n)
            r = dec(c, &up.data, NULL, depth + 1);
        msgpack_unpacked_destroy(&up);
        return r;
    }
    default:
        return NULL;
    }
}

static json_t *dec_array(const coder *c, const msgpack_object *o, json_t *b, int depth)
{
    const msgpack_object_array *a = &o->via.array;
    if (b && json_is_object(b)) { /* the base's values in its order */
        if (a->size > json_object_size(b))
            return NULL;
        json_t *r = json_object();
        size_t k = 0;
        for (void *j = json_object_iter(b); r && j; j = json_object_iter_next(b, j), k++) {
            json_t *bv = json_object_iter_value(j);
            json_t *v = k < a->size ? dec(c, &a->ptr[k], bv, depth + 1) : json_incref(bv);
            if (!v || json_object_setn_new_nocheck(r, json_object_iter_key(j),
                                                   json_object_iter_key_len(j), v)) {
                json_decref(r);
                r = NULL;
            }
        }
        return r;
    }
    json_t *ba = b && json_is_array(b) ? b : NULL;
    json_t *r = json_array();
    for (size_t k = 0; r && k < a->size; k++) {
        json_t *v = dec(c, &a->ptr[k], ba ? json_array_get(ba, k) : NULL, depth + 1);
        if (!v || json_array_append_new(r, v)) {
            json_decref(r);
            r = NULL;
        }
    }
    return r;
}

static json_t *dec_map(const coder *c, const msgpack_object *o, json_t *b, int depth)
{
    json_t *bo = b && json_is_object(b) ? b : NULL;
    json_t *r = json_object();
    for (size_t k = 0; r && k < o->via.map.size; k++) {
        const msgpack_object_kv *kv = &o->via.map.ptr[k];
        const char *key = NULL;
        size_t n = 0;
        json_t *bv = NULL;
        if (kv->key.type == MSGPACK_OBJECT_STR) {
            key = kv->key.via.str.size ? kv->key.via.str.ptr : "";
            n = kv->key.via.str.size;
        } else if (bo && kv->key.type == MSGPACK_OBJECT_POSITIVE_INTEGER) {
            void *j = json_object_iter(bo);
            for (uint64_t at = 0; j && at < kv->key.via.u64; at++)
                j = json_object_iter_next(bo, j);
            if (j) {
                key = json_object_iter_key(j);
                n = json_object_iter_key_len(j);
                bv = json_object_iter_value(j);
            }
        }
        json_t *v = key ? dec(c, &kv->val, bv, depth + 1) : NULL;
        if (!v || json_object_getn(r, key, n)) {
            json_decref(v);
            json_decref(r);
            r = NULL;
        } else if (json_object_setn_new(r, key, n, v)) { /* a key not UTF-8: v released */
            json_decref(r);
            r = NULL;
        }
    }
    return r;
}

static json_t *dec(const coder *c, const msgpack_object *o, json_t *b, int depth)
{
    if (depth > MAX_DEPTH)
        return NULL;
    switch (o->type) {
    case MSGPACK_OBJECT_NIL:
        return b ? json_incref(b) : NULL;
    case MSGPACK_OBJECT_BOOLEAN:
        return json_boolean(o->via.boolean);
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        return o->via.u64 <= INT64_MAX ? json_integer((json_int_t)o->via.u64) : NULL;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        return json_integer(o->via.i64);
    case MSGPACK_OBJECT_FLOAT32:
    case MSGPACK_OBJECT_FLOAT64:
        return json_real(o->via.f64);
    case MSGPACK_OBJECT_STR:
        return json_stringn(o->via.str.ptr, o->via.str.size);
    case MSGPACK_OBJECT_ARRAY:
        return dec_array(c, o, b, depth);
    case MSGPACK_OBJECT_MAP:
        return dec_map(c, o, b, depth);
    case MSGPACK_OBJECT_EXT:
        return dec_ext(c, o, b, depth);
    default:
        return NULL;
    }
}

/* ---- msgpack bodies (LangGraph Python's serializer) as the same trees ---- */

static json_t *from_msgpack(const msgpack_object *o, int depth)
{
    if (depth > MAX_DEPTH)
        return NULL;
    switch (o->type) {
    case MSGPACK_OBJECT_NIL:
        return json_null();
    case MSGPACK_OBJECT_BOOLEAN:
        return json_boolean(o->via.boolean);
    case MSGPACK_OBJECT_POSITIVE_INTEGER:
        return o->via.u64 <= INT64_MAX ? json_integer((json_int_t)o->via.u64) : NULL;
    case MSGPACK_OBJECT_NEGATIVE_INTEGER:
        return json_integer(o->via.i64);
    case MSGPACK_OBJECT_FLOAT64:
        return json_real(o->via.f64);
    case MSGPACK_OBJECT_STR:
        return json_stringn(o->via.str.size ? o->via.str.ptr : "", o->via.str.size);
    case MSGPACK_OBJECT_ARRAY: {
        json_t *a = json_array();
        for (uint32_t i = 0; a && i < o->via.array.size; i++) {
            json_t *v = from_msgpack(&o->via.array.ptr[i], depth + 1);
            if (!v || json_array_append_new(a, v)) {
                json_decref(a);
                a = NULL;
            }
        }
        return a;
    }
    case MSGPACK_OBJECT_MAP: {
        json_t *m = json_object();
        for (uint32_t i = 0; m && i < o->via.map.size; i++) {
            const msgpack_object *k = &o->via.map.ptr[i].key;
            const char *key = k->type == MSGPACK_OBJECT_STR && k->via.str.size ? k->via.str.ptr : "";
            json_t *v = k->type == MSGPACK_OBJECT_STR && !json_object_getn(m, key, k->via.str.size)
                            ? from_msgpack(&o->via.map.ptr[i].val, depth + 1)
                            : NULL;
            if (!v || json_object_setn_new(m, key, k->via.str.size, v)) {
                json_decref(m);
                m = NULL;
            }
        }
        return m;
    }
    default: /* bin, ext, float32: not kept exactly by a tree */
        return NULL;
    }
}

static int to_msgpack(msgpack_packer *pk, json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        int rc = msgpack_pack_map(pk, json_object_size(v));
        const char *k;
        size_t n;
        json_t *x;
        json_object_keylen_foreach(v, k, n, x)
        {
            if (rc == 0)
                rc = msgpack_pack_str_with_body(pk, k, n) || to_msgpack(pk, x);
        }
        return rc;
    }
    case JSON_ARRAY: {
        int rc = msgpack_pack_array(pk, json_array_size(v));
        for (size_t i = 0; rc == 0 && i < json_array_size(v); i++)
            rc = to_msgpack(pk, json_array_get(v, i));
        return rc;
    }
    case JSON_STRING:
        return msgpack_pack_str_with_body(pk, json_string_value(v), json_string_length(v));
    case JSON_INTEGER:
        return msgpack_pack_int64(pk, json_integer_value(v));
    case JSON_REAL:
        return msgpack_pack_double(pk, json_real_value(v));
    case JSON_TRUE:
        return msgpack_pack_true(pk);
    case JSON_FALSE:
        return msgpack_pack_false(pk);
    default:
        return msgpack_pack_nil(pk);
    }
}

static int is_msgpack_map(const void *p, size_t len)
{
    unsigned char c = len ? *(const unsigned char *)p : 0;
    return (c & 0xf0) == 0x80 || c == 0xde || c == 0xdf;
}

/* The tree of a body or base: JSON text, or a msgpack map (msgpack set). */
static json_t *load(const void *p, size_t len, int msgpack)
{
    if (!msgpack)
        return json_loadb(p, len, JSON_REJECT_DUPLICATES, NULL);
    msgpack_unpacked up;
    msgpack_unpacked_init(&up);
    size_t off = 0;
    json_t *v = NULL;
    if (msgpack_unpack_next(&up, p, len, &off) == MSGPACK_UNPACK_SUCCESS && off == len)
        v = from_msgpack(&up.data, 0);
    msgpack_unpacked_destroy(&up);
    return v;
}

/* ---- the two ends ---- */

/* jansson's output flags for a style: compact or ", "/": ", ASCII only or not */
static size_t dump_flags(int64_t style)
{
    return (style & CONVO_JSTYLE_SPACED ? 0 : JSON_COMPACT) |
           (style & CONVO_JSTYLE_ASCII ? JSON_ENSURE_ASCII : 0) | JSON_ENCODE_ANY;
}

static char *dump(json_t *v, int64_t style, size_t *len)
{
    if (style == CONVO_JSTYLE_MSGPACK) {
        msgpack_sbuffer sb;
        msgpack_sbuffer_init(&sb);
        msgpack_packer pk;
        msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
        if (to_msgpack(&pk, v) || !sb.data) {
            msgpack_sbuffer_destroy(&sb);
            return NULL;
        }
        *len = sb.size;
        return sb.data;
    }
    size_t n = json_dumpb(v, NULL, 0, dump_flags(style));
    char *s = n ? malloc(n) : NULL;
    if (s && json_dumpb(v, s, n, dump_flags(style)) != n) {
        free(s);
        s = NULL;
    }
    *len = n;
    return s;
}

int convo__jdelta_encode(const void *base, size_t blen, const void *body, size_t len,
                         const convo_jdelta_names *names, msgpack_packer *pk)
{
    int msgpack = is_msgpack_map(body, len);
    json_t *b = load(base, blen, msgpack);
    json_t *t = b ? load(body, len, msgpack) : NULL;
    int rc = 1;
    for (int64_t style = msgpack ? CONVO_JSTYLE_MSGPACK : 0;
         t && rc == 1 && style <= (msgpack ? CONVO_JSTYLE_MSGPACK : CONVO_JSTYLE_ALL); style++) {
        size_t n;
        char *again = dump(t, style, &n);
        if (!again)
            continue;
        if (n == len && memcmp(again, body, len) == 0)
            rc = 0;
        free(again);
        if (rc == 0) {
            coder c = {pk, names->id, strlen(names->id), names->versions, names->nversions, 0};
            rc = msgpack_pack_array(pk, 2) || msgpack_pack_int64(pk, style) ? -1
                 : enc(&c, t, b, 0)                                         ? 1 /* too deep */
                 : c.new_keys                                               ? 2
                                                                            : 0;
        }
    }
    json_decref(t);
    json_decref(b);
    return rc;
}

int convo__jdelta_decode(const void *base, size_t blen, const msgpack_object *code,
                         const convo_jdelta_names *names, char **out, size_t *len)
{
    int64_t style;
    if (code->type != MSGPACK_OBJECT_ARRAY || code->via.array.size != 2 ||
        convo__unpack_int(&code->via.array.ptr[0], &style) || style < 0 ||
        style > CONVO_JSTYLE_MSGPACK)
        return CONVO_ECORRUPT;
    json_t *b = load(base, blen, style == CONVO_JSTYLE_MSGPACK);
    coder c = {NULL, names->id ? names->id : "", names->id ? strlen(names->id) : 0,
               names->versions, names->nversions, 0};
    json_t *t = b ? dec(&c, &code->via.array.ptr[1], b, 0) : NULL;
    *out = t ? dump(t, style, len) : NULL;
    json_decref(t);
    json_decref(b);
    return *out ? 0 : CONVO_ECORRUPT;
}
