/* values.c — parameters and results of the PostgreSQL driver in PostgreSQL's
 * binary format: integers, one-dimensional arrays (a batch of messages as two),
 * and jsonb's text made compact again. */
#include "config.h"
#include "pg_int.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t get_be(const char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | (unsigned char)p[i];
    return v;
}

int64_t convo__pg_get_int(const PGresult *r, int row, int col)
{
    int n = PQgetlength(r, row, col);
    uint64_t v = get_be(PQgetvalue(r, row, col), n);
    if (n == 4)
        return (int32_t)(uint32_t)v;
    return (int64_t)v;
}

void convo__pg_array_start(pg_array *a, uint32_t elem_oid, size_t size_hint)
{
    memset(a, 0, sizeof *a);
    a->cap = 20 + size_hint;
    if (!(a->buf = malloc(a->cap))) {
        a->failed = 1;
        return;
    }
    put32(a->buf, 1);            /* one dimension */
    put32(a->buf + 8, elem_oid); /* +4: NULLs flag, +12: count, set at the end */
    put32(a->buf + 16, 1);       /* lower bound */
    a->len = 20;
}

void convo__pg_array_add(pg_array *a, const void *bytes, size_t len)
{
    if (a->failed)
        return;
    size_t need = a->len + 4 + (bytes ? len : 0);
    if (need >= (size_t)1 << 30) { /* PostgreSQL's cap on one value */
        a->failed = 2;
        return;
    }
    if (need > a->cap) {
        size_t cap = a->cap * 2 > need ? a->cap * 2 : need;
        char *grown = realloc(a->buf, cap);
        if (!grown) {
            a->failed = 1;
            return;
        }
        a->buf = grown;
        a->cap = cap;
    }
    put32(a->buf + a->len, bytes ? (uint32_t)len : UINT32_MAX);
    if (bytes && len)
        memcpy(a->buf + a->len + 4, bytes, len);
    a->len = need;
    a->has_null |= !bytes;
    a->count++;
}

char *convo__pg_array_finish(pg_array *a, int *len)
{
    if (a->failed) {
        free(a->buf);
        return NULL;
    }
    put32(a->buf + 4, (uint32_t)a->has_null);
    put32(a->buf + 12, a->count);
    if (a->count == 0)
        put32(a->buf, 0); /* an empty array has no dimensions */
    *len = a->count ? (int)a->len : 12;
    return a->buf;
}

/* Copies the number token [tok, tok+n) to out. jsonb prints a real such as
 * 1e300 as a 301-digit integer, which JSON parsers (jansson) reject as too
 * big: such an integer, past 64 bits, is written back in exponent form. */
static size_t put_number(const char *tok, size_t n, char *out)
{
    size_t sign = tok[0] == '-', digits = n - sign;
    int integer = memchr(tok, '.', n) == NULL;
    const char *max = sign ? "9223372036854775808" : "9223372036854775807";
    if (!integer || digits < 19 || (digits == 19 && strncmp(tok + sign, max, 19) <= 0)) {
        memcpy(out, tok, n);
        return n;
    }
    size_t end = n, o = 0;
    while (end > sign + 1 && tok[end - 1] == '0')
        end--;
    if (sign)
        out[o++] = '-';
    out[o++] = tok[sign];
    if (end > sign + 1) {
        out[o++] = '.';
        memcpy(out + o, tok + sign + 1, end - sign - 1);
        o += end - sign - 1;
    }
    return o + (size_t)sprintf(out + o, "e%zu", digits - 1);
}

/* jsonb prints ", " and ": "; convo hands out compact JSON. Returns a
 * malloc'd NUL-terminated compact copy of column col, or NULL. */
char *convo__pg_compact_json(const PGresult *r, int row, int col, size_t *len)
{
    return convo__pg_compact_json_bytes(PQgetvalue(r, row, col),
                                        (size_t)PQgetlength(r, row, col), len);
}

char *convo__pg_compact_json_bytes(const char *in, size_t n, size_t *len)
{
    size_t o = 0;
    char *out = malloc(2 * n + 64); /* exponent forms may be longer */
    int in_string = 0, escaped = 0;
    for (size_t i = 0; out && i < n; i++) {
        char ch = in[i];
        if (in_string) {
            if (escaped)
                escaped = 0;
            else if (ch == '\\')
                escaped = 1;
            else if (ch == '"')
                in_string = 0;
        } else if (ch == '"') {
            in_string = 1;
        } else if (ch == ' ' && o > 0 && (out[o - 1] == ',' || out[o - 1] == ':')) {
            continue;
        } else if (ch == '-' || (ch >= '0' && ch <= '9')) {
            size_t end = i + 1;
            while (end < n && strchr("0123456789.eE+-", in[end]))
                end++;
            o += put_number(in + i, end - i, out + o);
            i = end - 1;
            continue;
        }
        out[o++] = ch;
    }
    if (out)
        out[o] = '\0';
    *len = o;
    return out;
}

int convo__pg_too_large(int rc, convo_error *err)
{
    if (rc == CONVO_ETOOLARGE)
        return convo__error(err, rc, NULL, "postgres: over 1 GiB in one parameter");
    return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
}

int convo__pg_encode_batch(const convo_message_in *msgs, size_t n, char **bodies, int *blen,
                           char **roles, int *rlen)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += 4 + msgs[i].len;
    pg_array b, r;
    convo__pg_array_start(&b, OID_BYTEA, total);
    convo__pg_array_start(&r, OID_TEXT, n * 16);
    for (size_t i = 0; i < n; i++) {
        convo__pg_array_add(&b, msgs[i].bytes, msgs[i].len);
        convo__pg_array_add(&r, msgs[i].role, strlen(msgs[i].role));
    }
    *bodies = convo__pg_array_finish(&b, blen);
    *roles = convo__pg_array_finish(&r, rlen);
    if (*bodies && *roles)
        return 0;
    free(*bodies);
    free(*roles);
    return b.failed == 2 || r.failed == 2 ? CONVO_ETOOLARGE : CONVO_ENOMEM;
}
