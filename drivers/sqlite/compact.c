/* compact.c — layout 7's compact forms (docs/sqlite.md, "Layout 7: checkpoints
 * stored densely"): a canonical UUID id as 16 bytes, a channel version in a
 * tagged form that keeps its text exactly, a checkpoint's channel list as one
 * value, and the SQL functions and table-valued function over them that the
 * statements and the 6 -> 7 migration use.
 *
 * A stored version is a tag byte and its data:
 *   0x00 text    the version's bytes as they are;
 *   0x01 number  a varint: a decimal number written without leading zeros
 *                ("0".."999999999999999999");
 *   0x02 uuid    16 bytes: a canonical UUID;
 *   0x03 padded  a width byte w, a varint n, then text: n written in w digits
 *                with leading zeros, then the text, which does not start with
 *                a digit (Python LangGraph's "000...0005.0.8372618274892734").
 * The first form that fits is taken, so equal texts have equal stored forms.
 * A channel list is, per channel in the order of the numbers of their names
 * (convo_names), varint name number, varint length + stored version, where
 * the version may also be
 *   0x04 same    a varint k: the version of entry k (from 0) of this list,
 *                which is not itself a 0x04 or 0x05 (a step writes several
 *                channels at one version);
 *   0x05 gone    (layout 9, in a delta only) the channel is not in the list.
 * Layout 9: a list may also be a delta, a 0x00 byte and then entries in this
 * form, against the list of the row before it (lists.c): the channels whose
 * version changed or that came, and those gone. A full list never starts with
 * 0x00 (name numbers start at 1).
 * Layout 11: an entry may hold its version's value: varint name number, a
 * 0x00 byte (a length no version has), varint length + stored version, varint
 * type number (convo_names, at least 1), varint length + the value's bytes. */
#include "config.h"
#include "compact.h"
#include "body.h" /* lib/: the metadata's shape and values */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

enum { V_TEXT = 0, V_NUMBER = 1, V_UUID = 2, V_PADDED = 3, V_SAME = 4, V_GONE = 5 };
#define MAX_DIGITS 18 /* below 10^18: fits an int64 */

static int hex_value(int ch)
{
    if (ch >= '0' && ch <= '9')
        return ch - '0';
    if (ch >= 'a' && ch <= 'f')
        return ch - 'a' + 10;
    return -1;
}

int sq_uuid_pack(const char *s, size_t len, unsigned char out[SQ_UUID_BYTES])
{
    if (!s || len != SQ_UUID_TEXT)
        return 0;
    size_t o = 0;
    for (size_t i = 0; i < SQ_UUID_TEXT; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-')
                return 0;
            continue;
        }
        int hi = hex_value((unsigned char)s[i]), lo = hex_value((unsigned char)s[i + 1]);
        if (hi < 0 || lo < 0)
            return 0;
        out[o++] = (unsigned char)(hi << 4 | lo);
        i++;
    }
    return 1;
}

void sq_uuid_unpack(const unsigned char in[SQ_UUID_BYTES], char out[SQ_UUID_TEXT + 1])
{
    static const char digits[] = "0123456789abcdef";
    size_t o = 0;
    for (size_t i = 0; i < SQ_UUID_BYTES; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[o++] = '-';
        out[o++] = digits[in[i] >> 4];
        out[o++] = digits[in[i] & 15];
    }
    out[o] = '\0';
}

void sq_bind_id(sqlite3_stmt *st, int i, const char *id)
{
    unsigned char u[SQ_UUID_BYTES];
    if (!id)
        sqlite3_bind_null(st, i);
    else if (sq_uuid_pack(id, strlen(id), u))
        sqlite3_bind_blob(st, i, u, SQ_UUID_BYTES, SQLITE_TRANSIENT);
    else
        sqlite3_bind_text(st, i, id, -1, SQLITE_STATIC);
}

const char *sq_column_id(sqlite3_stmt *st, int i, char buf[SQ_UUID_TEXT + 1])
{
    int type = sqlite3_column_type(st, i);
    if (type == SQLITE_NULL)
        return NULL;
    if (type == SQLITE_BLOB && sqlite3_column_bytes(st, i) == SQ_UUID_BYTES) {
        sq_uuid_unpack(sqlite3_column_blob(st, i), buf);
        return buf;
    }
    return (const char *)sqlite3_column_text(st, i);
}

size_t sq_varint_put(unsigned char *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (unsigned char)v;
    return n;
}

/* Bytes read (0: malformed) with the value in *v. */
size_t sq_varint_get(const unsigned char *p, size_t n, uint64_t *v)
{
    *v = 0;
    for (size_t i = 0; i < n && i < 10; i++) {
        *v |= (uint64_t)(p[i] & 0x7f) << (7 * i);
        if (!(p[i] & 0x80))
            return i + 1;
    }
    return 0;
}

/* The value of digits s[0..n), n <= MAX_DIGITS. */
static uint64_t digits_value(const char *s, size_t n)
{
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++)
        v = v * 10 + (uint64_t)(s[i] - '0');
    return v;
}

size_t sq_version_pack(const char *v, size_t len, unsigned char *out)
{
    if (sq_uuid_pack(v, len, out + 1)) {
        out[0] = V_UUID;
        return 1 + SQ_UUID_BYTES;
    }
    size_t run = 0;
    while (run < len && v[run] >= '0' && v[run] <= '9')
        run++;
    size_t zeros = 0;
    while (zeros + 1 < run && v[zeros] == '0')
        zeros++;
    if (run == len && run > 0 && zeros == 0 && run <= MAX_DIGITS) {
        out[0] = V_NUMBER;
        return 1 + sq_varint_put(out + 1, digits_value(v, run));
    }
    /* padded pays from two leading zeros on (tag, width, varint >= 3 bytes) */
    if (run >= 2 && run <= 255 && zeros >= 2 && run - zeros <= MAX_DIGITS) {
        out[0] = V_PADDED;
        out[1] = (unsigned char)run;
        size_t n = 2 + sq_varint_put(out + 2, digits_value(v + zeros, run - zeros));
        memcpy(out + n, v + run, len - run);
        return n + len - run;
    }
    out[0] = V_TEXT;
    memcpy(out + 1, v, len);
    return 1 + len;
}

/* n written in decimal into out (at least MAX_DIGITS + 1 bytes): its length. */
static size_t decimal(uint64_t n, char *out)
{
    char tmp[24];
    size_t k = 0;
    do {
        tmp[k++] = (char)('0' + n % 10);
        n /= 10;
    } while (n);
    for (size_t i = 0; i < k; i++)
        out[i] = tmp[k - 1 - i];
    return k;
}

long sq_version_unpack(const unsigned char *p, size_t n, char *out, size_t cap)
{
    char num[24];
    uint64_t v;
    size_t used, k, width;
    if (n == 0)
        return -1;
    switch (p[0]) {
    case V_TEXT:
        if (n - 1 >= cap)
            return -1;
        memcpy(out, p + 1, n - 1);
        out[n - 1] = '\0';
        return (long)(n - 1);
    case V_NUMBER:
        if (!(used = sq_varint_get(p + 1, n - 1, &v)) || used != n - 1 || cap < 20)
            return -1;
        k = decimal(v, out);
        out[k] = '\0';
        return (long)k;
    case V_UUID:
        if (n != 1 + SQ_UUID_BYTES || cap < SQ_UUID_TEXT + 1)
            return -1;
        sq_uuid_unpack(p + 1, out);
        return SQ_UUID_TEXT;
    case V_PADDED:
        if (n < 3 || !(used = sq_varint_get(p + 2, n - 2, &v)))
            return -1;
        width = p[1];
        k = decimal(v, num);
        if (k > width || width + (n - 2 - used) >= cap)
            return -1;
        memset(out, '0', width - k);
        memcpy(out + width - k, num, k);
        memcpy(out + width, p + 2 + used, n - 2 - used);
        out[width + n - 2 - used] = '\0';
        return (long)(width + n - 2 - used);
    default:
        return -1;
    }
}

typedef struct pair {
    int64_t channel;
    const char *version;
} pair;

static int by_channel(const void *a, const void *b)
{
    int64_t x = ((const pair *)a)->channel, y = ((const pair *)b)->channel;
    return x < y ? -1 : x > y;
}

int sq_channels_pack(const int64_t *channels, const char *const *versions, size_t n,
                     unsigned char **out, size_t *outlen)
{
    pair *ps = malloc((n ? n : 1) * sizeof *ps);
    size_t cap = 1;
    for (size_t i = 0; ps && i < n; i++) {
        ps[i] = (pair){channels[i], versions[i]};
        cap += 2 * 10 + strlen(versions[i]) + 16;
    }
    unsigned char *buf = ps ? malloc(cap) : NULL;
    if (!buf) {
        free(ps);
        return -1;
    }
    qsort(ps, n, sizeof *ps, by_channel);
    size_t len = 0;
    for (size_t i = 0; i < n; i++) {
        if ((i && ps[i - 1].channel == ps[i].channel) || ps[i].channel < 0) {
            free(ps);
            free(buf);
            return -2;
        }
        size_t vl = strlen(ps[i].version), same = 0;
        while (same < i && strcmp(ps[same].version, ps[i].version) != 0)
            same++;
        len += sq_varint_put(buf + len, (uint64_t)ps[i].channel);
        unsigned char *at = buf + len;
        size_t packed;
        if (same < i) {
            at[10] = V_SAME;
            packed = 1 + sq_varint_put(at + 11, same);
        } else {
            packed = sq_version_pack(ps[i].version, vl, at + 10);
        }
        len += sq_varint_put(at, packed);
        memmove(buf + len, at + 10, packed);
        len += packed;
    }
    free(ps);
    *out = buf;
    *outlen = len;
    return 0;
}

/* One entry of a channel list at p[0..n): 0 at its end, -1 malformed, else
 * the bytes it takes, with the name's number, the stored version and (layout
 * 11) the value it holds (type 0: none). */
static long channel_next(const unsigned char *p, size_t n, sq_entry *e)
{
    uint64_t l;
    size_t used, at;
    if (n == 0)
        return 0;
    if (!(used = sq_varint_get(p, n, &l)) || l > INT64_MAX)
        return -1;
    e->channel = (int64_t)l;
    e->type = 0;
    e->value = NULL;
    e->value_len = 0;
    at = used;
    int valued = at < n && p[at] == 0;
    at += (size_t)valued;
    if (!(used = sq_varint_get(p + at, n - at, &l)) || l > n - at - used || l == 0)
        return -1;
    e->version = p + at + used;
    e->len = (size_t)l;
    at += used + (size_t)l;
    if (!valued)
        return (long)at;
    if (!(used = sq_varint_get(p + at, n - at, &l)) || l == 0 || l > INT64_MAX)
        return -1;
    e->type = (int64_t)l;
    at += used;
    if (!(used = sq_varint_get(p + at, n - at, &l)) || l > n - at - used)
        return -1;
    e->value = p + at + used;
    e->value_len = (size_t)l;
    return (long)(at + used + (size_t)l);
}

int sq_list_entries(const unsigned char *p, size_t n, sq_entry **out, size_t *count)
{
    size_t at = n && p[0] == 0 ? 1 : 0, cap = 0, k = 0;
    sq_entry one;
    long used;
    for (size_t i = at; (used = channel_next(p + i, n - i, &one)) > 0; i += (size_t)used)
        cap++;
    if (used < 0)
        return -2;
    sq_entry *e = malloc((cap ? cap : 1) * sizeof *e);
    if (!e)
        return -1;
    for (; (used = channel_next(p + at, n - at, &e[k])) > 0; at += (size_t)used) {
        uint64_t same;
        const unsigned char *v = e[k].version;
        size_t vl = e[k].len;
        if (v[0] == V_GONE && vl == 1 && p[0] == 0 && !e[k].type)
            e[k].len = 0;
        else if (v[0] == V_SAME) {
            if (vl < 2 || sq_varint_get(v + 1, vl - 1, &same) != vl - 1 || same >= k ||
                !e[same].len ||
                e[same].version[0] == V_SAME)
                break;
            e[k].version = e[same].version;
            e[k].len = e[same].len;
        } else if (v[0] == V_GONE)
            break;
        if (k && e[k - 1].channel >= e[k].channel)
            break;
        k++;
    }
    if (k != cap) {
        free(e);
        return -2;
    }
    *out = e;
    *count = k;
    return 0;
}

static int same_version(const sq_entry *a, const sq_entry *b)
{
    return a->len == b->len && memcmp(a->version, b->version, a->len) == 0;
}

/* Merges two entry lists sorted by channel: mode 0 applies delta b to list a,
 * mode 1 gives the delta from list a to list b. 0, -1 out of memory, -2 (mode
 * 0) b says gone of a channel a does not have. */
static int entries_merge(const sq_entry *a, size_t na, const sq_entry *b, size_t nb, int mode,
                         sq_entry **out, size_t *n)
{
    sq_entry *e = malloc((na + nb ? na + nb : 1) * sizeof *e);
    size_t i = 0, j = 0, k = 0;
    if (!e)
        return -1;
    while (i < na || j < nb) {
        int side = i == na ? 1 : j == nb ? -1 : a[i].channel < b[j].channel ? -1
                                              : a[i].channel > b[j].channel;
        if (side < 0) { /* a only: kept, or gone from b */
            if (mode == 0)
                e[k++] = a[i];
            else
                e[k++] = (sq_entry){.channel = a[i].channel};
            i++;
            continue;
        }
        if (mode == 0 && side > 0 && b[j].len == 0) { /* gone, yet not in a */
            free(e);
            return -2;
        }
        /* mode 1: a changed version, or a value a does not hold (layout 11) */
        if (mode == 0 ? b[j].len != 0
                      : side > 0 || !same_version(&a[i], &b[j]) || (b[j].type && !a[i].type))
            e[k++] = b[j];
        i += side == 0;
        j++;
    }
    *out = e;
    *n = k;
    return 0;
}

int sq_list_apply(const sq_entry *base, size_t nbase, const sq_entry *delta, size_t ndelta,
                  sq_entry **out, size_t *n)
{
    return entries_merge(base, nbase, delta, ndelta, 0, out, n);
}

int sq_list_diff(const sq_entry *base, size_t nbase, const sq_entry *full, size_t nfull,
                 sq_entry **out, size_t *n)
{
    return entries_merge(base, nbase, full, nfull, 1, out, n);
}

void sq_list_fill(sq_entry *e, size_t n, const sq_entry *base, size_t nbase)
{
    size_t j = 0;
    for (size_t i = 0; i < n; i++) {
        while (j < nbase && base[j].channel < e[i].channel)
            j++;
        if (j < nbase && base[j].channel == e[i].channel && e[i].len && base[j].type &&
            same_version(&e[i], &base[j])) {
            e[i].type = base[j].type;
            e[i].value = base[j].value;
            e[i].value_len = base[j].value_len;
        }
    }
}

const sq_entry *sq_list_find(const sq_entry *e, size_t n, int64_t channel,
                             const unsigned char *v, size_t len)
{
    for (size_t i = 0; i < n; i++)
        if (e[i].channel == channel && e[i].len == len && memcmp(e[i].version, v, len) == 0)
            return &e[i];
    return NULL;
}

int sq_list_pack(const sq_entry *e, size_t n, int delta, unsigned char **out, size_t *outlen)
{
    size_t cap = 1;
    for (size_t i = 0; i < n; i++)
        cap += 40 + e[i].len + e[i].value_len;
    unsigned char *buf = malloc(cap), same_buf[11];
    size_t len = 0;
    if (!buf)
        return -1;
    if (delta)
        buf[len++] = 0;
    for (size_t i = 0; i < n; i++) {
        const unsigned char *v = e[i].version;
        size_t vl = e[i].len, same = 0;
        while (vl && same < i && !(e[same].len && same_version(&e[same], &e[i])))
            same++;
        if (!vl) {
            same_buf[0] = V_GONE;
            v = same_buf;
            vl = 1;
        } else if (same < i) {
            same_buf[0] = V_SAME;
            vl = 1 + sq_varint_put(same_buf + 1, same);
            v = same_buf;
        }
        len += sq_varint_put(buf + len, (uint64_t)e[i].channel);
        int valued = e[i].len && e[i].type > 0;
        if (valued)
            buf[len++] = 0;
        len += sq_varint_put(buf + len, vl);
        memcpy(buf + len, v, vl);
        len += vl;
        if (valued) {
            len += sq_varint_put(buf + len, (uint64_t)e[i].type);
            len += sq_varint_put(buf + len, e[i].value_len);
            if (e[i].value_len)
                memcpy(buf + len, e[i].value, e[i].value_len);
            len += e[i].value_len;
        }
    }
    *out = buf;
    *outlen = len;
    return 0;
}

/* ---- SQL functions ---- */

static void fn_id(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    unsigned char u[SQ_UUID_BYTES];
    (void)argc;
    if (sqlite3_value_type(argv[0]) != SQLITE_TEXT) {
        sqlite3_result_value(ctx, argv[0]);
        return;
    }
    const char *s = (const char *)sqlite3_value_text(argv[0]);
    if (sq_uuid_pack(s, (size_t)sqlite3_value_bytes(argv[0]), u))
        sqlite3_result_blob(ctx, u, SQ_UUID_BYTES, SQLITE_TRANSIENT);
    else
        sqlite3_result_value(ctx, argv[0]);
}

static void fn_version(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    const char *s = (const char *)sqlite3_value_text(argv[0]);
    size_t len = (size_t)sqlite3_value_bytes(argv[0]);
    if (!s) {
        sqlite3_result_null(ctx);
        return;
    }
    unsigned char *out = sqlite3_malloc64(len + 16);
    if (!out) {
        sqlite3_result_error_nomem(ctx);
        return;
    }
    sqlite3_result_blob(ctx, out, (int)sq_version_pack(s, len, out), sqlite3_free);
}

/* convo_channels(channel number, version): the pairs collected, packed at
 * the end. */
typedef struct channels_acc {
    int64_t *names;
    char **versions;
    size_t n, cap;
    int failed;
} channels_acc;

static char *dup_text(sqlite3_value *v)
{
    const char *s = (const char *)sqlite3_value_text(v);
    return s ? strdup(s) : NULL;
}

static void channels_step(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    channels_acc *a = sqlite3_aggregate_context(ctx, sizeof *a);
    if (!a || a->failed)
        return;
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 8;
        int64_t *nn = realloc(a->names, cap * sizeof *nn);
        if (nn)
            a->names = nn;
        char **vv = nn ? realloc(a->versions, cap * sizeof *vv) : NULL;
        if (!vv) {
            a->failed = 1;
            return;
        }
        a->versions = vv;
        a->cap = cap;
    }
    a->names[a->n] = sqlite3_value_int64(argv[0]);
    if (!(a->versions[a->n] = dup_text(argv[1]))) {
        a->failed = 1;
        return;
    }
    a->n++;
}

static void channels_final(sqlite3_context *ctx)
{
    channels_acc *a = sqlite3_aggregate_context(ctx, 0);
    unsigned char *out = NULL;
    size_t len = 0;
    int rc = a && !a->failed
                 ? sq_channels_pack(a->names, (const char *const *)a->versions, a->n, &out, &len)
                 : -1;
    if (!a)
        rc = sq_channels_pack(NULL, NULL, 0, &out, &len);
    if (rc == 0)
        sqlite3_result_blob(ctx, out, (int)len, free);
    else if (rc == -2)
        sqlite3_result_error(ctx, "convo_channels: a channel named twice", -1);
    else
        sqlite3_result_error_nomem(ctx);
    for (size_t i = 0; a && i < a->n; i++)
        free(a->versions[i]);
    if (a) {
        free(a->names);
        free(a->versions);
    }
}

/* ---- convo_channel_list(channels): the entries of a channel list ---- */

enum { COL_CHANNEL, COL_VERSION, COL_VERSION_TEXT, COL_TYPE, COL_VALUE, COL_CHANNELS };

typedef struct list_cursor {
    sqlite3_vtab_cursor base;
    unsigned char *list; /* a copy of the argument */
    size_t len, at;
    size_t start;        /* 1 in a delta (layout 9), whose gone entries are skipped */
    long entry;          /* bytes of the current entry; 0 at the end */
    sq_entry e;          /* the current entry (its version resolved) */
    int64_t row;
} list_cursor;

static int list_connect(sqlite3 *db, void *aux, int argc, const char *const *argv,
                        sqlite3_vtab **out, char **errmsg)
{
    (void)aux, (void)argc, (void)argv, (void)errmsg;
    int rc = sqlite3_declare_vtab(db, "CREATE TABLE x(channel INTEGER, version BLOB,"
                                      " version_text TEXT, type INTEGER, value BLOB,"
                                      " channels HIDDEN)");
    if (rc != SQLITE_OK)
        return rc;
    sqlite3_vtab *t = sqlite3_malloc(sizeof *t);
    if (!t)
        return SQLITE_NOMEM;
    memset(t, 0, sizeof *t);
    *out = t;
    return SQLITE_OK;
}

static int list_disconnect(sqlite3_vtab *t)
{
    sqlite3_free(t);
    return SQLITE_OK;
}

/* The argument is an equality on the hidden column; without it, nothing. */
static int list_best_index(sqlite3_vtab *t, sqlite3_index_info *info)
{
    (void)t;
    for (int i = 0; i < info->nConstraint; i++) {
        const struct sqlite3_index_constraint *c = &info->aConstraint[i];
        if (c->iColumn == COL_CHANNELS && c->op == SQLITE_INDEX_CONSTRAINT_EQ) {
            if (!c->usable) {
                info->estimatedCost = 1e12;
                return SQLITE_OK;
            }
            info->aConstraintUsage[i].argvIndex = 1;
            info->aConstraintUsage[i].omit = 1;
            info->idxNum = 1;
            info->estimatedCost = 10;
            info->estimatedRows = 8;
            return SQLITE_OK;
        }
    }
    info->estimatedCost = 1e12;
    return SQLITE_OK;
}

static int list_open(sqlite3_vtab *t, sqlite3_vtab_cursor **out)
{
    (void)t;
    list_cursor *c = sqlite3_malloc(sizeof *c);
    if (!c)
        return SQLITE_NOMEM;
    memset(c, 0, sizeof *c);
    *out = &c->base;
    return SQLITE_OK;
}

static int list_close(sqlite3_vtab_cursor *cur)
{
    list_cursor *c = (list_cursor *)cur;
    sqlite3_free(c->list);
    sqlite3_free(c);
    return SQLITE_OK;
}

/* The version of entry k of the list, which must come before the one at
 * c->at and not be a V_SAME itself (the current entry keeps its value). */
static int list_version_of(list_cursor *c, uint64_t k)
{
    size_t at = c->start;
    sq_entry e;
    for (uint64_t i = 0;; i++) {
        long n = channel_next(c->list + at, c->at - at, &e);
        if (n <= 0)
            return SQLITE_CORRUPT;
        if (i == k) {
            c->e.version = e.version;
            c->e.len = e.len;
            return e.version[0] == V_SAME || e.version[0] == V_GONE ? SQLITE_CORRUPT
                                                                    : SQLITE_OK;
        }
        at += (size_t)n;
    }
}

static int list_read(list_cursor *c)
{
    uint64_t k;
    c->entry = channel_next(c->list + c->at, c->len - c->at, &c->e);
    while (c->entry > 0 && c->start && c->e.version[0] == V_GONE && c->e.len == 1) {
        c->at += (size_t)c->entry;
        c->entry = channel_next(c->list + c->at, c->len - c->at, &c->e);
    }
    if (c->entry < 0 || (c->entry > 0 && c->e.version[0] == V_GONE))
        return SQLITE_CORRUPT;
    if (c->entry == 0 || c->e.version[0] != V_SAME)
        return SQLITE_OK;
    if (c->e.len < 2 || sq_varint_get(c->e.version + 1, c->e.len - 1, &k) != c->e.len - 1)
        return SQLITE_CORRUPT;
    return list_version_of(c, k);
}

static int list_filter(sqlite3_vtab_cursor *cur, int idx, const char *idxstr, int argc,
                       sqlite3_value **argv)
{
    list_cursor *c = (list_cursor *)cur;
    (void)idxstr;
    sqlite3_free(c->list);
    c->list = NULL;
    c->len = c->at = c->start = 0;
    c->row = 0;
    c->entry = 0;
    if (idx != 1 || argc < 1 || sqlite3_value_type(argv[0]) == SQLITE_NULL)
        return SQLITE_OK;
    const void *p = sqlite3_value_blob(argv[0]);
    c->len = (size_t)sqlite3_value_bytes(argv[0]);
    if (c->len) {
        if (!(c->list = sqlite3_malloc64(c->len)))
            return SQLITE_NOMEM;
        memcpy(c->list, p, c->len);
        c->at = c->start = c->list[0] == 0;
    }
    return list_read(c);
}

static int list_next(sqlite3_vtab_cursor *cur)
{
    list_cursor *c = (list_cursor *)cur;
    c->at += (size_t)c->entry;
    c->row++;
    return list_read(c);
}

static int list_eof(sqlite3_vtab_cursor *cur)
{
    return ((list_cursor *)cur)->entry <= 0;
}

static int list_column(sqlite3_vtab_cursor *cur, sqlite3_context *ctx, int col)
{
    list_cursor *c = (list_cursor *)cur;
    char *text;
    long n;
    switch (col) {
    case COL_CHANNEL:
        sqlite3_result_int64(ctx, c->e.channel);
        break;
    case COL_VERSION:
        sqlite3_result_blob(ctx, c->e.version, (int)c->e.len, SQLITE_TRANSIENT);
        break;
    case COL_VERSION_TEXT:
        if (!(text = sqlite3_malloc64(SQ_VERSION_TEXT_MAX(c->e.len)))) {
            sqlite3_result_error_nomem(ctx);
            break;
        }
        n = sq_version_unpack(c->e.version, c->e.len, text, SQ_VERSION_TEXT_MAX(c->e.len));
        if (n < 0) {
            sqlite3_free(text);
            sqlite3_result_error_code(ctx, SQLITE_CORRUPT);
        } else {
            sqlite3_result_text(ctx, text, (int)n, sqlite3_free);
        }
        break;
    case COL_TYPE:
        if (c->e.type)
            sqlite3_result_int64(ctx, c->e.type);
        else
            sqlite3_result_null(ctx);
        break;
    case COL_VALUE:
        if (c->e.type) /* an empty value is an empty BLOB, not NULL */
            sqlite3_result_blob(ctx, c->e.value_len ? (const void *)c->e.value : "",
                                (int)c->e.value_len, SQLITE_TRANSIENT);
        else
            sqlite3_result_null(ctx);
        break;
    default:
        sqlite3_result_null(ctx);
    }
    return SQLITE_OK;
}

static int list_rowid(sqlite3_vtab_cursor *cur, sqlite3_int64 *row)
{
    *row = ((list_cursor *)cur)->row;
    return SQLITE_OK;
}

static const sqlite3_module channel_list_module = {
    .iVersion = 0,
    .xConnect = list_connect,
    .xBestIndex = list_best_index,
    .xDisconnect = list_disconnect,
    .xOpen = list_open,
    .xClose = list_close,
    .xFilter = list_filter,
    .xNext = list_next,
    .xEof = list_eof,
    .xColumn = list_column,
    .xRowid = list_rowid,
};

/* convo_metadata(shape, stored): a checkpoint's metadata text. shape NULL:
 * stored is that text; else stored is the values of that shape (layout 8,
 * lib/json_shape.c). Values without their shape (a blob where text is kept,
 * or a shape number convo_names lacks) are SQLITE_CORRUPT, not text. */
static void fn_metadata(sqlite3_context *ctx, int argc, sqlite3_value **argv)
{
    (void)argc;
    if (sqlite3_value_type(argv[0]) == SQLITE_NULL &&
        sqlite3_value_type(argv[1]) == SQLITE_TEXT) {
        sqlite3_result_value(ctx, argv[1]);
        return;
    }
    const char *shape = (const char *)sqlite3_value_text(argv[0]);
    size_t shape_len = (size_t)sqlite3_value_bytes(argv[0]);
    const void *values = sqlite3_value_blob(argv[1]);
    size_t values_len = (size_t)sqlite3_value_bytes(argv[1]);
    char *json = NULL;
    size_t len = 0;
    int rc = shape && values ? convo__json_shape_join(shape, shape_len, values, values_len, &json, &len)
                             : CONVO_ECORRUPT;
    if (rc == 0) {
        sqlite3_result_text(ctx, json, (int)len, free);
    } else {
        sqlite3_result_error(ctx, "convo: a checkpoint's metadata does not fit its shape", -1);
        sqlite3_result_error_code(ctx, rc == CONVO_ENOMEM ? SQLITE_NOMEM : SQLITE_CORRUPT);
    }
}

int sq_compact_register(sqlite3 *db)
{
    const int flags = SQLITE_UTF8 | SQLITE_DETERMINISTIC;
    int rc = sqlite3_create_function(db, "convo_id", 1, flags, NULL, fn_id, NULL, NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_create_function(db, "convo_metadata", 2, flags, NULL, fn_metadata, NULL,
                                     NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_create_function(db, "convo_version", 1, flags, NULL, fn_version, NULL,
                                     NULL);
    if (rc == SQLITE_OK)
        rc = sqlite3_create_function(db, "convo_channels", 2, flags, NULL, NULL, channels_step,
                                     channels_final);
    if (rc == SQLITE_OK)
        rc = sqlite3_create_module(db, "convo_channel_list", &channel_list_module, NULL);
    return rc;
}
