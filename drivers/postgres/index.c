/* index.c — the PostgreSQL driver's thread index (convo_thread_list_ex): the
 * declared index keys recorded in the schema (@S.index_keys()), the list
 * statements filled in for each order, direction and filter (a shape), and a
 * page read with one of them (docs/postgres.md: The thread index). */
#include "config.h"
#include "pg_int.h"
#include "drivers/postgres/sql.h"
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* ---- the declared keys ---- */

/* The opener's keys as a text[] parameter (NULL when it declares none). */
static int keys_param(const convo_backend *b, char **value, int *len)
{
    *value = NULL;
    *len = 0;
    char *const *keys = b->limits.indexed_keys;
    if (!keys)
        return 0;
    pg_array a;
    convo__pg_array_start(&a, OID_TEXT, 256);
    for (size_t i = 0; keys[i]; i++)
        convo__pg_array_add(&a, keys[i], strlen(keys[i]));
    return (*value = convo__pg_array_finish(&a, len)) ? 0 : CONVO_ENOMEM;
}

static int keys_from_result(convo_backend *b, const PGresult *r)
{
    int n = PQntuples(r);
    if (n > LIST_MAX_KEYS)
        return CONVO_ECORRUPT;
    if (!(b->keys = calloc((size_t)n + 1, sizeof *b->keys)))
        return CONVO_ENOMEM;
    for (int i = 0; i < n; i++)
        if (!(b->keys[i] = strdup(PQgetvalue(r, i, 0))))
            return CONVO_ENOMEM;
    b->nkeys = (size_t)n;
    return 0;
}

/* index_keys.sql on pg: b->keys, the store's recorded keys. */
static int read_keys(convo_backend *b, PGconn *pg, convo_error *err)
{
    char *sql = convo__pg_fill(b, SQL_INDEX_KEYS, NULL), *keys;
    int len, rc = sql ? keys_param(b, &keys, &len) : CONVO_ENOMEM;
    if (rc != 0) {
        free(sql);
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    }
    const Oid types[1] = {OID_TEXT_ARRAY};
    const char *values[1] = {keys};
    const int lens[1] = {len}, formats[1] = {1};
    PGresult *r = PQexecParams(pg, sql, 1, types, values, lens, formats, 0);
    free(sql);
    free(keys);
    if (!r || PQresultStatus(r) != PGRES_TUPLES_OK) {
        rc = convo__pg_fail(b, pg, r, err);
        PQclear(r);
        return rc;
    }
    rc = keys_from_result(b, r);
    PQclear(r);
    if (rc == CONVO_ECORRUPT)
        return convo__error(err, rc, NULL, "postgres: schema %s records more than %d index keys",
                            b->schema, LIST_MAX_KEYS);
    return rc ? convo__error(err, CONVO_ENOMEM, NULL, "out of memory") : 0;
}

/* ---- the shapes ---- */

/* text with each @C, @D, @R and @K put in (@S and @N by convo__pg_fill). */
static char *fill_shape(const convo_backend *b, const char *text, const char *column,
                        const char *direction, const char *relation, const char *key)
{
    char *base = convo__pg_fill(b, text, NULL);
    if (!base)
        return NULL;
    size_t n = strlen(base) + 1, add = strlen(column) + strlen(key) + 8;
    for (const char *p = base; (p = strchr(p, '@')) != NULL; p++)
        n += add;
    char *out = malloc(n), *o = out;
    for (const char *p = base; out && *p; p++) {
        const char *with = NULL;
        if (p[0] == '@')
            with = p[1] == 'C' ? column : p[1] == 'D' ? direction : p[1] == 'R' ? relation
                 : p[1] == 'K' ? key : NULL;
        if (!with) {
            *o++ = *p;
            continue;
        }
        memcpy(o, with, strlen(with));
        o += strlen(with);
        p++;
    }
    if (out)
        *o = '\0';
    free(base);
    return out;
}

static const char *const order_column[] = {"updated_at", "created_at", "thread_id"};

/* The direction and the cursor's side of an order: time orders run newest
 * first, the id order in byte order; reverse turns each around. */
static void direction(int order, int reverse, const char **dir, const char **rel)
{
    int descending = (order != CONVO_ORDER_ID) != (reverse != 0);
    *dir = descending ? "DESC" : "ASC";
    *rel = descending ? "<" : ">";
}

/* The activity order's statement for a direction. */
static const char *recent_sql(int reverse)
{
    return reverse ? SQL_THREAD_LIST_RECENT_ASC : SQL_THREAD_LIST_RECENT;
}

/* Shapes 0-5 (no filter) and 6-11 (GIN), order * 2 + reverse, then the
 * activity order on each key; key is its quoted literal ("NULL": no key). */
static int fill_shapes(convo_backend *b, char *const *literal)
{
    for (int order = CONVO_ORDER_RECENT; order <= CONVO_ORDER_ID; order++)
        for (int reverse = 0; reverse <= 1; reverse++) {
            const char *dir, *rel, *col = order_column[order];
            direction(order, reverse, &dir, &rel);
            int id = order == CONVO_ORDER_ID, s = order * 2 + reverse;
            const char *all = order == CONVO_ORDER_RECENT ? recent_sql(reverse)
                            : id ? SQL_THREAD_LIST_ID_ALL : SQL_THREAD_LIST_ALL;
            b->list_sql[s] = fill_shape(b, all, col, dir, rel, "NULL");
            b->list_sql[6 + s] = fill_shape(
                b, id ? SQL_THREAD_LIST_ID_MATCH : SQL_THREAD_LIST_MATCH, col, dir, rel, "");
            if (!b->list_sql[s] || !b->list_sql[6 + s])
                return CONVO_ENOMEM;
        }
    for (size_t k = 0; k < b->nkeys; k++)
        for (int reverse = 0; reverse <= 1; reverse++) {
            int s = LIST_KEY_SHAPE((int)k, reverse);
            if (!(b->list_sql[s] = fill_shape(b, recent_sql(reverse), "", "", "", literal[k])))
                return CONVO_ENOMEM;
        }
    return 0;
}

/* The keys as SQL literals (PQescapeLiteral: right whatever the server's
 * standard_conforming_strings), then the shapes. */
static int make_shapes(convo_backend *b, PGconn *pg, convo_error *err)
{
    char *literal[LIST_MAX_KEYS] = {0};
    int rc = 0;
    for (size_t k = 0; k < b->nkeys && rc == 0; k++)
        if (!(literal[k] = PQescapeLiteral(pg, b->keys[k], strlen(b->keys[k]))))
            rc = CONVO_ENOMEM;
    if (rc == 0)
        rc = fill_shapes(b, literal);
    for (size_t k = 0; k < b->nkeys; k++)
        PQfreemem(literal[k]);
    return rc ? convo__error(err, CONVO_ENOMEM, NULL, "out of memory") : 0;
}

/* The keys and shapes dropped (a failed read leaves none half made). */
static void index_forget(convo_backend *b)
{
    for (int s = 0; s < LIST_SHAPES; s++) {
        free(b->list_sql[s]);
        b->list_sql[s] = NULL;
    }
    for (size_t k = 0; b->keys && b->keys[k]; k++)
        free(b->keys[k]);
    free(b->keys);
    b->keys = NULL;
    b->nkeys = 0;
}

/* index_keys.sql and the shapes, once (under index_lock). */
static int index_read(convo_backend *b, convo_error *err)
{
    pthread_mutex_lock(&b->index_lock);
    int rc = 0;
    if (!b->index_read) {
        pg_conn *c;
        rc = convo__pg_conn_get(b, &c, err);
        if (rc == 0) {
            rc = read_keys(b, c->pg, err);
            if (rc == 0)
                rc = make_shapes(b, c->pg, err);
            convo__pool_release(b->pool, c, PQstatus(c->pg) != CONNECTION_OK);
        }
        if (rc == 0)
            b->index_read = 1;
        else
            index_forget(b);
    }
    pthread_mutex_unlock(&b->index_lock);
    return rc;
}

/* An opener that declares keys records or checks them now (CV400 at open when
 * they differ); one that declares none has the recorded ones read by its first
 * page: a store that lists no threads (a saver) runs no index_keys.sql. */
int convo__pg_index_open(convo_backend *b, convo_error *err)
{
    return b->limits.indexed_keys ? index_read(b, err) : 0;
}

void convo__pg_index_close(convo_backend *b)
{
    index_forget(b);
}

/* ---- a page ---- */

/* The first declared key the where gives a scalar value (for a scalar,
 * containment is equality: the key's index holds exactly its threads); -1
 * when none. */
static int where_key(const convo_backend *b, json_t *where)
{
    for (size_t k = 0; where && k < b->nkeys; k++) {
        json_t *v = json_object_get(where, b->keys[k]);
        if (v && !json_is_object(v) && !json_is_array(v))
            return (int)k;
    }
    return -1;
}

/* Binary parameters of a page (thread_list_all.sql says which is which). */
typedef struct list_params {
    char time[8], limit[8], with_extra, with_last, key_only;
    char top[4 * 129 + 1]; /* above every thread id (at most 512 bytes of UTF-8) */
    const char *values[LIST_NPARAMS];
    int lens[LIST_NPARAMS];
} list_params;

static int list_params_init(list_params *p, const convo_thread_list_opts *o, json_t *where,
                            const convo_thread_cursor *after, convo_error *err)
{
    int descending = (o->order != CONVO_ORDER_ID) != (o->reverse != 0);
    int64_t time = descending ? INT64_MAX : INT64_MIN; /* +-infinity: from the start */
    const char *id = "";
    if (!after && descending && o->order == CONVO_ORDER_ID) {
        for (int i = 0; i < 129; i++)
            memcpy(p->top + 4 * i, "\xF4\x8F\xBF\xBF", 4); /* U+10FFFF */
        p->top[4 * 129] = '\0';
        id = p->top;
    }
    if (after && o->order != CONVO_ORDER_ID) { /* (the id order has no time) */
        if (after->time < INT64_MIN + PG_EPOCH_MICROS)
            return convo__error(err, CONVO_EINVAL, NULL, "bad thread list cursor");
        time = after->time - PG_EPOCH_MICROS;
    }
    if (after)
        id = after->id;
    put64(p->time, (uint64_t)time);
    put64(p->limit, (uint64_t)o->limit + 1);
    p->with_extra = o->with_extra ? 1 : 0;
    p->with_last = o->with_last_message ? 1 : 0;
    p->key_only = where && json_object_size(where) == 1;
    const char *values[LIST_NPARAMS] = {id, p->time, p->limit, &p->with_extra, &p->with_last,
                                        where ? o->where_json : NULL, &p->key_only};
    const int lens[LIST_NPARAMS] = {(int)strlen(id), 8, 8, 1, 1,
                                    where ? (int)strlen(o->where_json) : 0, 1};
    memcpy(p->values, values, sizeof values);
    memcpy(p->lens, lens, sizeof lens);
    return 0;
}

static int add_rows(convo_thread_page *p, const PGresult *r)
{
    for (int i = 0; i < PQntuples(r); i++) {
        size_t extra_len = 0;
        char *extra = PQgetisnull(r, i, 4) ? NULL : convo__pg_compact_json(r, i, 4, &extra_len);
        if (!PQgetisnull(r, i, 4) && !extra)
            return CONVO_ENOMEM;
        int last = !PQgetisnull(r, i, 5);
        int rc = convo__thread_page_add_row(
            p, PQgetvalue(r, i, 0), (size_t)PQgetlength(r, i, 0),
            convo__pg_get_int(r, i, 1) + PG_EPOCH_MICROS,
            convo__pg_get_int(r, i, 2) + PG_EPOCH_MICROS, convo__pg_get_int(r, i, 3), extra,
            extra_len, last ? PQgetvalue(r, i, 5) : NULL,
            last ? (size_t)PQgetlength(r, i, 5) : 0);
        free(extra);
        if (rc != 0)
            return rc;
    }
    return 0;
}

int convo__pg_thread_list_ex(convo_backend *b, const convo_thread_list_opts *o, void *where,
                             const convo_thread_cursor *after, convo_thread_page **out,
                             convo_error *err)
{
    int rc = index_read(b, err);
    if (rc != 0)
        return rc;
    int key = where ? where_key(b, where) : -1, shape = o->order * 2 + o->reverse;
    if (key >= 0 && o->order == CONVO_ORDER_RECENT)
        shape = LIST_KEY_SHAPE(key, o->reverse);
    else if (where)
        shape += 6;
    list_params p;
    rc = list_params_init(&p, o, where, after, err);
    PGresult *r;
    if (rc == 0)
        rc = convo__pg_run_list(b, shape, p.values, p.lens, &r, err);
    if (rc != 0)
        return rc;
    convo_thread_page *page = convo__thread_page_new();
    rc = page ? add_rows(page, r) : CONVO_ENOMEM;
    PQclear(r);
    if (rc != 0) {
        convo_thread_page_free(page);
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    }
    *out = page;
    return 0;
}
