/* threads.c — `convo threads`. Without the index options it prints ids in byte
 * order as it always did (convo_thread_list, every driver); with --where,
 * --order, --reverse, --with-meta, --extra or --last-message it reads the
 * thread index (convo_thread_list_ex) and --after takes one of its cursors. */
#include "threads.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREAD_PAGE 1000

/* ---- ids in byte order ---- */

/* Prints one page of ids; *printed gets their number, *next the cursor or NULL. */
static int print_id_page(convo_store *s, const char *after, size_t limit, size_t *printed,
                         char **next)
{
    convo_thread_page *p;
    convo_error err;
    *printed = 0;
    *next = NULL; /* the caller frees it, error or not */
    int rc = convo_thread_list(s, after, limit, &p, &err);
    if (rc != 0)
        return fail(rc, &err);
    *printed = convo_thread_page_count(p);
    for (size_t i = 0; i < *printed; i++)
        puts(convo_thread_page_id(p, i));
    const char *n = convo_thread_page_next(p);
    *next = n ? strdup(n) : NULL;
    convo_thread_page_free(p);
    if (n && !*next)
        return fail_msg(STATUS_ERROR, "out of memory");
    return STATUS_OK;
}

/* ---- the thread index ---- */

/* A JSON string literal of s, or NULL when s is not UTF-8 / out of memory. */
static char *quoted(const char *s)
{
    json_t *j = json_string(s);
    char *q = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
    json_decref(j);
    return q;
}

/* {"id":..,"created_at":"..","updated_at":"..","length":N[,"extra":{..}]
 *  [,"last_message":<stored bytes>|null],"cursor":".."} */
static int print_row(const convo_thread_page *p, size_t i, const convo_thread_list_opts *o)
{
    char *id = quoted(convo_thread_page_id(p, i));
    char *cursor = quoted(convo_thread_page_cursor(p, i));
    if (!id || !cursor) {
        free(id);
        free(cursor);
        return fail_msg(STATUS_ERROR, "cannot encode thread id '%.40s' as JSON",
                        convo_thread_page_id(p, i));
    }
    char created[40], updated[40];
    convo_format_time(convo_thread_page_created_at(p, i), created, sizeof created);
    convo_format_time(convo_thread_page_updated_at(p, i), updated, sizeof updated);
    printf("{\"id\":%s,\"created_at\":\"%s\",\"updated_at\":\"%s\",\"length\":%lld", id,
           created, updated, (long long)convo_thread_page_length(p, i));
    if (o->with_extra)
        printf(",\"extra\":%s", convo_thread_page_extra(p, i));
    if (o->with_last_message) {
        size_t len;
        const char *last = convo_thread_page_last_message(p, i, &len);
        fputs(",\"last_message\":", stdout);
        if (last)
            fwrite(last, 1, len, stdout);
        else
            fputs("null", stdout);
    }
    printf(",\"cursor\":%s}\n", cursor);
    free(id);
    free(cursor);
    return STATUS_OK;
}

/* Prints one page of the index (ids alone unless with_meta); as print_id_page. */
static int print_index_page(convo_store *s, convo_thread_list_opts *o, int with_meta,
                            size_t *printed, char **next)
{
    convo_thread_page *p;
    convo_error err;
    *printed = 0;
    *next = NULL;
    int rc = convo_thread_list_ex(s, o, &p, &err);
    if (rc != 0)
        return fail(rc, &err);
    int st = STATUS_OK;
    size_t n = convo_thread_page_count(p);
    for (size_t i = 0; i < n && st == STATUS_OK; i++) {
        if (with_meta)
            st = print_row(p, i, o);
        else
            puts(convo_thread_page_id(p, i));
    }
    *printed = n;
    const char *nx = convo_thread_page_next(p);
    if (st == STATUS_OK && nx && !(*next = strdup(nx)))
        st = fail_msg(STATUS_ERROR, "out of memory");
    convo_thread_page_free(p);
    return st;
}

static const char *const order_names[] = {"recent", "created", "id"};

/* The index options of the command line into *o; *used: whether any was given. */
static int index_options(const invocation *inv, convo_thread_list_opts *o, int *with_meta,
                         int *used)
{
    const char *order = opt_value(inv, "--order");
    o->where_json = opt_value(inv, "--where");
    o->reverse = opt_value(inv, "--reverse") != NULL;
    o->with_extra = opt_value(inv, "--extra") != NULL;
    o->with_last_message = opt_value(inv, "--last-message") != NULL;
    *with_meta = opt_value(inv, "--with-meta") != NULL;
    *used = order || o->where_json || o->reverse || o->with_extra || o->with_last_message ||
            *with_meta;
    if (order) {
        size_t k = 0;
        while (k < 3 && strcmp(order, order_names[k]) != 0)
            k++;
        if (k == 3)
            return usage_error(inv->cmd, "--order must be recent, created or id, not '%.40s'",
                               order);
        o->order = (int)k;
    }
    if ((o->with_extra || o->with_last_message) && !*with_meta)
        return usage_error(inv->cmd, "%s needs --with-meta",
                           o->with_extra ? "--extra" : "--last-message");
    return STATUS_OK;
}

int convo_tool_threads(convo_store *s, const invocation *inv)
{
    int64_t limit = 0; /* 0: every thread, page by page */
    convo_thread_list_opts o = CONVO_THREAD_LIST_OPTS_INIT;
    int with_meta = 0, indexed = 0;
    int st = opt_count(inv, "--limit", &limit);
    if (st == STATUS_OK)
        st = index_options(inv, &o, &with_meta, &indexed);
    const char *after = opt_value(inv, "--after");
    char *cursor = NULL;
    while (st == STATUS_OK) {
        size_t page = limit > 0 && limit < THREAD_PAGE ? (size_t)limit : THREAD_PAGE;
        size_t printed;
        char *next;
        if (indexed) {
            o.after = cursor ? cursor : after;
            o.limit = page;
            st = print_index_page(s, &o, with_meta, &printed, &next);
        } else {
            st = print_id_page(s, cursor ? cursor : after, page, &printed, &next);
        }
        free(cursor);
        cursor = next;
        if (limit > 0 && (limit -= (int64_t)printed) == 0)
            break;
        if (!cursor)
            break;
    }
    free(cursor);
    return st;
}
