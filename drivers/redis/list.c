/* list.c — convo_thread_list_ex on the index of layout 8 (one server) or 9 (a
 * cluster; docs/redis.md, "The thread index"). Candidates come in order from
 * one sorted set: the set of a declared key's value when the filter names one,
 * else the set of every thread (on a cluster either one's 16 shards, merged;
 * a page read again reads its guessed rows with them, rows.c); each
 * batch's rows are read in one round trip (on one server in list.lua, which
 * also orders a recent page by updated_at inside the activity window) and
 * checked against the thread's own keys. An
 * entry whose thread is gone (deleted, expired) or, on a cluster, says
 * otherwise (a write whose index update was lost) is skipped and repaired. */
#include "redis_int.h"
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define STAGING_PREFIX ".convo-import-" /* lib/import.c: never listed */

typedef struct cand {
    char *id;
    long long score;
} cand;

typedef struct source {
    char *keys[IX_SHARDS];
    size_t nkeys;
    int lex;        /* id order: every score 0, read by ZRANGEBYLEX */
    int desc;       /* (time, id) or id descending */
    int order;      /* CONVO_ORDER_* */
    char *kv;       /* "P:ix:{F V}:" when the filter's value is indexed, else NULL (on a
                     * cluster its sets are per shard, convo__rd_ix_kv; this names it) */
    int window;     /* one server, recent order: ordered by list.lua within the window */
    int exact;      /* the filter is one key with a value whose text decides: */
    char *exact_field, *exact_value; /* the stored field and value texts that match */
    const char *exact_key;           /* the declared key of kv (the filter's) */
    int threads;    /* P:threads (one server, id order, no indexed value) */
} source;

typedef struct position {
    int set;
    long long time;
    char *id;
} position;

static void source_free(source *s)
{
    for (size_t i = 0; i < s->nkeys; i++)
        free(s->keys[i]);
    free(s->kv);
    free(s->exact_value);
}

static char *concat(const char *a, const char *b)
{
    char *s = malloc(strlen(a) + strlen(b) + 1);
    if (s)
        sprintf(s, "%s%s", a, b);
    return s;
}

/* The index value of the filter's first declared key with an indexed value.
 * When the filter is that key alone with a string, true, false or null, a
 * thread matches exactly when its stored value's text is the filter's (both
 * compact as jansson writes them): s->exact, checked on the extra hash's
 * fields without building the object (a number's text does not decide: 3 and
 * 3.0 match). */
static int kv_of_where(const convo_backend *b, json_t *where, source *s)
{
    s->kv = NULL;
    const char *key;
    json_t *value;
    json_object_foreach(where, key, value) {
        int f = convo__rd_ix_field_of(b, key);
        if (f < 0 || json_is_object(value) || json_is_array(value))
            continue;
        char *text = json_dumps(value, JSON_ENCODE_ANY | JSON_COMPACT);
        if (!text)
            return CONVO_ENOMEM;
        s->kv = convo__rd_ix_kv(b, -1, b->ix_field[f], text, strlen(text));
        s->exact = json_object_size(where) == 1 && strchr("\"tfn", text[0]);
        s->exact_field = b->ix_field[f];
        s->exact_key = key;
        s->exact_value = text;
        return s->kv ? 0 : CONVO_ENOMEM;
    }
    return 0;
}

static int source_pick(const convo_backend *b, const convo_thread_list_opts *o, json_t *where,
                       source *s)
{
    memset(s, 0, sizeof *s);
    s->order = o->order;
    s->lex = o->order == CONVO_ORDER_ID;
    s->desc = s->lex ? o->reverse : !o->reverse;
    const char *kind = o->order == CONVO_ORDER_RECENT ? "r" : o->order == CONVO_ORDER_CREATED ? "c"
                                                                                           : "i";
    if (where && kv_of_where(b, where, s) != 0)
        return CONVO_ENOMEM;
    s->window = !b->cluster && o->order == CONVO_ORDER_RECENT;
    if (s->kv && b->cluster) { /* the value's sets in the 16 shards (layout 9) */
        int f = convo__rd_ix_field_of(b, s->exact_key);
        for (int i = 0; i < IX_SHARDS; i++, s->nkeys++) {
            char *kv = convo__rd_ix_kv(b, i, b->ix_field[f], s->exact_value,
                                       strlen(s->exact_value));
            s->keys[i] = kv ? concat(kv, kind) : NULL;
            free(kv);
            if (!s->keys[i])
                return CONVO_ENOMEM;
        }
        return 0;
    }
    if (s->kv) {
        s->nkeys = 1;
        return (s->keys[0] = concat(s->kv, kind)) ? 0 : CONVO_ENOMEM;
    }
    if (b->cluster) {
        for (int i = 0; i < IX_SHARDS; i++, s->nkeys++)
            if (!(s->keys[i] = concat(b->ix_shard[i], kind)))
                return CONVO_ENOMEM;
        return 0;
    }
    s->threads = s->lex;
    s->nkeys = 1;
    s->keys[0] = s->lex ? strdup(b->index_key) : concat(b->ix_prefix, kind);
    return s->keys[0] ? 0 : CONVO_ENOMEM;
}

/* < 0 when a comes before b in the listing. */
static int cand_cmp(const source *s, const cand *a, const cand *b)
{
    int c = a->score < b->score ? -1 : a->score > b->score ? 1 : strcmp(a->id, b->id);
    return s->desc ? -c : c;
}

static _Thread_local const source *sorting;

static int cand_sort(const void *a, const void *b)
{
    return cand_cmp(sorting, a, b);
}

/* Per shard, a merged batch reads k / shards + this many (see fetch()). */
#define SHARD_EXTRA 3

typedef struct cand_list {
    cand *c;
    size_t n, cap;
} cand_list;

static void cands_free(cand_list *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->c[i].id);
    free(l->c);
    *l = (cand_list){0};
}

/* borrow: the id stays the reply's (fetch() copies those it keeps) */
static int cand_add_id(cand_list *l, const redisReply *id, long long score, int borrow)
{
    if (id->type != REDIS_REPLY_STRING || id->len == 0 || memchr(id->str, '\0', id->len))
        return CONVO_ECORRUPT;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 64;
        cand *g = realloc(l->c, cap * sizeof *g);
        if (!g)
            return CONVO_ENOMEM;
        l->c = g;
        l->cap = cap;
    }
    if (!(l->c[l->n].id = borrow ? id->str : strndup(id->str, id->len)))
        return CONVO_ENOMEM;
    l->c[l->n++].score = score;
    return 0;
}

static int cand_push(cand_list *l, const redisReply *id, long long score)
{
    return cand_add_id(l, id, score, 0);
}

/* A score as the server writes it: the times are whole numbers of µs, read
 * without strtod (a sixth of a cluster page's client work when 16 shards
 * answer); anything else goes through strtod. */
static long long score_of(const redisReply *sc)
{
    long long v = 0;
    size_t i = sc->len > 0 && sc->str[0] == '-';
    if (sc->len > i && sc->len - i <= 18) {
        for (size_t j = i; j < sc->len && sc->str[j] >= '0' && sc->str[j] <= '9'; j++, i++)
            v = v * 10 + (sc->str[j] - '0');
        if (i == sc->len)
            return sc->str[0] == '-' ? -v : v;
    }
    return llround(strtod(sc->str, NULL));
}

/* The range commands of one key: [ties at the position's time,] the range. */
static size_t range_cmds(const source *s, const char *key, const position *p, size_t k,
                         cmd *cmds, char *buf)
{
    size_t n = 0;
    if (s->lex) {
        sprintf(buf, "(%s", p->set ? p->id : "");
        convo__rd_cmd_str(&cmds[0], s->desc ? "ZREVRANGEBYLEX" : "ZRANGEBYLEX");
        convo__rd_cmd_str(&cmds[0], key);
        convo__rd_cmd_str(&cmds[0], p->set ? buf : s->desc ? "+" : "-");
        convo__rd_cmd_str(&cmds[0], s->desc ? "-" : "+");
        convo__rd_cmd_str(&cmds[0], "LIMIT");
        convo__rd_cmd_num(&cmds[0], 0);
        convo__rd_cmd_num(&cmds[0], (long long)k);
        return 1;
    }
    const char *verb = s->desc ? "ZREVRANGEBYSCORE" : "ZRANGEBYSCORE";
    if (p->set) {
        convo__rd_cmd_str(&cmds[n], verb);
        convo__rd_cmd_str(&cmds[n], key);
        convo__rd_cmd_num(&cmds[n], p->time);
        convo__rd_cmd_num(&cmds[n], p->time);
        convo__rd_cmd_str(&cmds[n++], "WITHSCORES");
        sprintf(buf, "(%lld", p->time);
    }
    convo__rd_cmd_str(&cmds[n], verb);
    convo__rd_cmd_str(&cmds[n], key);
    convo__rd_cmd_str(&cmds[n], p->set ? buf : s->desc ? "+inf" : "-inf");
    convo__rd_cmd_str(&cmds[n], s->desc ? "-inf" : "+inf");
    convo__rd_cmd_str(&cmds[n], "WITHSCORES");
    convo__rd_cmd_str(&cmds[n], "LIMIT");
    convo__rd_cmd_num(&cmds[n], 0);
    convo__rd_cmd_num(&cmds[n++], (long long)k);
    return n;
}

/* Adds the members of a range reply (with scores unless lex); ties: only those
 * after the position. *got = how many the range gave. */
static int take_range(const source *s, const redisReply *r, const position *p, int ties,
                      cand_list *out, size_t *got)
{
    if (r->type == REDIS_REPLY_ERROR)
        return CONVO_EIO;
    if (r->type != REDIS_REPLY_ARRAY || (!s->lex && r->elements % 2))
        return CONVO_ECORRUPT;
    size_t step = s->lex ? 1 : 2;
    *got = r->elements / step;
    for (size_t i = 0; i < r->elements; i += step) {
        long long score = 0;
        if (!s->lex) {
            const redisReply *sc = r->element[i + 1];
            if (sc->type != REDIS_REPLY_STRING)
                return CONVO_ECORRUPT;
            score = score_of(sc);
        }
        const redisReply *m = r->element[i];
        if (ties && m->type == REDIS_REPLY_STRING) {
            size_t idlen = strlen(p->id), min = m->len < idlen ? m->len : idlen;
            int c = memcmp(m->str, p->id, min);
            c = c ? c : m->len < idlen ? -1 : m->len > idlen ? 1 : 0;
            if (s->desc ? c >= 0 : c <= 0)
                continue;
        }
        int rc = cand_add_id(out, m, score, 1);
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* The next k candidates after the position, in order, merged over the keys;
 * *more = some key may hold more after them. The commands extra[0..nx) go in
 * the same pipeline, after the ranges (a cluster's guessed rows), their
 * replies to xr. */
static int fetch(convo_backend *b, rconn *c, const source *s, const position *p, size_t k,
                 cand_list *out, int *more, cmd *extra, size_t nx, redisReply **xr,
                 convo_error *err)
{
    size_t idlen = p->set && p->id ? strlen(p->id) : 0;
    cmd *cmds = convo__rd_cmds_new(2 * IX_SHARDS + nx);
    redisReply **r = calloc(2 * IX_SHARDS + nx + 1, sizeof *r);
    size_t per[IX_SHARDS], n = 0;
    char *bufs = malloc(s->nkeys * (idlen + 32));
    int rc = bufs && cmds && r ? 0 : convo__rd_oom(err);
    /* over shards, m each (a user's newest are spread over them): where a
     * shard gave m, what comes after its m-th may be missing, so only the
     * candidates up to the first such m-th are complete (the cut below) */
    size_t m = s->nkeys > 1 ? (k + s->nkeys - 1) / s->nkeys + SHARD_EXTRA : k;
    cand bound = {NULL, 0};
    for (size_t i = 0; i < s->nkeys && rc == 0; i++) {
        per[i] = range_cmds(s, s->keys[i], p, m, &cmds[n], bufs + i * (idlen + 32));
        n += per[i];
    }
    for (size_t i = 0; i < n && rc == 0; i++)
        if (cmds[i].failed)
            rc = convo__rd_oom(err);
    for (size_t i = 0; i < nx && rc == 0; i++)
        cmds[n + i] = extra[i]; /* borrowed: extra keeps them */
    if (rc == 0 && (rc = convo__rd_pipeline(b, c, cmds, n + nx, r, err)) == 0)
        for (size_t i = 0; i < nx; i++) {
            xr[i] = r[n + i];
            r[n + i] = NULL;
        }
    *more = 0;
    cand_list all = {0};
    for (size_t i = 0, at = 0; i < s->nkeys && rc == 0; at += per[i], i++) {
        size_t got = 0;
        if (per[i] == 2)
            rc = take_range(s, r[at], p, 1, &all, &got);
        if (rc == 0)
            rc = take_range(s, r[at + per[i] - 1], p, 0, &all, &got);
        if (rc == 0 && got >= m && m < k && (!bound.id || cand_cmp(s, &all.c[all.n - 1], &bound) < 0))
            bound = all.c[all.n - 1]; /* the id is the reply's */
        if (rc == CONVO_EIO)
            rc = convo__rd_reply_error(r[at + per[i] - 1]->type == REDIS_REPLY_ERROR
                                           ? r[at + per[i] - 1] : r[at], err);
        else if (rc == CONVO_ECORRUPT)
            rc = convo__error(err, rc, NULL, "redis: bad thread index entry");
        else if (rc == CONVO_ENOMEM)
            rc = convo__rd_oom(err);
        if (got >= m)
            *more = 1;
    }
    if (rc == 0) {
        sorting = s;
        if (all.n > 1) /* all.c is NULL when no set had a candidate: qsort must not see it */
            qsort(all.c, all.n, sizeof *all.c, cand_sort);
        for (size_t i = 0; bound.id && i < all.n; i++)
            if (cand_cmp(s, &all.c[i], &bound) > 0) {
                all.n = i; /* after the cut: the next batch reads them */
                break;
            }
        if (all.n > k) {
            *more = 1;
            all.n = k;
        }
        for (size_t i = 0; i < all.n && rc == 0; i++) /* the ids kept, copied from the replies */
            if (!(all.c[i].id = strdup(all.c[i].id))) {
                for (size_t j = 0; j < i; j++)
                    free(all.c[j].id);
                rc = convo__rd_oom(err);
            }
    }
    if (rc == 0) {
        *out = all;
    } else {
        free(all.c); /* its ids are the replies' */
        all = (cand_list){0};
    }
    if (r)
        convo__rd_replies_free(r, n);
    for (size_t i = 0; cmds && i < n; i++)
        convo__rd_cmd_free(&cmds[i]);
    free(cmds);
    free(r);
    free(bufs);
    return rc;
}

/* ---- rows ---- */

typedef struct repair {
    const char *id;
    int gone;     /* no thread (or no times): its entries go, then reindexed */
    int kv_stale; /* its value is not the source's any more */
} repair;

/* The stored value of the source's key in an HGETALL reply of the extra hash
 * is not the source's value (a stale entry of a cluster). */
static int kv_differs(const convo_backend *b, const source *s, const redisReply *all)
{
    for (size_t i = 0; all->type == REDIS_REPLY_ARRAY && i + 1 < all->elements; i += 2) {
        const redisReply *f = all->element[i], *v = all->element[i + 1];
        size_t plen = strlen(b->ix_prefix) + 1;
        if (f->type != REDIS_REPLY_STRING || strncmp(s->kv + plen, f->str, f->len) != 0)
            continue;
        const char *sp = v->type == REDIS_REPLY_STRING ? memchr(v->str, ' ', v->len) : NULL;
        if (!sp)
            return 1;
        for (size_t k = 0; k < b->ix_nkeys; k++) {
            if (strlen(b->ix_field[k]) != f->len || memcmp(b->ix_field[k], f->str, f->len))
                continue;
            char *kv = convo__rd_ix_kv(b, -1, b->ix_field[k], sp + 1,
                                       v->len - (size_t)(sp + 1 - v->str));
            int differs = !kv || strcmp(kv, s->kv) != 0;
            free(kv);
            if (!differs)
                return 0;
        }
    }
    return 1;
}

/* s->exact: the HGETALL reply holds the filter's field with its value text
 * (stored as "ORDINAL JSON"). */
static int exact_match(const source *s, const redisReply *all)
{
    size_t flen = strlen(s->exact_field), vlen = strlen(s->exact_value);
    for (size_t i = 0; all->type == REDIS_REPLY_ARRAY && i + 1 < all->elements; i += 2) {
        const redisReply *f = all->element[i], *v = all->element[i + 1];
        if (f->type != REDIS_REPLY_STRING || f->len != flen ||
            memcmp(f->str, s->exact_field, flen) != 0)
            continue;
        const char *sp = v->type == REDIS_REPLY_STRING ? memchr(v->str, ' ', v->len) : NULL;
        return sp && (size_t)(v->str + v->len - sp - 1) == vlen &&
               memcmp(sp + 1, s->exact_value, vlen) == 0;
    }
    return 0;
}

typedef struct list_state {
    convo_backend *b;
    rconn *c;
    const convo_thread_list_opts *o;
    json_t *where;
    const source *s;
    convo_thread_page *p;
    repair *fix;
    size_t nfix;
} list_state;

/* Checks one candidate against its rows (r[R_*]) and adds it to the page. */
static int take_row(list_state *st, const cand *cd, redisReply **r)
{
    const source *s = st->s;
    const redisReply *m = r[R_META];
    long long created, updated;
    if (strncmp(cd->id, STAGING_PREFIX, strlen(STAGING_PREFIX)) == 0)
        return 0;
    if (m->type == REDIS_REPLY_ERROR || r[R_LEN]->type == REDIS_REPLY_ERROR)
        return convo__rd_reply_error(m->type == REDIS_REPLY_ERROR ? m : r[R_LEN], NULL);
    /* the window: updated_at is what window_time() made of u (cd->score) */
    if (m->type != REDIS_REPLY_ARRAY || m->elements != 3 ||
        convo__rd_parse_time(m->element[0], &created) ||
        (s->window ? (updated = cd->score, 0) : convo__rd_parse_time(m->element[1], &updated))) {
        st->fix[st->nfix++] = (repair){cd->id, 1, s->kv != NULL};
        return 0;
    }
    long long t = s->order == CONVO_ORDER_RECENT ? updated : created;
    if (!s->lex && t != cd->score) { /* written since the range was read, or stale */
        if (st->b->cluster)
            st->fix[st->nfix++] = (repair){cd->id, 0, 0};
        return 0;
    }
    char *extra = NULL;
    size_t extra_len = 0;
    int rc = 0;
    if (r[R_EXTRA] && (rc = convo__rd_extra_text(st->b, r[R_EXTRA], &extra, &extra_len)) != 0)
        return rc;
    if (st->where && !(s->exact ? exact_match(s, r[R_EXTRA])
                                : convo__json_contains(extra, extra_len, st->where))) {
        if (s->kv && kv_differs(st->b, s, r[R_EXTRA]))
            st->fix[st->nfix++] = (repair){cd->id, 0, 1};
        free(extra);
        return 0;
    }
    const char *last = NULL;
    size_t last_len = 0;
    if (st->o->with_last_message && r[R_LAST]->type != REDIS_REPLY_NIL)
        rc = convo__rd_record_bytes(r[R_LAST], &last, &last_len);
    if (rc == 0 && convo__thread_page_add_row(st->p, cd->id, strlen(cd->id), created, updated,
                                              r[R_LEN]->integer, st->o->with_extra ? extra : NULL,
                                              extra_len, last, last_len) != 0)
        rc = CONVO_ENOMEM;
    free(extra);
    return rc;
}

/* A row's commands, appended at q; at[R_*] gets each one's index in q
 * (SIZE_MAX for one not sent). Returns how many. */
static size_t row_cmds(const list_state *st, const thread_keys *tk, cmd *q, size_t *at)
{
    size_t n = 0;
    at[R_META] = n;
    convo__rd_cmd_str(&q[n], "HMGET");
    convo__rd_cmd_add(&q[n], tk->k[K_META], tk->len[K_META]);
    convo__rd_cmd_add(&q[n], "c", 1);
    convo__rd_cmd_add(&q[n], "u", 1);
    convo__rd_cmd_add(&q[n++], "p", 1);
    at[R_LEN] = n;
    convo__rd_cmd_str(&q[n], "LLEN");
    convo__rd_cmd_add(&q[n++], tk->k[K_MSGS], tk->len[K_MSGS]);
    at[R_EXTRA] = at[R_LAST] = SIZE_MAX;
    if (st->where || st->o->with_extra) {
        at[R_EXTRA] = n;
        convo__rd_cmd_str(&q[n], "HGETALL");
        convo__rd_cmd_add(&q[n++], tk->k[K_EXTRA], tk->len[K_EXTRA]);
    }
    if (st->o->with_last_message || st->s->window) { /* the window: its time */
        at[R_LAST] = n;
        convo__rd_cmd_str(&q[n], "LINDEX");
        convo__rd_cmd_add(&q[n], tk->k[K_MSGS], tk->len[K_MSGS]);
        convo__rd_cmd_add(&q[n++], "-1", 2);
    }
    return n;
}

/* Adds the candidates of l that belong, r[i * R_PER ..] being each one's rows. */
static int take_rows(list_state *st, const cand_list *l, redisReply **r, size_t want,
                     convo_error *err)
{
    repair *fix = realloc(st->fix, (st->nfix + l->n + 1) * sizeof *fix);
    if (!fix)
        return convo__rd_oom(err);
    st->fix = fix;
    int rc = 0;
    for (size_t i = 0; i < l->n && rc == 0 && convo_thread_page_count(st->p) < want; i++) {
        rc = take_row(st, &l->c[i], &r[i * R_PER]);
        if (rc == CONVO_ECORRUPT)
            rc = convo__error(err, rc, NULL, "redis: thread %s could not be decoded",
                              l->c[i].id);
        else if (rc == CONVO_ENOMEM)
            rc = convo__rd_oom(err);
        else if (rc != 0)
            rc = convo__error(err, rc, NULL, "redis: reading thread %s failed", l->c[i].id);
    }
    return rc;
}

typedef int (*rows_fn)(list_state *st, cand_list *l, redisReply **r, size_t want, void *ctx,
                       convo_error *err);

static int take_rows_fn(list_state *st, cand_list *l, redisReply **r, size_t want, void *ctx,
                        convo_error *err)
{
    (void)ctx;
    return take_rows(st, l, r, want, err);
}

/* A row's HGETALL extra (one server, layout 8) seen as the rest reads a row:
 * its c, u and p as the reply of HMGET meta c u p on a cluster, the whole
 * hash as the extra's (the extra text passes over c, u and p). */
typedef struct meta_view {
    redisReply arr, nil;
    redisReply *el[3];
} meta_view;

static void meta_view_make(meta_view *v, redisReply *all)
{
    v->nil = (redisReply){.type = REDIS_REPLY_NIL};
    v->el[0] = v->el[1] = v->el[2] = &v->nil;
    v->arr = (redisReply){.type = REDIS_REPLY_ARRAY, .elements = 3, .element = v->el};
    for (size_t i = 0; i + 1 < all->elements; i += 2) {
        const redisReply *f = all->element[i];
        if (f->type != REDIS_REPLY_STRING || f->len != 1)
            continue;
        int k = f->str[0] == 'c' ? 0 : f->str[0] == 'u' ? 1 : f->str[0] == 'p' ? 2 : -1;
        if (k >= 0)
            v->el[k] = all->element[i + 1];
    }
}

/* r[i * R_PER ..] of one server's rows made as the cluster's are. */
static void rows_viewed(const list_state *st, size_t n, redisReply **r, meta_view *views)
{
    int extra = st->where || st->o->with_extra;
    for (size_t i = 0; i < n; i++) {
        redisReply **row = &r[i * R_PER], *all = row[R_META];
        row[R_EXTRA] = extra ? all : NULL;
        if (all->type != REDIS_REPLY_ARRAY)
            continue; /* an error: take_row() reports it */
        meta_view_make(&views[i], all);
        row[R_META] = &views[i].arr;
    }
}

/* The rows of l on one server: one request written at once (rows.c), the
 * replies in arena; at[] as read_rows() has it, *nf the number of commands. */
static int rows_one_server(list_state *st, const cand_list *l, size_t *at, redisReply **rr,
                           rd_arena *arena, size_t *nf, convo_error *err)
{
    const char **ids = malloc((l->n + 1) * sizeof *ids);
    rd_rows_req q = {.at = at};
    for (size_t i = 0; ids && i < l->n; i++)
        ids[i] = l->c[i].id;
    int rc = ids && convo__rd_rows_resp(st->b, ids, l->n,
                                        st->o->with_last_message || st->s->window, &q) == 0
                 ? 0
                 : convo__rd_oom(err);
    free(ids);
    if (rc != 0)
        return rc;
    *nf = q.ncmds;
    rc = convo__rd_send_raw(st->b, st->c, q.buf, q.len, err);
    free(q.buf);
    return rc ? rc : convo__rd_replies_arena(st->b, st->c, *nf, rr, arena, err);
}

/* The rows of l on a cluster, routed command by command. */
static int rows_cluster(list_state *st, const cand_list *l, size_t *at, redisReply **rr,
                        size_t *nf, convo_error *err)
{
    size_t n = l->n;
    cmd *q = convo__rd_cmds_new(n * R_PER);
    thread_keys *tk = calloc(n, sizeof *tk);
    int rc = q && tk ? 0 : convo__rd_oom(err);
    *nf = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (convo__rd_keys_row(st->b, l->c[i].id, &tk[i]) != 0) {
            rc = convo__rd_oom(err);
            break;
        }
        size_t first = *nf;
        *nf += row_cmds(st, &tk[i], &q[*nf], &at[i * R_PER]);
        for (size_t j = 0; j < R_PER; j++)
            at[i * R_PER + j] += at[i * R_PER + j] == SIZE_MAX ? 0 : first;
        for (size_t j = first; j < *nf; j++)
            if (q[j].failed)
                rc = convo__rd_oom(err);
    }
    if (rc == 0)
        rc = convo__rd_pipeline(st->b, st->c, q, *nf, rr, err);
    for (size_t i = 0; q && i < *nf; i++)
        convo__rd_cmd_free(&q[i]);
    for (size_t i = 0; tk && i < n; i++)
        free(tk[i].buf);
    free(q);
    free(tk);
    return rc;
}

/* Hands the rows r of l (r[i * R_PER ..], NULL where not read) to take (by
 * default take_rows: adds those that belong); on one server a row's R_META
 * is its HGETALL extra, seen as the cluster's rows first. */
static int rows_take(list_state *st, cand_list *l, redisReply **r, size_t want, rows_fn take,
                     void *ctx, convo_error *err)
{
    meta_view *views = st->b->cluster ? NULL : calloc(l->n + 1, sizeof *views);
    if (!st->b->cluster && !views)
        return convo__rd_oom(err);
    if (views)
        rows_viewed(st, l->n, r, views);
    int rc = (take ? take : take_rows_fn)(st, l, r, want, ctx, err);
    free(views);
    return rc;
}

/* Reads the rows of a batch in one round trip and hands them to take. */
static int read_rows(list_state *st, cand_list *l, size_t want, rows_fn take, void *ctx,
                     convo_error *err)
{
    size_t n = l->n, per = R_PER, nf = 0;
    size_t *at = calloc(n * per, sizeof *at);
    redisReply **r = calloc(n * per, sizeof *r), **rr = calloc(n * per, sizeof *rr);
    /* one server: the replies in one arena (arena.c), some 10 elements a row */
    rd_arena *arena = st->b->cluster ? NULL : convo__rd_arena_new();
    int rc = at && r && rr && (st->b->cluster || arena) ? 0 : convo__rd_oom(err);
    if (rc == 0)
        rc = arena ? rows_one_server(st, l, at, rr, arena, &nf, err)
                   : rows_cluster(st, l, at, rr, &nf, err);
    for (size_t i = 0; i < n * per && rc == 0; i++)
        r[i] = at[i] == SIZE_MAX ? NULL : rr[at[i]];
    if (rc == 0)
        rc = rows_take(st, l, r, want, take, ctx, err);
    if (rr && !arena)
        convo__rd_replies_free(rr, nf);
    convo__rd_arena_free(arena);
    free(at);
    free(r);
    free(rr);
    return rc;
}

/* ---- repairs ---- */

static void zrem(cmd *q, const char *key, const char *id)
{
    convo__rd_cmd_str(q, "ZREM");
    convo__rd_cmd_str(q, key);
    convo__rd_cmd_str(q, id);
}

/* Entries found wrong: those of a thread that is gone, or of a value that is
 * not its value any more, are removed; then each such thread is indexed again
 * from its own keys (nothing when it is gone), so a thread re-created between
 * our read and our ZREM gets its entries back. Best effort: a failure leaves
 * them to the next listing or sweep. */
static void repair_run(list_state *st)
{
    convo_backend *b = st->b;
    if (st->nfix == 0)
        return;
    if (st->s->threads) { /* P:threads: its own removal rule (index.c) */
        const char **gone = calloc(st->nfix, sizeof *gone);
        for (size_t i = 0; gone && i < st->nfix; i++)
            gone[i] = st->fix[i].id;
        if (gone)
            (void)convo__rd_index_remove(b, st->c, gone, st->nfix, NULL, NULL);
        free(gone);
        return;
    }
    cmd *q = calloc(st->nfix * 6, sizeof *q);
    redisReply **r = calloc(st->nfix * 6, sizeof *r);
    const char **ids = calloc(st->nfix, sizeof *ids);
    char *keys[6] = {NULL};
    size_t n = 0;
    if (!q || !r || !ids)
        goto done;
    const char *shard_or_global = b->cluster ? NULL : b->ix_prefix;
    for (size_t i = 0; i < st->nfix; i++) {
        const repair *f = &st->fix[i];
        ids[i] = f->id;
        int at = convo__rd_ix_shard(b, f->id);
        const char *base = shard_or_global ? shard_or_global : b->ix_shard[at];
        for (int k = 0; k < 6; k++) {
            free(keys[k]);
            keys[k] = NULL;
        }
        keys[0] = concat(base, "r");
        keys[1] = concat(base, "c");
        keys[2] = b->cluster ? concat(base, "i") : NULL;
        char *kv = !st->s->kv ? NULL
                   : b->cluster ? convo__rd_ix_kv(b, at, st->s->exact_field, st->s->exact_value,
                                                  strlen(st->s->exact_value))
                                : strdup(st->s->kv);
        if (kv) {
            keys[3] = concat(kv, "r");
            keys[4] = concat(kv, "c");
            keys[5] = concat(kv, "i");
        }
        free(kv);
        for (int k = 0; k < 6; k++)
            if (keys[k] && ((k < 3 && f->gone) || (k >= 3 && f->kv_stale)))
                zrem(&q[n++], keys[k], f->id);
        if (n > 0 && convo__rd_pipeline(b, st->c, q, n, r, NULL) == 0)
            convo__rd_replies_free(r, n);
        for (size_t k = 0; k < n; k++) {
            convo__rd_cmd_free(&q[k]);
            q[k] = (cmd){0};
        }
        n = 0;
    }
    (void)convo__rd_ix_reindex(b, st->c, ids, st->nfix, NULL);
done:
    for (int k = 0; k < 6; k++)
        free(keys[k]);
    free(q);
    free(r);
    free(ids);
}

/* ---- the activity order on one server (layout 6) ---- */

typedef struct window_batch {
    position *pos;
    int ended;       /* the set had nothing after the candidates */
    long long f;     /* the last candidate's score (list.lua) */
    int progressed;  /* a complete row after the position was met */
} window_batch;

/* A thread's updated_at from its rows: u, or its last record's created_at or
 * the time of its last rewrite inside the window (p, layout 7) when later, at
 * most u + WINDOW_US - 1 (docs/redis.md, "The activity window"); -1 when it
 * has no times (gone: repaired). A p that is not a time is no rewrite's. */
static long long window_time(const redisReply *meta, const redisReply *last)
{
    long long c, t, p;
    if (meta->type != REDIS_REPLY_ARRAY || meta->elements != 3 ||
        convo__rd_parse_time(meta->element[0], &c) || convo__rd_parse_time(meta->element[1], &t))
        return -1;
    long long at = convo__rd_record_time(last);
    if (convo__rd_parse_time(meta->element[2], &p) == 0 && p > at)
        at = p;
    if (at > t)
        t = at < t + WINDOW_US - 1 ? at : t + WINDOW_US - 1;
    return t;
}

/* (time, id) of c comes after the position in the listing's order. */
static int after_pos(const source *s, const position *p, const cand *c)
{
    cand at = {p->id, p->time};
    return !p->set || cand_cmp(s, &at, c) < 0;
}

/* The rows of list.lua's candidates: each one's updated_at, then those after
 * the position in (updated_at, id) order, as far as they are complete (every
 * thread not read comes after them); the position moves to the last one. */
static int window_take(list_state *st, cand_list *l, redisReply **r, size_t want, void *ctx,
                       convo_error *err)
{
    window_batch *w = ctx;
    const source *s = st->s;
    size_t *order = calloc(l->n + 1, sizeof *order), n = 0;
    repair *fix = realloc(st->fix, (st->nfix + l->n + 1) * sizeof *fix);
    if (fix)
        st->fix = fix;
    int rc = order && fix ? 0 : convo__rd_oom(err);
    for (size_t i = 0; i < l->n && rc == 0; i++) {
        redisReply **row = &r[i * R_PER];
        if (row[R_META]->type == REDIS_REPLY_ERROR)
            rc = convo__rd_reply_error(row[R_META], err);
        long long t = rc == 0 ? window_time(row[R_META], row[R_LAST]) : 0;
        if (t < 0)
            st->fix[st->nfix++] = (repair){l->c[i].id, 1, s->kv != NULL};
        l->c[i].score = t;
        if (t >= 0 && after_pos(s, w->pos, &l->c[i]))
            order[n++] = i;
    }
    for (size_t i = 1; i < n; i++) /* insertion sort: a batch is a few dozen */
        for (size_t j = i; j > 0 && cand_cmp(s, &l->c[order[j - 1]], &l->c[order[j]]) > 0; j--) {
            size_t x = order[j];
            order[j] = order[j - 1];
            order[j - 1] = x;
        }
    size_t last = SIZE_MAX;
    for (size_t i = 0; i < n && rc == 0 && convo_thread_page_count(st->p) < want; i++) {
        const cand *cd = &l->c[order[i]];
        if (!w->ended && (s->desc ? cd->score < w->f : cd->score >= w->f + WINDOW_US))
            break; /* a thread not read may come before it */
        rc = take_rows(st, &(cand_list){(cand *)cd, 1, 1}, &r[order[i] * R_PER], want, err);
        last = order[i];
    }
    if (rc == 0 && last != SIZE_MAX) {
        char *id = strdup(l->c[last].id);
        if (!id)
            rc = convo__rd_oom(err);
        free(w->pos->id);
        *w->pos = (position){1, l->c[last].score, id};
        w->progressed = 1;
    }
    free(order);
    return rc;
}

/* list.lua's answer read without a script (a script call and its three
 * redis.calls cost the server some 160,000 instructions a page, docs/redis.md
 * "The activity window"): in one MULTI, the first k - 1 members from the
 * position, then the k-th and WINDOW_EXTRA more with their scores (a score
 * costs the server a snprintf of a double, 4,400 instructions: only these
 * are asked for). When those reach past the k-th's window (or the set
 * ended), they hold every member list.lua would return: l, w->f and
 * w->ended become its answer and *done is set. Else (more than WINDOW_EXTRA
 * members within one window of the k-th) list.lua reads them. */
#define WINDOW_EXTRA 4

static int cand_add(cand_list *l, const redisReply *id, convo_error *err)
{
    int rc = cand_push(l, id, 0);
    if (rc == CONVO_ENOMEM)
        return convo__rd_oom(err);
    return rc ? convo__error(err, rc, NULL, "redis: bad thread index entry") : 0;
}

static void window_range(const source *s, cmd *q, const char *from, long long first,
                         long long count, int scores)
{
    convo__rd_cmd_str(q, s->desc ? "ZREVRANGEBYSCORE" : "ZRANGEBYSCORE");
    convo__rd_cmd_str(q, s->keys[0]);
    convo__rd_cmd_str(q, from);
    convo__rd_cmd_str(q, s->desc ? "-inf" : "+inf");
    if (scores)
        convo__rd_cmd_str(q, "WITHSCORES");
    convo__rd_cmd_str(q, "LIMIT");
    convo__rd_cmd_num(q, first);
    convo__rd_cmd_num(q, count);
}

/* The guess of a batch's candidates (rows.c): the ids the same batch found
 * last time, whose rows window_plain() reads right after the candidates, in
 * the same round trip. */
typedef struct guessed {
    char *ids;        /* each ending with '\0' (NULL: no guess) */
    size_t n;
    const char **id;  /* each one */
    size_t *at;       /* n * R_PER: its rows' replies in r (SIZE_MAX: none) */
    redisReply **rr;  /* the candidates' 4 replies, then the rows' */
    rd_arena *arena;  /* which holds them */
} guessed;

static void guessed_free(guessed *g)
{
    free(g->ids);
    free(g->id);
    free(g->at);
    free(g->rr);
    convo__rd_arena_free(g->arena);
    *g = (guessed){0};
}

/* The batch's key in the guess: direction, count, position and set. */
static size_t guess_key(const source *s, const position *pos, size_t k, char **out)
{
    size_t klen = strlen(s->keys[0]), ilen = pos->set ? strlen(pos->id) : 0;
    char *key = malloc(64 + klen + ilen);
    if (!key)
        return 0;
    int h = snprintf(key, 64, "%d %zu %d %lld ", s->desc, k, pos->set, pos->set ? pos->time : 0);
    memcpy(key + h, s->keys[0], klen + 1);
    if (ilen)
        memcpy(key + h + klen + 1, pos->id, ilen);
    *out = key;
    return (size_t)h + klen + 1 + ilen;
}

/* g gets the guess of the batch (none: g->n is 0); only out of memory fails. */
static int guess_take(list_state *st, const position *pos, size_t k, guessed *g,
                      convo_error *err)
{
    char *key = NULL;
    size_t klen = st->b->guess ? guess_key(st->s, pos, k, &key) : 0;
    int rc = st->b->guess && !key ? CONVO_ENOMEM : 0;
    if (rc == 0 && key)
        rc = convo__rd_guess_get(st->b->guess, key, klen, &g->ids, &g->n);
    free(key);
    if (rc == 0 && g->n > 0) {
        g->id = malloc(g->n * sizeof *g->id);
        g->at = malloc(g->n * R_PER * sizeof *g->at);
        rc = g->id && g->at ? 0 : CONVO_ENOMEM;
        for (size_t i = 0, at = 0; rc == 0 && i < g->n; i++) {
            g->id[i] = g->ids + at;
            at += strlen(g->id[i]) + 1;
        }
    }
    return rc ? convo__rd_oom(err) : 0;
}

/* The batch's candidates l (in order) are remembered as its guess. */
static void guess_keep(list_state *st, const position *pos, size_t k, const cand_list *l)
{
    char *key = NULL;
    const char **ids = st->b->guess ? malloc((l->n + 1) * sizeof *ids) : NULL;
    size_t klen = ids ? guess_key(st->s, pos, k, &key) : 0;
    for (size_t i = 0; key && i < l->n; i++)
        ids[i] = l->c[i].id;
    if (key) /* out of memory: not remembered, the next read takes two round trips */
        convo__rd_guess_put(st->b->guess, key, klen, ids, l->n);
    free(key);
    free(ids);
}

/* The candidates' MULTI q[4], then the guessed rows, in one round trip; r[4]
 * the MULTI's replies, g->rr[4 ..] the rows'. */
static int send_guessed(list_state *st, cmd *q, redisReply **r, guessed *g, convo_error *err)
{
    rd_rows_req req = {.at = g->at};
    if (convo__rd_rows_resp(st->b, g->id, g->n, 1, &req) != 0)
        return convo__rd_oom(err);
    g->arena = convo__rd_arena_new();
    g->rr = calloc(4 + req.ncmds, sizeof *g->rr);
    int rc = g->arena && g->rr ? 0 : convo__rd_oom(err);
    if (rc == 0)
        rc = convo__rd_send_with(st->b, st->c, q, 4, req.buf, req.len, err);
    free(req.buf);
    if (rc == 0)
        rc = convo__rd_replies_arena(st->b, st->c, 4 + req.ncmds, g->rr, g->arena, err);
    for (size_t i = 0; rc == 0 && i < g->n * R_PER; i++)
        g->at[i] += g->at[i] == SIZE_MAX ? 0 : 4;
    for (int i = 0; rc == 0 && i < 4; i++)
        r[i] = g->rr[i];
    return rc;
}

/* The rows of l from the guess (read after the candidates, as read_rows()
 * would), those of candidates not guessed read in one more round trip; *used
 * is set when the guess served (some candidate was guessed), *all when it
 * was l exactly. */
static int rows_guessed(list_state *st, cand_list *l, guessed *g, size_t want, window_batch *w,
                        int *used, int *all, convo_error *err)
{
    size_t n = l->n, j = 0, nm = 0, nf = 0;
    redisReply **r = calloc(n * R_PER + 1, sizeof *r), **rr = calloc(n * R_PER + 1, sizeof *rr);
    size_t *at = calloc(n * R_PER + 1, sizeof *at);
    cand_list miss = {calloc(n + 1, sizeof(cand)), 0, n}; /* the ids are l's */
    size_t *slot = calloc(n + 1, sizeof *slot);          /* a missed one's place in l */
    rd_arena *arena = convo__rd_arena_new();
    int rc = r && rr && at && miss.c && slot && arena ? 0 : convo__rd_oom(err);
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (j >= g->n || strcmp(g->id[j], l->c[i].id) != 0) /* mostly in the same order */
            for (j = 0; j < g->n && strcmp(g->id[j], l->c[i].id) != 0; j++)
                ;
        if (j == g->n) { /* not guessed: read below */
            slot[nm] = i;
            miss.c[nm++] = l->c[i];
            continue;
        }
        for (size_t x = 0; x < R_PER; x++)
            r[i * R_PER + x] = g->at[j * R_PER + x] == SIZE_MAX ? NULL : g->rr[g->at[j * R_PER + x]];
        j++;
    }
    miss.n = nm;
    *used = rc == 0 && nm < n;
    *all = *used && nm == 0 && n == g->n;
    if (*used && nm > 0)
        rc = rows_one_server(st, &miss, at, rr, arena, &nf, err);
    for (size_t k = 0; *used && rc == 0 && k < nm; k++)
        for (size_t x = 0; x < R_PER; x++)
            r[slot[k] * R_PER + x] = at[k * R_PER + x] == SIZE_MAX ? NULL : rr[at[k * R_PER + x]];
    if (*used && rc == 0)
        rc = rows_take(st, l, r, want, window_take, w, err);
    convo__rd_arena_free(arena);
    free(slot);
    free(miss.c);
    free(at);
    free(rr);
    free(r);
    return rc;
}

static int window_plain(list_state *st, const position *pos, size_t k, window_batch *w,
                        cand_list *l, int *done, guessed *g, convo_error *err)
{
    const source *s = st->s;
    cmd q[4] = {{0}};
    redisReply *r[4] = {NULL};
    char from[32];
    *done = 0;
    if (s->desc)
        snprintf(from, sizeof from, pos->set ? "%lld" : "+inf", pos->time);
    else
        snprintf(from, sizeof from, pos->set ? "(%lld" : "-inf", pos->time - WINDOW_US);
    convo__rd_cmd_str(&q[0], "MULTI");
    window_range(s, &q[1], from, 0, (long long)k - 1, 0);
    window_range(s, &q[2], from, (long long)k - 1, WINDOW_EXTRA + 1, 1);
    convo__rd_cmd_str(&q[3], "EXEC");
    int rc = 0;
    for (int i = 0; i < 4 && rc == 0; i++)
        if (q[i].failed)
            rc = convo__rd_oom(err);
    /* one server: the replies in one arena (arena.c), as the rows'; with a
     * guess, the guessed rows' too, read in the same round trip */
    rd_arena *arena = st->b->cluster || rc != 0 || g->n ? NULL : convo__rd_arena_new();
    if (rc == 0 && !st->b->cluster && !g->n && !arena)
        rc = convo__rd_oom(err);
    if (rc == 0 && g->n)
        rc = send_guessed(st, q, r, g, err);
    else if (rc == 0)
        rc = arena ? convo__rd_pipeline_arena(st->b, st->c, q, 4, r, arena, err)
                   : convo__rd_pipeline(st->b, st->c, q, 4, r, err);
    const redisReply *x = rc == 0 ? r[3] : NULL, *head = NULL, *tail = NULL;
    if (rc == 0 && x->type == REDIS_REPLY_ERROR)
        rc = convo__rd_reply_error(x, err);
    else if (rc == 0 && (x->type != REDIS_REPLY_ARRAY || x->elements != 2 ||
                         (head = x->element[0])->type != REDIS_REPLY_ARRAY ||
                         (tail = x->element[1])->type != REDIS_REPLY_ARRAY ||
                         tail->elements % 2 || head->elements > k - 1))
        rc = convo__error(err, CONVO_EIO, NULL, "redis: unexpected reply to a listing");
    size_t got = rc == 0 ? head->elements + tail->elements / 2 : 0, take = 0;
    for (size_t i = 0; rc == 0 && i < tail->elements / 2; i++) {
        const redisReply *e = tail->element[2 * i + 1];
        char *end = NULL;
        long long v = e->type == REDIS_REPLY_STRING ? strtoll(e->str, &end, 10) : 0;
        if (!end || *end != '\0')
            rc = convo__error(err, CONVO_EIO, NULL, "redis: bad score in a listing");
        else if (i == 0)
            w->f = v;
        else if (take == 0 && (s->desc ? v <= w->f - WINDOW_US : v >= w->f + WINDOW_US))
            take = i; /* the first past the k-th's window */
    }
    if (rc == 0) {
        w->ended = got < k;
        /* complete: the set ended, or a member past the window was read */
        *done = w->ended || take > 0 || tail->elements / 2 < WINDOW_EXTRA + 1;
        if (take == 0)
            take = tail->elements / 2;
    }
    for (size_t i = 0; rc == 0 && *done && i < head->elements + take; i++)
        rc = cand_add(l, i < head->elements ? head->element[i]
                                            : tail->element[2 * (i - head->elements)],
                      err);
    if (!arena && !g->n)
        convo__rd_replies_free(r, 4);
    convo__rd_arena_free(arena);
    for (int i = 0; i < 4; i++)
        convo__rd_cmd_free(&q[i]);
    return rc;
}

/* list.lua's candidates (one round trip): its answer {ended, f, members...}. */
static int window_script(list_state *st, const position *pos, size_t k, window_batch *w,
                         cand_list *l, convo_error *err)
{
    const source *s = st->s;
    cmd q = {0};
    redisReply *r = NULL;
    convo__rd_cmd_add(&q, "EVALSHA", 7);
    convo__rd_cmd_add(&q, "", 0);
    convo__rd_cmd_num(&q, 0);
    convo__rd_cmd_str(&q, s->keys[0]);
    convo__rd_cmd_str(&q, s->desc ? "desc" : "asc");
    if (pos->set)
        convo__rd_cmd_num(&q, pos->time);
    else
        convo__rd_cmd_add(&q, "", 0);
    convo__rd_cmd_num(&q, (long long)k);
    convo__rd_cmd_num(&q, WINDOW_US);
    int rc = q.failed ? convo__rd_oom(err)
                      : convo__rd_pipeline_script(st->b, st->c, &q, 1, 0, S_LIST, &r, err);
    convo__rd_cmd_free(&q);
    if (rc == 0 && r->type == REDIS_REPLY_ERROR)
        rc = convo__rd_reply_error(r, err);
    else if (rc == 0 && (r->type != REDIS_REPLY_ARRAY || r->elements < 2 ||
                         r->element[0]->type != REDIS_REPLY_INTEGER ||
                         r->element[1]->type != REDIS_REPLY_STRING))
        rc = convo__error(err, CONVO_EIO, NULL, "redis: unexpected reply to a listing");
    if (rc == 0) {
        w->ended = r->element[0]->integer != 0;
        w->f = strtoll(r->element[1]->str, NULL, 10);
    }
    for (size_t i = 2; rc == 0 && i < r->elements; i++)
        rc = cand_add(l, r->element[i], err);
    freeReplyObject(r);
    return rc;
}

/* One batch of a page in activity order on one server: the candidates (one
 * round trip: a plain range read, or list.lua when more than WINDOW_EXTRA
 * threads crowd the k-th's window), their rows (another), ordered here. *k
 * doubles when no row after the position was complete (more threads than k
 * scored between the position and its window), so a batch always moves on. */
static int batch_window(list_state *st, position *pos, size_t *k, size_t want, int *more,
                        convo_error *err)
{
    window_batch w = {pos, 0, 0, 0};
    cand_list l = {0};
    guessed g = {0};
    position at = {pos->set, pos->time, pos->id}; /* the batch's key (pos moves) */
    int done = 0, used = 0, all = 0;
    int rc = guess_take(st, pos, *k, &g, err);
    if (rc == 0 && (at.id = pos->id ? strdup(pos->id) : NULL) == NULL && pos->id)
        rc = convo__rd_oom(err);
    if (rc == 0)
        rc = window_plain(st, pos, *k, &w, &l, &done, &g, err);
    if (rc == 0 && !done)
        rc = window_script(st, pos, *k, &w, &l, err);
    if (rc == 0 && l.n > 0 && done && g.n)
        rc = rows_guessed(st, &l, &g, want, &w, &used, &all, err);
    if (rc == 0 && l.n > 0 && !used)
        rc = read_rows(st, &l, want, window_take, &w, err);
    if (rc == 0 && l.n > 0 && !all)
        guess_keep(st, &at, *k, &l);
    guessed_free(&g);
    free(at.id);
    if (rc == 0)
        repair_run(st);
    *more = rc == 0 && !w.ended;
    if (rc == 0 && !w.progressed)
        *k *= 2;
    cands_free(&l);
    return rc;
}

/* ---- the call ---- */

/* A cluster's batch with its guess (rows.c): the rows of the candidates the
 * same batch found last time are read in the candidates' round trip (over the
 * masters); when every candidate read was guessed they are its rows (*served),
 * else read_rows() reads them after, as without a guess. */
static int fetch_guessed(list_state *st, const position *pos, size_t k, size_t want,
                         cand_list *l, int *more, int *served, convo_error *err)
{
    guessed g = {0};
    int rc = guess_take(st, pos, k, &g, err);
    size_t nq = 0;
    cmd *q = rc == 0 && g.n ? convo__rd_cmds_new(g.n * R_PER) : NULL;
    redisReply **rr = rc == 0 && g.n ? calloc(g.n * R_PER + 1, sizeof *rr) : NULL;
    thread_keys *tk = rc == 0 && g.n ? calloc(g.n, sizeof *tk) : NULL;
    if (rc == 0 && g.n && (!q || !rr || !tk))
        rc = convo__rd_oom(err);
    for (size_t i = 0; rc == 0 && i < g.n; i++) {
        size_t first = nq;
        if (convo__rd_keys_row(st->b, g.id[i], &tk[i]) != 0) {
            rc = convo__rd_oom(err);
            break;
        }
        nq += row_cmds(st, &tk[i], &q[nq], &g.at[i * R_PER]);
        for (size_t x = 0; x < R_PER; x++)
            g.at[i * R_PER + x] += g.at[i * R_PER + x] == SIZE_MAX ? 0 : first;
        for (size_t j = first; j < nq; j++)
            if (q[j].failed)
                rc = convo__rd_oom(err);
    }
    *served = 0;
    if (rc == 0)
        rc = fetch(st->b, st->c, st->s, pos, k, l, more, q, nq, rr, err);
    redisReply **r = rc == 0 && g.n && l->n ? calloc(l->n * R_PER, sizeof *r) : NULL;
    int all = r != NULL && l->n == g.n;
    for (size_t i = 0, j = 0; r && i < l->n; i++, j++) {
        if (j >= g.n || strcmp(g.id[j], l->c[i].id) != 0) /* mostly in the same order */
            for (j = 0; j < g.n && strcmp(g.id[j], l->c[i].id) != 0; j++)
                ;
        if (j == g.n) { /* a candidate not guessed: all rows read after */
            free(r);
            r = NULL;
            all = 0;
            break;
        }
        for (size_t x = 0; x < R_PER; x++)
            r[i * R_PER + x] = g.at[j * R_PER + x] == SIZE_MAX ? NULL : rr[g.at[j * R_PER + x]];
    }
    if (r && (rc = rows_take(st, l, r, want, NULL, NULL, err)) == 0)
        *served = 1;
    if (rc == 0 && !all)
        guess_keep(st, pos, k, l);
    if (rr)
        convo__rd_replies_free(rr, nq);
    for (size_t i = 0; q && i < nq; i++)
        convo__rd_cmd_free(&q[i]);
    for (size_t i = 0; tk && i < g.n; i++)
        free(tk[i].buf);
    free(q);
    free(rr);
    free(tk);
    free(r);
    guessed_free(&g);
    return rc;
}

static int list_run(list_state *st, const convo_thread_cursor *after, convo_error *err)
{
    size_t want = st->o->limit + 1;
    position pos = {after != NULL, after ? after->time : 0, after ? strdup(after->id) : NULL};
    int rc = after && !pos.id ? convo__rd_oom(err) : 0, more = 1;
    int scan = st->where && !st->s->kv; /* a filter the index cannot serve */
    size_t grown = 0; /* a window batch's count, doubled until it moves on */
    while (rc == 0 && more && convo_thread_page_count(st->p) < want) {
        size_t need = want - convo_thread_page_count(st->p);
        size_t k = scan ? (need * 4 < 200 ? 200 : need * 4) : need < 8 ? 8 : need;
        cand_list l = {0};
        st->nfix = 0;
        if (st->s->window) {
            if (grown < k)
                grown = k;
            size_t was = grown;
            rc = batch_window(st, &pos, &grown, want, &more, err);
            if (grown == was)
                grown = 0;
            free(st->fix);
            st->fix = NULL;
            continue;
        }
        int served = 0;
        rc = st->b->cluster && st->b->guess
                 ? fetch_guessed(st, &pos, k, want, &l, &more, &served, err)
                 : fetch(st->b, st->c, st->s, &pos, k, &l, &more, NULL, 0, NULL, err);
        if (rc == 0 && l.n > 0 && !served)
            rc = read_rows(st, &l, want, NULL, NULL, err);
        if (rc == 0)
            repair_run(st);
        if (rc == 0 && l.n > 0) {
            free(pos.id);
            pos = (position){1, l.c[l.n - 1].score, l.c[l.n - 1].id};
            l.c[l.n - 1].id = NULL;
        }
        if (l.n == 0)
            more = 0;
        free(st->fix);
        st->fix = NULL;
        cands_free(&l);
    }
    free(pos.id);
    return rc;
}

int convo__rd_thread_list_ex(convo_backend *b, const convo_thread_list_opts *o, void *where,
                             const convo_thread_cursor *after, convo_thread_page **out,
                             convo_error *err)
{
    source s;
    convo_thread_page *p = convo__thread_page_new();
    int rc = p && source_pick(b, o, where, &s) == 0 ? 0 : convo__rd_oom(err);
    rconn *c;
    if (rc == 0 && (rc = convo__rd_acquire(b, &c, err)) == 0) {
        list_state st = {b, c, o, where, &s, p, NULL, 0};
        rc = list_run(&st, after, err);
        convo__rd_release(b, c);
    }
    if (p)
        source_free(&s);
    if (rc != 0) {
        convo_thread_page_free(p);
        return rc;
    }
    *out = p;
    return 0;
}
