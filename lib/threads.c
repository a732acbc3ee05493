/* threads.c — the thread index (convo_thread_list_ex): options, cursors, the
 * rows of a page, and the extra keys a store indexes. Drivers find and order
 * the threads; the core checks input and makes the cursors, once for all. */
#include "internal.h"
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LIST_LIMIT 10000

/* ---- the declared index keys ---- */

static int cmp_keys(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

void convo__index_keys_free(char **keys)
{
    for (size_t i = 0; keys && keys[i]; i++)
        free(keys[i]);
    free(keys);
}

int convo__index_keys_copy(const char *const *keys, char ***out, convo_error *err)
{
    *out = NULL;
    if (!keys)
        return 0;
    size_t n = 0;
    while (keys[n])
        n++;
    if (n > 32)
        return convo__error(err, CONVO_EINVAL, NULL, "at most 32 indexed extra keys");
    for (size_t i = 0; i < n; i++) {
        int rc = convo__check_key("indexed extra key", keys[i], 0, err);
        if (rc == 0 && strlen(keys[i]) > 128)
            rc = convo__error(err, CONVO_EINVAL, NULL, "indexed extra key is over 128 bytes");
        if (rc != 0)
            return rc;
    }
    char **copy = calloc(n + 1, sizeof *copy);
    if (!copy)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < n; i++)
        if (!(copy[i] = strdup(keys[i]))) {
            convo__index_keys_free(copy);
            return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
        }
    qsort(copy, n, sizeof *copy, cmp_keys);
    for (size_t i = 1; i < n; i++)
        if (strcmp(copy[i - 1], copy[i]) == 0) {
            int rc = convo__error(err, CONVO_EINVAL, NULL, "indexed extra key '%s' is named twice",
                                  copy[i]);
            convo__index_keys_free(copy);
            return rc;
        }
    *out = copy;
    return 0;
}

/* ---- cursors: "<order letter><direction digit>:<time as 16 hex digits>:<id>" ---- */

static const char order_letter[] = {'r', 'c', 'i'};

/* By hand, not snprintf: a page makes one per row, and formatting was a third
 * of a memory: page's time. */
static char *make_cursor(int order, int reverse, int64_t time, const char *id)
{
    size_t len = strlen(id);
    char *c = malloc(len + 21);
    if (!c)
        return NULL;
    c[0] = order_letter[order];
    c[1] = reverse ? '1' : '0';
    c[2] = ':';
    uint64_t t = (uint64_t)time;
    for (int i = 18; i >= 3; i--, t >>= 4)
        c[i] = "0123456789abcdef"[t & 15];
    c[19] = ':';
    memcpy(c + 20, id, len + 1);
    return c;
}

static int parse_cursor(const char *text, int order, int reverse, convo_thread_cursor *pos,
                        convo_error *err)
{
    size_t len = strlen(text);
    if (len < 21 || text[2] != ':' || text[19] != ':' || (text[1] != '0' && text[1] != '1'))
        return convo__error(err, CONVO_EINVAL, NULL, "bad thread list cursor");
    if (text[0] != order_letter[order] || (text[1] == '1') != (reverse != 0))
        return convo__error(err, CONVO_EINVAL, NULL,
                            "the cursor is from a listing in another order or direction");
    uint64_t t = 0;
    for (int i = 3; i < 19; i++) {
        char ch = text[i];
        int v = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
        if (v < 0)
            return convo__error(err, CONVO_EINVAL, NULL, "bad thread list cursor");
        t = t << 4 | (uint64_t)v;
    }
    pos->time = (int64_t)t;
    pos->id = text + 20;
    return convo__check_thread_id(pos->id, err) ? convo__error(err, CONVO_EINVAL, NULL,
                                                               "bad thread list cursor")
                                                : 0;
}

/* ---- the rows of a page ---- */

int convo__thread_page_add_row(convo_thread_page *p, const char *id, size_t id_len,
                               int64_t created_at, int64_t updated_at, int64_t length,
                               const char *extra, size_t extra_len, const char *last,
                               size_t last_len)
{
    if (convo__thread_page_add(p, id, id_len) != 0)
        return CONVO_ENOMEM;
    if (p->rows_cap < p->cap) { /* rows follow the ids array's capacity */
        convo_thread_row *rows = realloc(p->rows, p->cap * sizeof *rows);
        if (!rows) {
            free(p->ids[--p->count]);
            return CONVO_ENOMEM;
        }
        p->rows = rows;
        p->rows_cap = p->cap;
    }
    convo_thread_row *r = &p->rows[p->count - 1];
    memset(r, 0, sizeof *r);
    r->created_at = created_at;
    r->updated_at = updated_at;
    r->length = length;
    if (extra && !(r->extra = strndup(extra, extra_len)))
        goto nomem;
    if (last) {
        if (!(r->last = malloc(last_len + 1)))
            goto nomem;
        memcpy(r->last, last, last_len);
        r->last[last_len] = '\0';
        r->last_len = last_len;
    }
    return 0;
nomem:
    free(r->extra);
    free(p->ids[--p->count]);
    return CONVO_ENOMEM;
}

static const convo_thread_row *row(const convo_thread_page *p, size_t i)
{
    return p && p->rows && i < p->count ? &p->rows[i] : NULL;
}

int64_t convo_thread_page_created_at(const convo_thread_page *p, size_t i)
{
    return row(p, i) ? row(p, i)->created_at : 0;
}

int64_t convo_thread_page_updated_at(const convo_thread_page *p, size_t i)
{
    return row(p, i) ? row(p, i)->updated_at : 0;
}

int64_t convo_thread_page_length(const convo_thread_page *p, size_t i)
{
    return row(p, i) ? row(p, i)->length : 0;
}

const char *convo_thread_page_extra(const convo_thread_page *p, size_t i)
{
    return row(p, i) ? row(p, i)->extra : NULL;
}

const char *convo_thread_page_last_message(const convo_thread_page *p, size_t i, size_t *len)
{
    const convo_thread_row *r = row(p, i);
    if (len)
        *len = r && r->last ? r->last_len : 0;
    return r ? r->last : NULL;
}

const char *convo_thread_page_cursor(const convo_thread_page *p, size_t i)
{
    return row(p, i) ? row(p, i)->cursor : NULL;
}

/* ---- the call ---- */

static int check_opts(const convo_thread_list_opts *opts, convo_thread_list_opts *o,
                      json_t **where, convo_error *err)
{
    convo_thread_list_opts def = CONVO_THREAD_LIST_OPTS_INIT;
    *o = def;
    *where = NULL;
    if (opts) {
        if (opts->version < 1 || opts->version > CONVO_THREAD_LIST_OPTS_VERSION)
            return convo__error(err, CONVO_EINVAL, NULL,
                                "unsupported convo_thread_list_opts version %u", opts->version);
        *o = *opts;
    }
    if (o->order < CONVO_ORDER_RECENT || o->order > CONVO_ORDER_ID)
        return convo__error(err, CONVO_EINVAL, NULL, "unknown thread order %d", o->order);
    if (o->reverse != 0 && o->reverse != 1)
        return convo__error(err, CONVO_EINVAL, NULL, "reverse must be 0 or 1");
    if (o->limit == 0)
        o->limit = 100;
    if (o->limit > MAX_LIST_LIMIT)
        return convo__error(err, CONVO_EINVAL, NULL, "thread list limit must be at most %d",
                            MAX_LIST_LIMIT);
    o->with_extra = o->with_extra != 0;
    o->with_last_message = o->with_last_message != 0;
    if (o->where_json) {
        json_error_t je;
        *where = json_loads(o->where_json, JSON_REJECT_DUPLICATES, &je);
        if (!json_is_object(*where)) {
            json_decref(*where);
            *where = NULL;
            return convo__error(err, CONVO_EINVAL, NULL,
                                "where must be a JSON object (%s)",
                                je.text[0] ? je.text : "not an object");
        }
        if (json_object_size(*where) == 0) { /* {} matches every thread */
            json_decref(*where);
            *where = NULL;
        }
    }
    return 0;
}

/* Cursors for every row, and the next page's when the driver found more. */
static int finish_page(convo_thread_page *p, const convo_thread_list_opts *o)
{
    int more = p->count > o->limit;
    while (p->count > o->limit) {
        size_t i = --p->count;
        free(p->ids[i]);
        if (p->rows) {
            free(p->rows[i].extra);
            free(p->rows[i].last);
        }
    }
    for (size_t i = 0; p->rows && i < p->count; i++) {
        const convo_thread_row *r = &p->rows[i];
        int64_t t = o->order == CONVO_ORDER_RECENT    ? r->updated_at
                    : o->order == CONVO_ORDER_CREATED ? r->created_at
                                                      : 0;
        if (!(p->rows[i].cursor = make_cursor(o->order, o->reverse, t, p->ids[i])))
            return CONVO_ENOMEM;
    }
    if (more && p->count > 0)
        return convo__thread_page_set_next(p, p->rows[p->count - 1].cursor);
    return 0;
}

int convo_thread_list_ex(convo_store *s, const convo_thread_list_opts *opts,
                         convo_thread_page **out, convo_error *err)
{
    convo__error_clear(err);
    if (!s || !out)
        return convo__error(err, CONVO_EINVAL, NULL, "store or out is NULL");
    *out = NULL;
    if (s->driver->version < 5 || !s->driver->thread_list_ex)
        return convo__error(err, CONVO_ENOTSUP, NULL, "the %s driver has no thread index",
                            s->driver->name);
    convo_thread_list_opts o;
    json_t *where;
    int rc = check_opts(opts, &o, &where, err);
    convo_thread_cursor pos, *after = NULL;
    if (rc == 0 && o.after && *o.after) {
        rc = parse_cursor(o.after, o.order, o.reverse, &pos, err);
        after = &pos;
    }
    convo_thread_page *p = NULL;
    if (rc == 0)
        rc = convo__scrubbed(s, s->driver->thread_list_ex(s->backend, &o, where, after, &p, err),
                             err);
    json_decref(where);
    if (rc == 0 && !p->rows && p->count > 0) /* a driver that added no rows */
        rc = convo__error(err, CONVO_ERROR, NULL, "the %s driver listed ids without rows",
                          s->driver->name);
    if (rc == 0 && finish_page(p, &o) != 0)
        rc = convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    if (rc != 0) {
        convo_thread_page_free(p);
        return rc;
    }
    *out = p;
    return 0;
}
