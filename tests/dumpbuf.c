/* dumpbuf.c — see dumpbuf.h. */
#include "dumpbuf.h"
#include <stdlib.h>
#include <string.h>

int mem_write(void *ctx, const void *buf, size_t len)
{
    membuf *m = ctx;
    if (m->len + len > m->cap) {
        m->cap = (m->len + len) * 2;
        m->data = realloc(m->data, m->cap);
        if (!m->data)
            abort();
    }
    memcpy(m->data + m->len, buf, len);
    m->len += len;
    return 0;
}

long mem_read(void *ctx, void *buf, size_t len)
{
    membuf *m = ctx;
    size_t n = m->len - m->pos < len ? m->len - m->pos : len;
    memcpy(buf, m->data + m->pos, n);
    m->pos += n;
    return (long)n;
}

uint64_t fnv1a(const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t h = 14695981039346656037ULL;
    for (size_t i = 0; i < len; i++)
        h = (h ^ p[i]) * 1099511628211ULL;
    return h;
}

void add_frame(membuf *out, const void *rec, size_t len)
{
    unsigned char head[6] = {0x92, 0xc6, (unsigned char)(len >> 24), (unsigned char)(len >> 16),
                             (unsigned char)(len >> 8), (unsigned char)len};
    mem_write(out, head, sizeof head);
    mem_write(out, rec, len);
    uint64_t sum = fnv1a(rec, len);
    unsigned char tail[9] = {0xcf};
    for (int k = 0; k < 8; k++)
        tail[1 + k] = (unsigned char)(sum >> (56 - 8 * k));
    mem_write(out, tail, sizeof tail);
}

void mp_byte(membuf *m, unsigned c)
{
    unsigned char b = (unsigned char)c;
    mem_write(m, &b, 1);
}

void mp_array(membuf *m, unsigned n)
{
    mp_byte(m, 0x90 | n); /* n < 16 */
}

void mp_str(membuf *m, const char *s)
{
    size_t n = strlen(s);
    mp_byte(m, 0xd9);
    mp_byte(m, (unsigned)n); /* n < 256 */
    mem_write(m, s, n);
}

void mp_int(membuf *m, int64_t v)
{
    mp_byte(m, 0xd3);
    for (int k = 0; k < 8; k++)
        mp_byte(m, (unsigned)((uint64_t)v >> (56 - 8 * k)) & 0xff);
}

void mp_bin(membuf *m, const char *s)
{
    mp_byte(m, 0xc4);
    mp_byte(m, (unsigned)strlen(s));
    mem_write(m, s, strlen(s));
}

/* Frames the record in *rec onto *out and empties *rec. */
void mp_frame(membuf *out, membuf *rec)
{
    add_frame(out, rec->data, rec->len);
    rec->len = 0;
}

/* A dump of one thread with one message stored at time `at`. */
membuf dump_of(const char *const *threads, int n, int64_t at, const char *message)
{
    membuf out = {0}, r = {0};
    mp_array(&r, 3), mp_str(&r, "convo-dump"), mp_int(&r, 1), mp_str(&r, "by hand");
    mp_frame(&out, &r);
    for (int k = 0; k < n; k++) {
        const char *t = threads[k];
        mp_array(&r, 3), mp_str(&r, "thread"), mp_str(&r, t), mp_str(&r, "{}");
        mp_frame(&out, &r);
        mp_array(&r, 4), mp_str(&r, "messages"), mp_str(&r, t), mp_int(&r, 0), mp_array(&r, 1);
        mp_array(&r, 3), mp_int(&r, at), mp_str(&r, "user"), mp_bin(&r, message);
        mp_frame(&out, &r);
        mp_array(&r, 4), mp_str(&r, "thread-end"), mp_str(&r, t), mp_int(&r, 1), mp_int(&r, 0);
        mp_frame(&out, &r);
    }
    mp_array(&r, 3), mp_str(&r, "end"), mp_int(&r, n), mp_int(&r, n);
    mp_frame(&out, &r);
    free(r.data);
    return out;
}

membuf dump_with_time(const char *thread, int64_t at)
{
    const char *one[] = {thread};
    return dump_of(one, 1, at, "{\"role\":\"user\"}");
}
