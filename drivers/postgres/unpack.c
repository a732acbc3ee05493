/* unpack.c — the packed columns of a checkpoint row decoded in C (issue 28):
 * versions and vals (docs/postgres.md: migrate-37.sql's forms 1, 2, 4 and
 * migrate-31.sql's 1, 2), pending-write elements (migrate-39.sql's three
 * forms), ids, versions and metadata back to text. Every check the SQL
 * decoders made (channel_vals(), write_fields(), convert_from()) is made here:
 * bytes that do not check are CONVO_ECORRUPT. */
#include "config.h"
#include "pg_int.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint32_t be(const unsigned char *p, int n)
{
    uint32_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

int convo__pg_unpack_channels(const int32_t *set, size_t n, const char *versions,
                              size_t vlen, const char *vals, size_t vals_len, int vals_null,
                              pg_chan *out)
{
    if (n == 0)
        return 0; /* channel_vals(): an empty set reads nothing, checks nothing */
    const unsigned char *v = (const unsigned char *)versions;
    if (vlen < 1 || (v[0] != 1 && v[0] != 2 && v[0] != 4))
        return CONVO_ECORRUPT;
    size_t vw = v[0] == 4 ? 4 : 1;
    if (vlen < 1 + vw * n || (v[0] == 2 && v[1] == 255))
        return CONVO_ECORRUPT; /* no room for the lengths; a first channel repeating nothing */
    uint64_t pos = 1 + vw * n;
    const char *lit = NULL;
    size_t lit_len = 0;
    for (size_t o = 0; o < n; o++) {
        out[o].ch = set[o];
        if (v[0] == 2 && v[1 + o] == 255) {
            out[o].ver = lit, out[o].ver_len = lit_len;
            continue;
        }
        uint32_t len = v[0] == 4 ? be(v + 1 + 4 * o, 4) : v[1 + o];
        if (len > INT32_MAX || pos + len > vlen)
            return CONVO_ECORRUPT;
        lit = versions + pos, lit_len = len;
        out[o].ver = lit, out[o].ver_len = lit_len;
        pos += len;
    }
    if (pos != vlen)
        return CONVO_ECORRUPT; /* the lengths do not fill the value */
    for (size_t o = 0; o < n; o++)
        out[o].type = 0, out[o].value = NULL, out[o].len = 0;
    if (vals_null)
        return 0; /* (v28 rows) every value in checkpoint_blobs */
    const unsigned char *a = (const unsigned char *)vals;
    size_t h = vals_len > 0 && a[0] == 2 ? 1 : 0, lw = h ? 2 : 1;
    if (vals_len < h + (4 + lw) * n)
        return CONVO_ECORRUPT;
    uint64_t vpos = h + (4 + lw) * n;
    for (size_t o = 0; o < n; o++) {
        uint32_t t = be(a + h + 4 * o, 4);
        uint32_t len = be(a + h + 4 * n + lw * o, (int)lw);
        if (t > INT32_MAX || (t == 0 && len != 0) || vpos + len > vals_len)
            return CONVO_ECORRUPT;
        out[o].type = (int32_t)t;
        out[o].value = vals + vpos, out[o].len = len;
        vpos += len;
    }
    return vpos == vals_len ? 0 : CONVO_ECORRUPT;
}

/* The header of an element of form b (1 short, 2 long, 0 or 255 version
 * 30's): its size, and where the long forms' fields start. */
static int write_header(const unsigned char *e, size_t len, size_t *h, size_t *o)
{
    if (len == 0)
        return CONVO_ECORRUPT;
    switch (e[0]) {
    case 1: *h = 10, *o = 0; break;
    case 2: *h = 25, *o = 1; break;
    case 0: case 255: *h = 24, *o = 0; break;
    default: return CONVO_ECORRUPT;
    }
    return len >= *h ? 0 : CONVO_ECORRUPT;
}

int convo__pg_write_channel(const char *elem, size_t len, int32_t *channel)
{
    const unsigned char *e = (const unsigned char *)elem;
    size_t h, o;
    if (!elem || write_header(e, len, &h, &o) != 0)
        return 0;
    *channel = e[0] == 1 ? (int32_t)be(e + 5, 2) : (int32_t)be(e + o + 12, 4);
    return 1;
}

int convo__pg_unpack_write(const char *elem, size_t len, pg_write *w)
{
    const unsigned char *e = (const unsigned char *)elem;
    size_t h, o;
    if (!elem || write_header(e, len, &h, &o) != 0)
        return CONVO_ECORRUPT;
    uint32_t tlen;
    if (e[0] == 1) {
        w->idx = (int16_t)(uint16_t)be(e + 1, 2);
        w->task_path = (int32_t)be(e + 3, 2);
        w->channel = (int32_t)be(e + 5, 2);
        w->type = (int32_t)be(e + 7, 2);
        tlen = e[9];
    } else {
        w->idx = (int64_t)((uint64_t)be(e + o, 4) << 32 | be(e + o + 4, 4));
        w->task_path = (int32_t)be(e + o + 8, 4);
        w->channel = (int32_t)be(e + o + 12, 4);
        w->type = (int32_t)be(e + o + 16, 4);
        tlen = be(e + o + 20, 4);
    }
    if (tlen > INT32_MAX || h + tlen > len)
        return CONVO_ECORRUPT;
    w->task = elem + h, w->task_len = tlen;
    w->value = elem + h + tlen, w->len = len - h - tlen;
    return 0;
}

/* PostgreSQL's text in UTF8: well-formed UTF-8, no NUL, no surrogates, at
 * most U+10FFFF (what convert_from() refused with 22021). */
static int text_ok(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        size_t k = c < 0x80 ? 1 : (c & 0xe0) == 0xc0 ? 2 : (c & 0xf0) == 0xe0 ? 3
                 : (c & 0xf8) == 0xf0 ? 4 : 0;
        if (c == 0 || k == 0 || i + k > n)
            return 0;
        uint32_t cp = k == 1 ? c : c & (0x7f >> k);
        for (size_t j = 1; j < k; j++) {
            if ((s[i + j] & 0xc0) != 0x80)
                return 0;
            cp = cp << 6 | (s[i + j] & 0x3f);
        }
        static const uint32_t least[5] = {0, 0, 0x80, 0x800, 0x10000};
        if (cp < least[k] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        i += k;
    }
    return 1;
}

static void uuid_text(const unsigned char *p, char *out)
{
    static const char hex[] = "0123456789abcdef";
    size_t o = 0;
    for (int i = 0; i < 16; i++) {
        if (i == 4 || i == 6 || i == 8 || i == 10)
            out[o++] = '-';
        out[o++] = hex[p[i] >> 4];
        out[o++] = hex[p[i] & 15];
    }
    out[o] = '\0';
}

/* bytes [p, p+n) as a NUL-terminated text in *out, when they are text. */
static int copy_text(const char *p, size_t n, char **out)
{
    if (!text_ok((const unsigned char *)p, n))
        return CONVO_ECORRUPT;
    if (!(*out = malloc(n + 1)))
        return CONVO_ENOMEM;
    memcpy(*out, p, n);
    (*out)[n] = '\0';
    return 0;
}

int convo__pg_id_text(const char *p, size_t n, char **out)
{
    *out = NULL;
    if (n == 16) {
        if (!(*out = malloc(37)))
            return CONVO_ENOMEM;
        uuid_text((const unsigned char *)p, *out);
        return 0;
    }
    if (n == 17 && p[0] == 0)
        return copy_text(p + 1, 16, out);
    return copy_text(p, n, out);
}

int convo__pg_ver_text(const char *p, size_t n, char **out)
{
    *out = NULL;
    const unsigned char *u = (const unsigned char *)p;
    if (n < 1)
        return CONVO_ECORRUPT;
    if (u[0] == 0)
        return copy_text(p + 1, n - 1, out);
    if (u[0] == 2) {
        if (n != 17)
            return CONVO_ECORRUPT;
        if (!(*out = malloc(37)))
            return CONVO_ENOMEM;
        uuid_text(u + 1, *out);
        return 0;
    }
    if (u[0] != 1)
        return copy_text(p, n, out);
    /* 1, the count's width, the count (4 bytes), the rest: ver_text()'s
     * lpad(count, width, '0') || '.' || rest */
    if (n < 6 || !text_ok(u + 6, n - 6))
        return CONVO_ECORRUPT;
    char digits[16];
    int dn = snprintf(digits, sizeof digits, "%d", (int32_t)be(u + 2, 4));
    size_t width = u[1];
    if (!(*out = malloc(width + 1 + (n - 6) + 1)))
        return CONVO_ENOMEM;
    size_t pad = width > (size_t)dn ? width - (size_t)dn : 0, keep = width - pad;
    memset(*out, '0', pad);
    memcpy(*out + pad, digits, keep); /* lpad also cuts a longer text to the width */
    (*out)[width] = '.';
    memcpy(*out + width + 1, p + 6, n - 6);
    (*out)[width + 1 + n - 6] = '\0';
    return 0;
}

/* meta_pack()'s fragments (migrate-36.sql), by their byte. */
static const char *fragment(unsigned char c)
{
    switch (c) {
    case 1: return "\"counters_since_delta_snapshot\":{\"messages\":[";
    case 2: return "\"counters_since_delta_snapshot\":";
    case 3: return "\"delta_writes_versioned\":true";
    case 4: return "\"parents\":{}";
    case 5: return "\"parents\":";
    case 6: return "\"source\":\"loop\"";
    case 7: return "\"source\":\"input\"";
    case 8: return "\"source\":\"update\"";
    case 11: return "\"source\":\"fork\"";
    case 12: return "\"step\":";
    default: return NULL;
    }
}

char *convo__pg_meta_text(const char *p, size_t n, size_t *len)
{
    if (n > 0 && p[0] == 0x1f) { /* stored as given: it had control bytes */
        p++, n--;
    } else {
        size_t total = 0;
        for (size_t i = 0; i < n; i++) {
            const char *f = fragment((unsigned char)p[i]);
            total += f ? strlen(f) : 1;
        }
        char *out = malloc(total + 1);
        if (!out)
            return NULL;
        size_t o = 0;
        for (size_t i = 0; i < n; i++) {
            const char *f = fragment((unsigned char)p[i]);
            size_t fl = f ? strlen(f) : 1;
            memcpy(out + o, f ? f : p + i, fl);
            o += fl;
        }
        out[o] = '\0';
        *len = o;
        return out;
    }
    char *out = malloc(n + 1);
    if (out) {
        memcpy(out, p, n);
        out[n] = '\0';
        *len = n;
    }
    return out;
}

int convo__pg_unpack_array(const char *p, size_t n, pg_array_elem **out, size_t *count)
{
    *out = NULL;
    *count = 0;
    const unsigned char *u = (const unsigned char *)p;
    if (n < 12)
        return CONVO_ECORRUPT;
    uint32_t ndim = be(u, 4);
    if (ndim == 0)
        return 0;
    if (ndim != 1 || n < 20)
        return CONVO_ECORRUPT;
    uint32_t k = be(u + 12, 4);
    if (k > n / 4)
        return CONVO_ECORRUPT;
    pg_array_elem *e = calloc(k ? k : 1, sizeof *e);
    if (!e)
        return CONVO_ENOMEM;
    size_t pos = 20;
    for (uint32_t i = 0; i < k; i++) {
        if (pos + 4 > n) {
            free(e);
            return CONVO_ECORRUPT;
        }
        uint32_t len = be(u + pos, 4);
        pos += 4;
        if (len == UINT32_MAX) {
            e[i].bytes = NULL; /* an SQL NULL */
            continue;
        }
        if (len > n - pos) {
            free(e);
            return CONVO_ECORRUPT;
        }
        e[i].bytes = p + pos, e[i].len = len;
        pos += len;
    }
    *out = e;
    *count = k;
    return 0;
}
