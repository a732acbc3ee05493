/* memory.c — the in-process driver: every thread in RAM behind one mutex.
 * Each convo_open("memory:") is a separate, empty store that lives until
 * convo_close. Used for tests and for applications that need no persistence. */
#include "config.h"
#include <convo/driver.h>
#include <jansson.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct mem_msg {
    char *bytes; /* message bytes, NUL, role, NUL */
    size_t len;
    int64_t created_at;
} mem_msg;

typedef struct mem_thread {
    char *id;
    mem_msg *msgs;
    size_t count, cap;
    char *extra;       /* compact JSON object or NULL */
    json_t *idem;      /* idempotency key -> [first_seq, count] */
} mem_thread;

struct convo_backend {
    pthread_mutex_t lock;
    mem_thread **threads; /* sorted by id (strcmp, i.e. byte order) */
    size_t count, cap;
    convo_limits limits;
};

static void thread_free(mem_thread *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->count; i++)
        free(t->msgs[i].bytes);
    free(t->msgs);
    free(t->extra);
    json_decref(t->idem);
    free(t->id);
    free(t);
}

/* Index of id, or of where it would go, with *found set. */
static size_t find(convo_backend *b, const char *id, int *found)
{
    size_t lo = 0, hi = b->count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        int c = strcmp(b->threads[mid]->id, id);
        if (c == 0) {
            *found = 1;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = 0;
    return lo;
}

static mem_thread *lookup(convo_backend *b, const char *id)
{
    int found;
    size_t i = find(b, id, &found);
    return found ? b->threads[i] : NULL;
}

static int insert_new(convo_backend *b, const char *id, mem_thread **out)
{
    int found;
    size_t at = find(b, id, &found);
    if (b->count == b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 16;
        mem_thread **grown = realloc(b->threads, cap * sizeof *grown);
        if (!grown)
            return CONVO_ENOMEM;
        b->threads = grown;
        b->cap = cap;
    }
    mem_thread *t = calloc(1, sizeof *t);
    if (!t || !(t->id = strdup(id)) || !(t->idem = json_object())) {
        thread_free(t);
        return CONVO_ENOMEM;
    }
    memmove(&b->threads[at + 1], &b->threads[at], (b->count - at) * sizeof *b->threads);
    b->threads[at] = t;
    b->count++;
    *out = t;
    return 0;
}

static void remove_thread(convo_backend *b, const char *id)
{
    int found;
    size_t at = find(b, id, &found);
    if (!found)
        return;
    thread_free(b->threads[at]);
    memmove(&b->threads[at], &b->threads[at + 1], (b->count - at - 1) * sizeof *b->threads);
    b->count--;
}

static int reserve(mem_thread *t, size_t n)
{
    if (t->count + n <= t->cap)
        return 0;
    size_t cap = t->cap ? t->cap : 16;
    while (cap < t->count + n)
        cap *= 2;
    mem_msg *m = realloc(t->msgs, cap * sizeof *m);
    if (!m)
        return CONVO_ENOMEM;
    t->msgs = m;
    t->cap = cap;
    return 0;
}

static int copy_msg(mem_msg *m, const char *bytes, size_t len, const char *role, int64_t at)
{
    size_t rlen = strlen(role);
    if (!(m->bytes = malloc(len + rlen + 2)))
        return CONVO_ENOMEM;
    memcpy(m->bytes, bytes, len);
    m->bytes[len] = '\0';
    memcpy(m->bytes + len + 1, role, rlen + 1);
    m->len = len;
    m->created_at = at;
    return 0;
}

static int mem_open(convo_backend **out, convo_url *url, const convo_limits *limits,
                    convo_error *err)
{
    if (url->rest[0] != '\0')
        return convo__error(err, CONVO_EINVAL, NULL, "memory: takes no path (got memory:%s)",
                            url->rest);
    int rc = convo__url_reject_rest(url, err);
    if (rc != 0)
        return rc;
    convo_backend *b = calloc(1, sizeof *b);
    if (!b)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    pthread_mutex_init(&b->lock, NULL);
    b->limits = *limits;
    *out = b;
    return 0;
}

static void mem_close(convo_backend *b)
{
    for (size_t i = 0; i < b->count; i++)
        thread_free(b->threads[i]);
    free(b->threads);
    pthread_mutex_destroy(&b->lock);
    free(b);
}

static int append_locked(convo_backend *b, const char *thread_id, const convo_message_in *msgs,
                         size_t n, const convo_append_opts *opts, convo_append_result *res,
                         convo_error *err)
{
    mem_thread *t = lookup(b, thread_id);
    if (t && opts->idempotency_key) {
        json_t *prior = json_object_get(t->idem, opts->idempotency_key);
        if (prior) {
            res->first_seq = json_integer_value(json_array_get(prior, 0));
            res->count = (size_t)json_integer_value(json_array_get(prior, 1));
            res->replayed = 1;
            return 0;
        }
    }
    int64_t length = t ? (int64_t)t->count : 0;
    if (opts->expected_length >= 0 && opts->expected_length != length)
        return convo__error(err, CONVO_ECONFLICT, NULL,
                            "thread has %lld messages, expected %lld", (long long)length,
                            (long long)opts->expected_length);
    if (!t && insert_new(b, thread_id, &t) != 0)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    if (reserve(t, n) != 0)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    int64_t now = convo__now_micros();
    for (size_t i = 0; i < n; i++) {
        if (copy_msg(&t->msgs[t->count + i], msgs[i].bytes, msgs[i].len, msgs[i].role, now)) {
            while (i-- > 0) /* all or nothing */
                free(t->msgs[t->count + i].bytes);
            if (t->count == 0 && !t->extra)
                remove_thread(b, thread_id);
            return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
        }
    }
    if (opts->idempotency_key &&
        json_object_set_new(t->idem, opts->idempotency_key,
                            json_pack("[II]", (json_int_t)length, (json_int_t)n)) != 0) {
        for (size_t i = 0; i < n; i++)
            free(t->msgs[t->count + i].bytes);
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    }
    t->count += n;
    res->first_seq = length;
    res->count = n;
    res->replayed = 0;
    return 0;
}

static int mem_append(convo_backend *b, const char *thread_id, const convo_message_in *msgs,
                      size_t n, const convo_append_opts *opts, convo_append_result *res,
                      convo_error *err)
{
    pthread_mutex_lock(&b->lock);
    int rc = append_locked(b, thread_id, msgs, n, opts, res, err);
    pthread_mutex_unlock(&b->lock);
    return rc;
}

static int load_locked(convo_backend *b, const char *thread_id, const convo_load_opts *opts,
                       convo_history *h, convo_error *err)
{
    mem_thread *t = lookup(b, thread_id);
    if (!t)
        return convo__error(err, CONVO_ENOTFOUND, NULL, "thread not found");
    int64_t from, to;
    convo__load_range(opts, (int64_t)t->count, &from, &to);
    convo__history_set_length(h, (int64_t)t->count);
    if (convo__history_reserve(h, (size_t)(to - from)) != 0)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    for (int64_t i = from; i < to; i++) {
        mem_msg *m = &t->msgs[i];
        if (convo__history_add(h, m->bytes, m->len, m->bytes + m->len + 1, i, m->created_at))
            return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    }
    if (opts->with_extra && t->extra &&
        convo__history_set_extra(h, t->extra, strlen(t->extra)) != 0)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    return 0;
}

static int mem_load(convo_backend *b, const char *thread_id, const convo_load_opts *opts,
                    convo_history **out, convo_error *err)
{
    convo_history *h = convo__history_new();
    if (!h)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    pthread_mutex_lock(&b->lock);
    int rc = load_locked(b, thread_id, opts, h, err);
    pthread_mutex_unlock(&b->lock);
    if (rc != 0) {
        convo_history_free(h);
        return rc;
    }
    *out = h;
    return 0;
}

static int mem_save_extra(convo_backend *b, const char *thread_id, const char *patch,
                          void *patch_obj, convo_error *err)
{
    pthread_mutex_lock(&b->lock);
    mem_thread *t = lookup(b, thread_id);
    char *merged;
    size_t len;
    int rc = convo__extra_merge(t ? t->extra : NULL, t && t->extra ? strlen(t->extra) : 0, patch,
                                b->limits.max_extra_bytes, &merged, &len, err);
    if (rc == 0 && !t && (rc = insert_new(b, thread_id, &t)) != 0) {
        free(merged);
        rc = convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    }
    if (rc == 0) {
        free(t->extra);
        t->extra = merged;
    }
    pthread_mutex_unlock(&b->lock);
    return rc;
}

static int mem_thread_delete(convo_backend *b, const char *thread_id, convo_error *err)
{
    pthread_mutex_lock(&b->lock);
    int found;
    find(b, thread_id, &found);
    if (found)
        remove_thread(b, thread_id);
    pthread_mutex_unlock(&b->lock);
    return found ? 0 : convo__error(err, CONVO_ENOTFOUND, NULL, "thread not found");
}

static int mem_thread_list(convo_backend *b, const char *after, size_t limit,
                           convo_thread_page **out, convo_error *err)
{
    convo_thread_page *p = convo__thread_page_new();
    if (!p)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    int rc = 0;
    pthread_mutex_lock(&b->lock);
    int found;
    size_t i = after ? find(b, after, &found) : 0;
    if (after && found)
        i++;
    for (; i < b->count && convo_thread_page_count(p) < limit && rc == 0; i++)
        rc = convo__thread_page_add(p, b->threads[i]->id, strlen(b->threads[i]->id));
    if (rc == 0 && i < b->count)
        rc = convo__thread_page_set_next(p, b->threads[i - 1]->id);
    pthread_mutex_unlock(&b->lock);
    if (rc != 0) {
        convo_thread_page_free(p);
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    }
    *out = p;
    return 0;
}

static int fork_locked(convo_backend *b, const char *src, const char *dst, int64_t upto,
                       convo_error *err)
{
    mem_thread *s = lookup(b, src);
    if (!s)
        return convo__error(err, CONVO_ENOTFOUND, NULL, "source thread not found");
    if (lookup(b, dst))
        return convo__error(err, CONVO_ECONFLICT, NULL, "destination thread already exists");
    if (upto > (int64_t)s->count)
        return convo__error(err, CONVO_EINVAL, NULL, "fork upto %lld is past the end (%zu)",
                            (long long)upto, s->count);
    size_t n = upto < 0 ? s->count : (size_t)upto;
    mem_thread *d;
    if (insert_new(b, dst, &d) != 0 || reserve(d, n) != 0 ||
        (s->extra && !(d->extra = strdup(s->extra)))) {
        remove_thread(b, dst);
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        mem_msg *m = &s->msgs[i];
        if (copy_msg(&d->msgs[i], m->bytes, m->len, m->bytes + m->len + 1, m->created_at)) {
            remove_thread(b, dst);
            return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
        }
        d->count++;
    }
    return 0;
}

static int mem_thread_fork(convo_backend *b, const char *src, const char *dst, int64_t upto,
                           convo_error *err)
{
    pthread_mutex_lock(&b->lock);
    int rc = fork_locked(b, src, dst, upto, err);
    pthread_mutex_unlock(&b->lock);
    return rc;
}

static const char *const mem_schemes[] = {"memory", NULL};

const convo_driver convo_driver_memory = {
    .version = CONVO_DRIVER_VERSION,
    .name = "memory",
    .schemes = mem_schemes,
    .open = mem_open,
    .close = mem_close,
    .append = mem_append,
    .load = mem_load,
    .save_extra = mem_save_extra,
    .thread_delete = mem_thread_delete,
    .thread_list = mem_thread_list,
    .thread_fork = mem_thread_fork,
};
