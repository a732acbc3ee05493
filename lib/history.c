/* history.c — the results a load or a thread listing hands to the caller,
 * built by drivers through the convo__history_* / convo__thread_page_* calls. */
#include "internal.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>

convo_history *convo__history_new(void)
{
    convo_history *h = calloc(1, sizeof *h);
    return h;
}

int convo__history_reserve(convo_history *h, size_t n)
{
    if (h->count + n <= h->cap)
        return 0;
    size_t cap = h->cap ? h->cap : 16;
    while (cap < h->count + n)
        cap *= 2;
    convo_history_msg *m = realloc(h->msgs, cap * sizeof *m);
    if (!m)
        return CONVO_ENOMEM;
    h->msgs = m;
    h->cap = cap;
    return 0;
}

int convo__history_add(convo_history *h, const char *bytes, size_t len, const char *role,
                       int64_t seq, int64_t created_at)
{
    if (convo__history_reserve(h, 1) != 0)
        return CONVO_ENOMEM;
    size_t rlen = strlen(role);
    /* one allocation for message and role */
    char *buf = malloc(len + 1 + rlen + 1);
    if (!buf)
        return CONVO_ENOMEM;
    memcpy(buf, bytes, len);
    buf[len] = '\0';
    memcpy(buf + len + 1, role, rlen + 1);
    convo_history_msg *m = &h->msgs[h->count++];
    m->bytes = buf;
    m->len = len;
    m->role = buf + len + 1;
    m->seq = seq;
    m->created_at = created_at;
    return 0;
}

int convo__history_set_extra(convo_history *h, const char *json, size_t len)
{
    char *e = malloc(len + 1);
    if (!e)
        return CONVO_ENOMEM;
    memcpy(e, json, len);
    e[len] = '\0';
    free(h->extra);
    h->extra = e;
    return 0;
}

void convo__history_set_length(convo_history *h, int64_t length)
{
    h->length = length;
}

void convo__history_set_generation(convo_history *h, int64_t generation)
{
    h->generation = generation;
}

void convo_history_free(convo_history *h)
{
    if (!h)
        return;
    for (size_t i = 0; i < h->count; i++)
        free(h->msgs[i].bytes);
    free(h->msgs);
    free(h->extra);
    free(h);
}

size_t convo_history_count(const convo_history *h) { return h ? h->count : 0; }
int64_t convo_history_length(const convo_history *h) { return h ? h->length : 0; }
int64_t convo_history_generation(const convo_history *h) { return h ? h->generation : 0; }

const char *convo_history_message(const convo_history *h, size_t i, size_t *len)
{
    if (!h || i >= h->count) {
        if (len)
            *len = 0;
        return NULL;
    }
    if (len)
        *len = h->msgs[i].len;
    return h->msgs[i].bytes;
}

const char *convo_history_role(const convo_history *h, size_t i)
{
    return h && i < h->count ? h->msgs[i].role : NULL;
}

int64_t convo_history_seq(const convo_history *h, size_t i)
{
    return h && i < h->count ? h->msgs[i].seq : -1;
}

int64_t convo_history_created_at(const convo_history *h, size_t i)
{
    return h && i < h->count ? h->msgs[i].created_at : 0;
}

const char *convo_history_extra(const convo_history *h)
{
    return h && h->extra ? h->extra : "{}";
}

convo_thread_page *convo__thread_page_new(void)
{
    return calloc(1, sizeof(convo_thread_page));
}

int convo__thread_page_add(convo_thread_page *p, const char *id, size_t len)
{
    if (p->count == p->cap) {
        size_t cap = p->cap ? p->cap * 2 : 16;
        char **ids = realloc(p->ids, cap * sizeof *ids);
        if (!ids)
            return CONVO_ENOMEM;
        p->ids = ids;
        p->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy)
        return CONVO_ENOMEM;
    memcpy(copy, id, len);
    copy[len] = '\0';
    p->ids[p->count++] = copy;
    return 0;
}

int convo__thread_page_set_next(convo_thread_page *p, const char *next)
{
    free(p->next);
    p->next = next ? strdup(next) : NULL;
    return next && !p->next ? CONVO_ENOMEM : 0;
}

size_t convo_thread_page_count(const convo_thread_page *p) { return p ? p->count : 0; }

const char *convo_thread_page_id(const convo_thread_page *p, size_t i)
{
    return p && i < p->count ? p->ids[i] : NULL;
}

const char *convo_thread_page_next(const convo_thread_page *p)
{
    return p ? p->next : NULL;
}

void convo_thread_page_free(convo_thread_page *p)
{
    if (!p)
        return;
    for (size_t i = 0; p->rows && i < p->count; i++) {
        free(p->rows[i].extra);
        free(p->rows[i].last);
        free(p->rows[i].cursor);
    }
    free(p->rows);
    for (size_t i = 0; i < p->count; i++)
        free(p->ids[i]);
    free(p->ids);
    free(p->next);
    free(p);
}

void convo__load_range(const convo_load_opts *opts, int64_t length, int64_t *from, int64_t *to)
{
    int64_t f = opts->from_seq > 0 ? opts->from_seq : 0;
    if (opts->tail > 0 && length - opts->tail > f)
        f = length - opts->tail;
    if (f > length)
        f = length;
    int64_t t = length;
    if (opts->limit > 0 && opts->limit < t - f) /* not f + limit: it may overflow */
        t = f + opts->limit;
    *from = f;
    *to = t;
}

int64_t convo__now_micros(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

void convo_format_time(int64_t micros, char *buf, size_t size)
{
    time_t secs = (time_t)(micros / 1000000);
    long us = (long)(micros % 1000000);
    if (us < 0) {
        us += 1000000;
        secs -= 1;
    }
    struct tm tm;
    gmtime_r(&secs, &tm);
    snprintf(buf, size, "%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, us);
}
