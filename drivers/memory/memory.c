/* memory.c — the in-process driver: every thread in RAM behind one mutex.
 * Each convo_open("memory:") is a separate, empty store that lives until
 * convo_close. Used for tests and for applications that need no persistence. */
#include "memory_int.h"
#include <stdlib.h>
#include <string.h>

static void write_clear(mem_write *w)
{
    free(w->task_id);
    free(w->task_path);
    free(w->channel);
    free(w->type);
    free(w->bytes);
}

void convo__mem_checkpoint_clear(mem_checkpoint *c)
{
    free(c->ns);
    free(c->id);
    free(c->parent_id);
    free(c->metadata);
    free(c->body_type);
    free(c->body);
    for (size_t i = 0; i < c->nchannels; i++) {
        free(c->channels[i]);
        free(c->versions[i]);
    }
    free(c->channels);
    free(c->versions);
    for (size_t i = 0; i < c->nwrites; i++)
        write_clear(&c->writes[i]);
    free(c->writes);
    memset(c, 0, sizeof *c);
}

void convo__mem_blob_clear(mem_blob *b)
{
    free(b->ns);
    free(b->channel);
    free(b->version);
    free(b->type);
    free(b->bytes);
}

static void thread_free(mem_thread *t)
{
    if (!t)
        return;
    for (size_t i = 0; i < t->ncps; i++)
        convo__mem_checkpoint_clear(&t->cps[i]);
    free(t->cps);
    for (size_t i = 0; i < t->nblobs; i++)
        convo__mem_blob_clear(&t->blobs[i]);
    free(t->blobs);
    convo__mem_lookup_free(t);
    for (size_t i = 0; i < t->count; i++)
        free(t->msgs[i].bytes);
    free(t->msgs);
    free(t->extra);
    free(t->index_slots);
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

mem_thread *convo__mem_lookup(convo_backend *b, const char *id)
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
    t->created_at = t->updated_at = convo__now_micros();
    memmove(&b->threads[at + 1], &b->threads[at], (b->count - at) * sizeof *b->threads);
    b->threads[at] = t;
    b->count++;
    *out = t;
    return 0;
}

void convo__mem_remove_thread(convo_backend *b, const char *id)
{
    int found;
    size_t at = find(b, id, &found);
    if (!found)
        return;
    mem_index_remove(b->index, &b->threads[at]->index_slots, id);
    thread_free(b->threads[at]);
    memmove(&b->threads[at], &b->threads[at + 1], (b->count - at - 1) * sizeof *b->threads);
    b->count--;
}

/* After a write that set t's updated_at; changed: as mem_index_touch. */
static void reindex(convo_backend *b, mem_thread *t, json_t *changed)
{
    mem_index_touch(b->index, &t->index_slots, t, t->id, changed, t->updated_at);
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
    if (mem_index_new(&b->index, limits->indexed_keys) != 0) {
        free(b);
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    }
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
    mem_index_free(b->index);
    pthread_mutex_destroy(&b->lock);
    free(b);
}

static int append_locked(convo_backend *b, const char *thread_id, const convo_message_in *msgs,
                         size_t n, const convo_append_opts *opts, convo_append_result *res,
                         convo_error *err)
{
    mem_thread *t = convo__mem_lookup(b, thread_id);
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
    int64_t generation = t ? t->generation : 0;
    if (opts->expected_generation >= 0 && opts->expected_generation != generation)
        return convo__error(err, CONVO_ECONFLICT, NULL,
                            "thread is at generation %lld, expected %lld",
                            (long long)generation, (long long)opts->expected_generation);
    int created = !t;
    if (created && insert_new(b, thread_id, &t) != 0)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    size_t copied = 0;
    if (reserve(t, n) != 0)
        goto nomem;
    int64_t now = convo__now_micros();
    for (; copied < n; copied++)
        if (copy_msg(&t->msgs[t->count + copied], msgs[copied].bytes, msgs[copied].len,
                     msgs[copied].role, now))
            goto nomem;
    if (opts->idempotency_key &&
        json_object_set_new(t->idem, opts->idempotency_key,
                            json_pack("[II]", (json_int_t)length, (json_int_t)n)) != 0)
        goto nomem;
    t->count += n;
    t->updated_at = now;
    reindex(b, t, NULL);
    res->first_seq = length;
    res->count = n;
    res->replayed = 0;
    return 0;
nomem: /* all or nothing: no message, and no thread the call created */
    while (copied-- > 0)
        free(t->msgs[t->count + copied].bytes);
    if (created)
        convo__mem_remove_thread(b, thread_id);
    return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
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
    mem_thread *t = convo__mem_lookup(b, thread_id);
    if (!t)
        return convo__error(err, CONVO_ENOTFOUND, NULL, "thread not found");
    int64_t from, to;
    convo__load_range(opts, (int64_t)t->count, &from, &to);
    convo__history_set_length(h, (int64_t)t->count);
    convo__history_set_generation(h, t->generation);
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
    mem_thread *t = convo__mem_lookup(b, thread_id);
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
        t->updated_at = convo__now_micros();
        reindex(b, t, patch_obj);
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
        convo__mem_remove_thread(b, thread_id);
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

int convo__mem_fork_locked(convo_backend *b, const char *src, const char *dst, int64_t upto,
                           int64_t expected_generation, convo_error *err)
{
    mem_thread *s = convo__mem_lookup(b, src);
    if (!s)
        return convo__error(err, CONVO_ENOTFOUND, NULL, "source thread not found");
    if (expected_generation >= 0 && s->generation != expected_generation)
        return convo__error(err, CONVO_ECONFLICT, NULL,
                            "source thread is at generation %lld, expected %lld",
                            (long long)s->generation, (long long)expected_generation);
    if (convo__mem_lookup(b, dst))
        return convo__error(err, CONVO_ECONFLICT, NULL, "destination thread already exists");
    if (upto > (int64_t)s->count)
        return convo__error(err, CONVO_EINVAL, NULL, "fork upto %lld is past the end (%zu)",
                            (long long)upto, s->count);
    size_t n = upto < 0 ? s->count : (size_t)upto;
    mem_thread *d;
    if (insert_new(b, dst, &d) != 0 || reserve(d, n) != 0 ||
        (s->extra && !(d->extra = strdup(s->extra)))) {
        convo__mem_remove_thread(b, dst);
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        mem_msg *m = &s->msgs[i];
        if (copy_msg(&d->msgs[i], m->bytes, m->len, m->bytes + m->len + 1, m->created_at)) {
            convo__mem_remove_thread(b, dst);
            return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
        }
        d->count++;
    }
    d->generation = s->generation;
    if (b->index && d->extra) {
        json_t *extra = json_loads(d->extra, 0, NULL);
        if (extra)
            reindex(b, d, extra);
        else
            mem_index_break(b->index); /* out of memory: pages scan from now on */
        json_decref(extra);
    }
    return 0;
}

static int mem_thread_fork(convo_backend *b, const char *src, const char *dst, int64_t upto,
                           int64_t expected_generation, convo_error *err)
{
    pthread_mutex_lock(&b->lock);
    int rc = convo__mem_fork_locked(b, src, dst, upto, expected_generation, err);
    pthread_mutex_unlock(&b->lock);
    return rc;
}

/* ---- checkpoints ---- */

char *convo__mem_xdup(const char *s, int *failed)
{
    char *c = s ? strdup(s) : NULL;
    if (s && !c)
        *failed = 1;
    return c;
}

void *convo__mem_xdupb(const void *b, size_t len, int *failed)
{
    void *c = malloc(len ? len : 1);
    if (!c)
        *failed = 1;
    else if (len)
        memcpy(c, b, len);
    return c;
}

/* Stores the values the snapshot brings that are not stored yet. */
static int put_blobs(mem_thread *t, const convo_checkpoint_in *cp)
{
    for (size_t i = 0; i < cp->nchannels; i++) {
        const convo_channel_in *c = &cp->channels[i];
        if (!c->value || convo__mem_find_blob(t, cp->checkpoint_ns, c->channel, c->version))
            continue;
        mem_blob *grown = realloc(t->blobs, (t->nblobs + 1) * sizeof *grown);
        if (!grown)
            return CONVO_ENOMEM;
        t->blobs = grown;
        int failed = 0;
        mem_blob b = {convo__mem_xdup(cp->checkpoint_ns, &failed), convo__mem_xdup(c->channel, &failed),
                      convo__mem_xdup(c->version, &failed), convo__mem_xdup(c->value->type, &failed),
                      convo__mem_xdupb(c->value->bytes, c->value->len, &failed), c->value->len};
        if (failed) { /* a half-copied blob kept would crash find_blob's strcmp later */
            convo__mem_blob_clear(&b);
            return CONVO_ENOMEM;
        }
        t->blobs[t->nblobs++] = b;
        convo__mem_lookup_added(t, 1);
    }
    return 0;
}

static int fill_cp(mem_checkpoint *m, const convo_checkpoint_in *cp)
{
    int failed = 0;
    m->ns = convo__mem_xdup(cp->checkpoint_ns, &failed);
    m->id = convo__mem_xdup(cp->checkpoint_id, &failed);
    m->parent_id = convo__mem_xdup(cp->parent_id, &failed);
    m->metadata = convo__mem_xdup(cp->metadata_json, &failed);
    m->body_type = convo__mem_xdup(cp->body.type, &failed);
    m->body = cp->body.type ? convo__mem_xdupb(cp->body.bytes, cp->body.len, &failed) : NULL;
    m->body_len = cp->body.len;
    m->log_length = cp->log_length;
    m->created_at = convo__now_micros();
    m->channels = calloc(cp->nchannels + 1, sizeof *m->channels);
    m->versions = calloc(cp->nchannels + 1, sizeof *m->versions);
    if (!m->channels || !m->versions)
        return CONVO_ENOMEM;
    for (size_t i = 0; i < cp->nchannels; i++) {
        m->channels[i] = convo__mem_xdup(cp->channels[i].channel, &failed);
        m->versions[i] = convo__mem_xdup(cp->channels[i].version, &failed);
        m->nchannels++;
    }
    return failed ? CONVO_ENOMEM : 0;
}

static int put_locked(convo_backend *b, const convo_checkpoint_in *cp)
{
    mem_thread *t = convo__mem_lookup(b, cp->thread_id);
    int rc = t ? 0 : insert_new(b, cp->thread_id, &t);
    mem_checkpoint fresh = {0};
    if (rc == 0)
        rc = put_blobs(t, cp);
    if (rc == 0)
        rc = fill_cp(&fresh, cp);
    mem_checkpoint *old = rc == 0 ? convo__mem_find_cp(t, cp->checkpoint_ns, cp->checkpoint_id) : NULL;
    if (rc == 0 && old) {
        /* same key: replace in place, keeping its place in the order and its writes */
        fresh.created_at = old->created_at;
        fresh.put_seq = old->put_seq;
        fresh.writes = old->writes;
        fresh.nwrites = old->nwrites;
        old->writes = NULL;
        old->nwrites = 0;
        convo__mem_checkpoint_clear(old);
        *old = fresh;
    } else if (rc == 0) {
        mem_checkpoint *grown = realloc(t->cps, (t->ncps + 1) * sizeof *grown);
        if (grown) {
            fresh.put_seq = ++b->put_seq;
            t->cps = grown;
            t->cps[t->ncps++] = fresh;
            convo__mem_lookup_added(t, 0);
        } else {
            rc = CONVO_ENOMEM;
        }
    }
    if (rc != 0) {
        convo__mem_checkpoint_clear(&fresh);
    } else {
        t->updated_at = convo__now_micros();
        reindex(b, t, NULL);
    }
    return rc;
}

static int mem_checkpoint_put(convo_backend *b, const convo_checkpoint_in *cp, convo_error *err)
{
    pthread_mutex_lock(&b->lock);
    int rc = put_locked(b, cp);
    pthread_mutex_unlock(&b->lock);
    return rc ? convo__error(err, rc, NULL, "out of memory") : 0;
}

/* Appends msgs at cp->expected_length and puts cp, the lock held: both or neither. */
static int put_log_locked(convo_backend *b, const convo_checkpoint_in *cp,
                          const convo_message_in *msgs, convo_error *err)
{
    convo_append_opts opts = CONVO_APPEND_OPTS_INIT;
    opts.expected_length = cp->expected_length;
    opts.expected_generation = cp->expected_generation;
    convo_append_result res;
    int rc = append_locked(b, cp->thread_id, msgs, cp->nmessages, &opts, &res, err);
    if (rc == 0 && (rc = put_locked(b, cp)) != 0) {
        mem_thread *t = convo__mem_lookup(b, cp->thread_id);
        for (size_t i = 0; i < cp->nmessages; i++) /* take the messages back */
            free(t->msgs[(size_t)res.first_seq + i].bytes);
        t->count = (size_t)res.first_seq;
        if (t->count == 0 && !t->extra && t->ncps == 0)
            convo__mem_remove_thread(b, cp->thread_id);
        rc = convo__error(err, rc, NULL, "out of memory");
    }
    return rc;
}

static int mem_checkpoint_put_log(convo_backend *b, const convo_checkpoint_in *cp,
                                  const convo_message_in *msgs, convo_error *err)
{
    pthread_mutex_lock(&b->lock);
    int rc = put_log_locked(b, cp, msgs, err);
    pthread_mutex_unlock(&b->lock);
    return rc;
}

static mem_write *find_write(mem_checkpoint *c, const char *task_id, int64_t idx);

/* A value of a put's parent becomes a reference when it still holds old_value.
 * Out of memory leaves it as it was (it still holds the same items). */
static void swap_locked(mem_thread *t, const char *ns, const convo_swap *w)
{
    mem_checkpoint *c = convo__mem_find_cp(t, ns, w->checkpoint_id);
    mem_write *x = c && w->task_id ? find_write(c, w->task_id, w->idx) : NULL;
    mem_blob *v = c && !w->task_id ? convo__mem_find_blob(t, ns, w->channel, w->version) : NULL;
    char **type = x ? &x->type : v ? &v->type : NULL;
    void **bytes = x ? &x->bytes : v ? &v->bytes : NULL;
    size_t *len = x ? &x->len : v ? &v->len : NULL;
    if (!type || !*type || strcmp(*type, w->old_value.type) != 0 || *len != w->old_value.len ||
        (*len && memcmp(*bytes, w->old_value.bytes, *len) != 0))
        return;
    int failed = 0;
    char *nt = convo__mem_xdup(w->new_value.type, &failed);
    void *nb = convo__mem_xdupb(w->new_value.bytes, w->new_value.len, &failed);
    if (failed) {
        free(nt);
        free(nb);
        return;
    }
    free(*type);
    free(*bytes);
    *type = nt, *bytes = nb, *len = w->new_value.len;
    if (c->log_length < w->log_length)
        c->log_length = w->log_length;
}

static int mem_checkpoint_put_refs(convo_backend *b, const convo_checkpoint_in *cp,
                                   const convo_message_in *msgs, size_t nmsgs,
                                   const convo_swap *swaps, size_t nswaps, convo_error *err)
{
    pthread_mutex_lock(&b->lock);
    mem_thread *t = convo__mem_lookup(b, cp->thread_id);
    int64_t generation = t ? t->generation : 0;
    int rc = 0;
    if (cp->expected_generation >= 0 && cp->expected_generation != generation)
        rc = convo__error(err, CONVO_ECONFLICT, NULL, "thread is at generation %lld, expected %lld",
                          (long long)generation, (long long)cp->expected_generation);
    else if (nmsgs)
        rc = put_log_locked(b, cp, msgs, err);
    else if ((rc = put_locked(b, cp)) != 0)
        rc = convo__error(err, rc, NULL, "out of memory");
    for (size_t i = 0; rc == 0 && i < nswaps; i++)
        swap_locked(convo__mem_lookup(b, cp->thread_id), cp->checkpoint_ns, &swaps[i]);
    pthread_mutex_unlock(&b->lock);
    return rc;
}

static mem_write *find_write(mem_checkpoint *c, const char *task_id, int64_t idx)
{
    for (size_t i = 0; i < c->nwrites; i++)
        if (c->writes[i].idx == idx && strcmp(c->writes[i].task_id, task_id) == 0)
            return &c->writes[i];
    return NULL;
}

static int put_writes_locked(mem_checkpoint *c, const char *task_id, const char *task_path,
                             const convo_write_in *writes, size_t n)
{
    mem_write *grown = realloc(c->writes, (c->nwrites + n) * sizeof *grown);
    if (!grown)
        return CONVO_ENOMEM;
    c->writes = grown;
    for (size_t i = 0; i < n; i++) {
        const convo_write_in *w = &writes[i];
        mem_write *old = find_write(c, task_id, w->idx);
        if (old && w->idx >= 0)
            continue; /* idempotent: the first write of (task, idx) stays */
        int failed = 0;
        mem_write fresh = {convo__mem_xdup(task_id, &failed), convo__mem_xdup(task_path, &failed),
                           convo__mem_xdup(w->channel, &failed), convo__mem_xdup(w->value.type, &failed), w->idx,
                           convo__mem_xdupb(w->value.bytes, w->value.len, &failed), w->value.len};
        if (failed) {
            write_clear(&fresh);
            return CONVO_ENOMEM;
        }
        if (old) {
            write_clear(old);
            *old = fresh;
        } else {
            c->writes[c->nwrites++] = fresh;
        }
    }
    return 0;
}

static int mem_checkpoint_put_writes(convo_backend *b, const char *thread_id, const char *ns,
                                     const char *checkpoint_id, const char *task_id,
                                     const char *task_path, const convo_write_in *writes,
                                     size_t n, convo_error *err)
{
    pthread_mutex_lock(&b->lock);
    mem_checkpoint *c = convo__mem_find_cp(convo__mem_lookup(b, thread_id), ns, checkpoint_id);
    int rc = c ? put_writes_locked(c, task_id, task_path, writes, n) : CONVO_ENOTFOUND;
    pthread_mutex_unlock(&b->lock);
    if (rc == CONVO_ENOTFOUND)
        return convo__error(err, rc, NULL, "checkpoint not found");
    return rc ? convo__error(err, rc, NULL, "out of memory") : 0;
}

static convo_checkpoint *export_cp(mem_thread *t, const mem_checkpoint *c)
{
    convo_checkpoint *cp = convo__checkpoint_new(t->id, c->ns, c->id, c->parent_id, c->metadata,
                                                 c->body_type, c->body, c->body_len,
                                                 c->log_length, c->created_at);
    for (size_t i = 0; cp && i < c->nchannels; i++) {
        mem_blob *v = convo__mem_find_blob(t, c->ns, c->channels[i], c->versions[i]);
        if (convo__checkpoint_add_channel(cp, c->channels[i], c->versions[i], v ? v->type : NULL,
                                          v ? v->bytes : NULL, v ? v->len : 0) != 0) {
            convo_checkpoint_free(cp);
            return NULL;
        }
    }
    for (size_t i = 0; cp && i < c->nwrites; i++) {
        const mem_write *w = &c->writes[i];
        if (convo__checkpoint_add_write(cp, w->task_id, w->task_path, w->idx, w->channel,
                                        w->type, w->bytes, w->len) != 0) {
            convo_checkpoint_free(cp);
            return NULL;
        }
    }
    if (cp)
        convo__checkpoint_finish(cp);
    return cp;
}

static int mem_checkpoint_get(convo_backend *b, const char *thread_id, const char *ns,
                              const char *checkpoint_id, convo_checkpoint **out, convo_error *err)
{
    pthread_mutex_lock(&b->lock);
    mem_thread *t = convo__mem_lookup(b, thread_id);
    mem_checkpoint *c = convo__mem_find_cp(t, ns, checkpoint_id);
    *out = c ? export_cp(t, c) : NULL;
    pthread_mutex_unlock(&b->lock);
    if (!c)
        return convo__error(err, CONVO_ENOTFOUND, NULL, "checkpoint not found");
    return *out ? 0 : convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
}

/* Adds the matching checkpoints of t put before number end, newest first,
 * until the set holds limit. */
static int list_thread(mem_thread *t, const convo_checkpoint_list_opts *o, void *filter,
                       uint64_t end, convo_checkpoint_set *set, convo_error *err)
{
    for (size_t i = t->ncps; i-- > 0;) {
        if (o->limit && convo_checkpoint_set_count(set) >= o->limit)
            break;
        mem_checkpoint *c = &t->cps[i];
        if (c->put_seq >= end)
            continue;
        if (o->checkpoint_ns && strcmp(c->ns, o->checkpoint_ns) != 0)
            continue;
        if (!convo__json_contains(c->metadata, strlen(c->metadata), filter))
            continue;
        convo_checkpoint *cp = export_cp(t, c);
        if (!cp || convo__checkpoint_set_add(set, cp) != 0)
            return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    }
    return 0;
}

static int list_locked(convo_backend *b, const convo_checkpoint_list_opts *o, void *filter,
                       convo_checkpoint_set *set, convo_error *err)
{
    uint64_t end = UINT64_MAX;
    if (o->before) {
        const mem_checkpoint *c = convo__mem_find_cp(convo__mem_lookup(b, o->before_thread_id), o->before_ns, o->before);
        if (!c)
            return convo__error(err, CONVO_ENOTFOUND, NULL, "checkpoint '%s' not found",
                                o->before);
        end = c->put_seq;
    }
    if (o->thread_id) {
        mem_thread *t = convo__mem_lookup(b, o->thread_id);
        return t ? list_thread(t, o, filter, end, set, err) : 0;
    }
    int rc = 0;
    for (size_t i = 0; i < b->count && rc == 0; i++)
        rc = list_thread(b->threads[i], o, filter, end, set, err);
    return rc;
}

static int mem_checkpoint_list(convo_backend *b, const convo_checkpoint_list_opts *o,
                               void *filter, convo_checkpoint_set **out, convo_error *err)
{
    convo_checkpoint_set *set = convo__checkpoint_set_new();
    if (!set)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    pthread_mutex_lock(&b->lock);
    int rc = list_locked(b, o, filter, set, err);
    pthread_mutex_unlock(&b->lock);
    if (rc != 0) {
        convo_checkpoint_set_free(set);
        return rc;
    }
    *out = set;
    return 0;
}

/* ---- measuring ---- */

static int64_t thread_bytes(const mem_thread *t)
{
    int64_t n = (int64_t)strlen(t->id) + (t->extra ? (int64_t)strlen(t->extra) : 0);
    for (size_t i = 0; i < t->count; i++)
        n += (int64_t)(t->msgs[i].len + strlen(t->msgs[i].bytes + t->msgs[i].len + 1) + 8);
    for (size_t i = 0; i < t->ncps; i++) {
        const mem_checkpoint *c = &t->cps[i];
        n += (int64_t)(strlen(c->id) + strlen(c->metadata) + c->body_len + 16);
        for (size_t j = 0; j < c->nchannels; j++)
            n += (int64_t)(strlen(c->channels[j]) + strlen(c->versions[j]));
        for (size_t j = 0; j < c->nwrites; j++)
            n += (int64_t)(c->writes[j].len + strlen(c->writes[j].channel) + 8);
    }
    for (size_t i = 0; i < t->nblobs; i++)
        n += (int64_t)(t->blobs[i].len + strlen(t->blobs[i].channel) + strlen(t->blobs[i].version));
    return n;
}

/* The payload bytes held (message, role, ids, values), not the allocator's overhead. */
static int mem_stored_bytes(convo_backend *b, int64_t *bytes, convo_error *err)
{
    pthread_mutex_lock(&b->lock);
    int64_t n = 0;
    for (size_t i = 0; i < b->count; i++)
        n += thread_bytes(b->threads[i]);
    pthread_mutex_unlock(&b->lock);
    *bytes = n;
    return 0;
}

/* ---- restoring a dump ---- */

static int import_locked(convo_backend *b, const char *thread_id, int64_t first_seq,
                         const convo_message_in *msgs, const int64_t *created_at, size_t n,
                         int64_t generation, int *skipped, convo_error *err)
{
    mem_thread *t = convo__mem_lookup(b, thread_id);
    int64_t length = t ? (int64_t)t->count : 0;
    *skipped = 0;
    int64_t current = t ? t->generation : 0;
    if (!(length == 0 && first_seq == 0) && current != generation)
        return convo__error(err, CONVO_ECONFLICT, NULL,
                            "thread %s is at generation %lld, the dump at %lld: its tail was "
                            "rewritten since it was imported", thread_id, (long long)current,
                            (long long)generation);
    if (length >= first_seq + (int64_t)n) {
        *skipped = 1;
        return 0;
    }
    if (length != first_seq)
        return convo__error(err, CONVO_ECONFLICT, NULL,
                            "thread has %lld messages, the dump continues at %lld",
                            (long long)length, (long long)first_seq);
    if ((!t && insert_new(b, thread_id, &t) != 0) || reserve(t, n) != 0)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        if (copy_msg(&t->msgs[t->count + i], msgs[i].bytes, msgs[i].len, msgs[i].role,
                     created_at[i])) {
            while (i-- > 0)
                free(t->msgs[t->count + i].bytes);
            return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
        }
    }
    t->count += n;
    t->generation = generation;
    return 0;
}

static int mem_thread_import(convo_backend *b, const char *thread_id, int64_t first_seq,
                             const convo_message_in *msgs, const int64_t *created_at, size_t n,
                             int64_t generation, int *skipped, convo_error *err)
{
    pthread_mutex_lock(&b->lock);
    int rc = import_locked(b, thread_id, first_seq, msgs, created_at, n, generation, skipped,
                           err);
    pthread_mutex_unlock(&b->lock);
    return rc;
}

/* ---- the tail rewrite ---- */

/* Removes the checkpoints (and their writes) whose log_length is above keep,
 * or, unless drop, names the first in a conflict. */
static int tail_checkpoints(mem_thread *t, int64_t keep, int drop, convo_error *err)
{
    size_t kept = 0;
    for (size_t i = 0; i < t->ncps; i++) {
        if (t->cps[i].log_length <= keep) {
            t->cps[kept++] = t->cps[i];
            continue;
        }
        if (!drop)
            return convo__error(err, CONVO_ECONFLICT, NULL,
                                "checkpoint %s (namespace '%s') refers to %lld messages; the "
                                "rewrite keeps %lld: nothing written (drop_checkpoints removes "
                                "such checkpoints)", t->cps[i].id, t->cps[i].ns,
                                (long long)t->cps[i].log_length, (long long)keep);
        convo__mem_checkpoint_clear(&t->cps[i]);
    }
    t->ncps = kept;
    convo__mem_lookup_stale(t);
    return 0;
}

static int rewrite_locked(convo_backend *b, const char *thread_id, int64_t keep,
                          const convo_message_in *msgs, size_t n, const convo_rewrite_opts *o,
                          convo_rewrite_result *res, convo_error *err)
{
    mem_thread *t = convo__mem_lookup(b, thread_id);
    if (!t)
        return convo__error(err, CONVO_ENOTFOUND, NULL, "thread not found");
    json_t *prior = o->idempotency_key ? json_object_get(t->idem, o->idempotency_key) : NULL;
    if (prior) {
        res->first_seq = json_integer_value(json_array_get(prior, 0));
        res->count = (size_t)json_integer_value(json_array_get(prior, 1));
        res->generation = t->generation;
        res->replayed = 1;
        return 0;
    }
    int64_t length = (int64_t)t->count;
    if ((o->expected_length >= 0 && o->expected_length != length) ||
        (o->expected_generation >= 0 && o->expected_generation != t->generation))
        return convo__error(err, CONVO_ECONFLICT, NULL,
                            "thread has %lld messages at generation %lld: not the expected tail",
                            (long long)length, (long long)t->generation);
    if (keep > length)
        return convo__error(err, CONVO_EINVAL, NULL, "keep %lld is past the %lld messages",
                            (long long)keep, (long long)length);
    /* everything that can fail before anything changes */
    for (size_t i = 0; !o->drop_checkpoints && i < t->ncps; i++)
        if (t->cps[i].log_length > keep)
            return tail_checkpoints(t, keep, 0, err);
    if ((size_t)keep + n > t->count && reserve(t, (size_t)keep + n - t->count) != 0)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    mem_msg *fresh = n ? calloc(n, sizeof *fresh) : NULL;
    json_t *rec = json_pack("[II]", (json_int_t)keep, (json_int_t)n);
    int64_t now = convo__now_micros();
    size_t made = 0;
    int failed = (n && !fresh) || !rec;
    for (; !failed && made < n; made++)
        failed = copy_msg(&fresh[made], msgs[made].bytes, msgs[made].len, msgs[made].role, now);
    if (!failed && o->idempotency_key && json_object_set(t->idem, o->idempotency_key, rec) != 0)
        failed = 1;
    json_decref(rec);
    if (failed) {
        while (made-- > 0)
            free(fresh[made].bytes);
        free(fresh);
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    }
    tail_checkpoints(t, keep, 1, err);
    for (size_t i = (size_t)keep; i < t->count; i++)
        free(t->msgs[i].bytes);
    if (n)
        memcpy(&t->msgs[keep], fresh, n * sizeof *fresh);
    free(fresh);
    t->count = (size_t)keep + n;
    t->generation++;
    t->updated_at = now;
    reindex(b, t, NULL);
    res->first_seq = keep;
    res->count = n;
    res->removed = length - keep;
    res->generation = t->generation;
    res->replayed = 0;
    return 0;
}

static int mem_replace_tail(convo_backend *b, const char *thread_id, int64_t keep,
                            const convo_message_in *msgs, size_t n, const convo_rewrite_opts *o,
                            convo_rewrite_result *res, convo_error *err)
{
    pthread_mutex_lock(&b->lock);
    int rc = rewrite_locked(b, thread_id, keep, msgs, n, o, res, err);
    pthread_mutex_unlock(&b->lock);
    return rc;
}

/* ---- the thread index: matching threads sorted on demand ---- */

typedef struct list_order {
    int order, reverse;
} list_order;

static int64_t sort_time(const mem_thread *t, int order)
{
    return order == CONVO_ORDER_RECENT ? t->updated_at
           : order == CONVO_ORDER_CREATED ? t->created_at
                                          : 0;
}

/* < 0 when a comes first in the listing's order: (time, id) descending for
 * recent and created, id ascending for id; reverse turns it around. */
static int compare_position(int order, int reverse, int64_t ta, const char *ia, int64_t tb,
                            const char *ib)
{
    int c = ta < tb ? -1 : ta > tb ? 1 : strcmp(ia, ib);
    if (c > 0)
        c = 1;
    else if (c < 0)
        c = -1;
    if (order != CONVO_ORDER_ID)
        c = -c;
    return reverse ? -c : c;
}

static _Thread_local list_order sorting;

static int compare_threads(const void *a, const void *b)
{
    const mem_thread *x = *(mem_thread *const *)a, *y = *(mem_thread *const *)b;
    return compare_position(sorting.order, sorting.reverse, sort_time(x, sorting.order), x->id,
                            sort_time(y, sorting.order), y->id);
}

static int add_thread_row(convo_thread_page *p, const mem_thread *t,
                          const convo_thread_list_opts *o)
{
    const mem_msg *last = o->with_last_message && t->count ? &t->msgs[t->count - 1] : NULL;
    const char *extra = o->with_extra ? (t->extra ? t->extra : "{}") : NULL;
    return convo__thread_page_add_row(p, t->id, strlen(t->id), t->created_at, t->updated_at,
                                      (int64_t)t->count, extra, extra ? strlen(extra) : 0,
                                      last ? last->bytes : NULL, last ? last->len : 0);
}

/* A page from the index's candidates, which come oldest updated_at first: in
 * activity order walked from the right end, in the others sorted like a scan. */
static int list_indexed(const convo_thread_list_opts *o, void *where,
                        const convo_thread_cursor *after, const mem_index_item *items, size_t n,
                        int exact, convo_thread_page *p)
{
    int recent = o->order == CONVO_ORDER_RECENT;
    mem_thread **match = recent ? NULL : malloc((n + 1) * sizeof *match);
    if (!recent && !match)
        return CONVO_ENOMEM;
    size_t m = 0;
    int rc = 0;
    for (size_t k = 0; k < n && rc == 0 && (!recent || m <= o->limit); k++) {
        mem_thread *t = items[recent && !o->reverse ? n - 1 - k : k].thread;
        if (after && compare_position(o->order, o->reverse, sort_time(t, o->order), t->id,
                                      after->time, after->id) <= 0)
            continue;
        if (!exact && !convo__json_contains(t->extra ? t->extra : "{}",
                                            t->extra ? strlen(t->extra) : 2, where))
            continue;
        if (recent)
            rc = add_thread_row(p, t, o);
        else
            match[m] = t;
        m++;
    }
    if (!recent) {
        sorting = (list_order){o->order, o->reverse};
        qsort(match, m, sizeof *match, compare_threads);
        for (size_t i = 0; i < m && i <= o->limit && rc == 0; i++)
            rc = add_thread_row(p, match[i], o);
        free(match);
    }
    return rc;
}

static int list_ex_locked(convo_backend *b, const convo_thread_list_opts *o, void *where,
                          const convo_thread_cursor *after, convo_thread_page *p)
{
    const mem_index_item *items;
    size_t n;
    int exact;
    if (where && mem_index_lookup(b->index, where, &items, &n, &exact))
        return list_indexed(o, where, after, items, n, exact, p);
    mem_thread **match = malloc((b->count + 1) * sizeof *match);
    if (!match)
        return CONVO_ENOMEM;
    n = 0;
    for (size_t i = 0; i < b->count; i++) {
        mem_thread *t = b->threads[i];
        if (where && !convo__json_contains(t->extra ? t->extra : "{}",
                                           t->extra ? strlen(t->extra) : 2, where))
            continue;
        if (after && compare_position(o->order, o->reverse, sort_time(t, o->order), t->id,
                                      after->time, after->id) <= 0)
            continue;
        match[n++] = t;
    }
    sorting = (list_order){o->order, o->reverse};
    qsort(match, n, sizeof *match, compare_threads);
    int rc = 0;
    for (size_t i = 0; i < n && i <= o->limit && rc == 0; i++)
        rc = add_thread_row(p, match[i], o);
    free(match);
    return rc;
}

static int mem_thread_list_ex(convo_backend *b, const convo_thread_list_opts *o, void *where,
                              const convo_thread_cursor *after, convo_thread_page **out,
                              convo_error *err)
{
    convo_thread_page *p = convo__thread_page_new();
    if (!p)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    pthread_mutex_lock(&b->lock);
    int rc = list_ex_locked(b, o, where, after, p);
    pthread_mutex_unlock(&b->lock);
    if (rc != 0) {
        convo_thread_page_free(p);
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    }
    *out = p;
    return 0;
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
    .checkpoint_put = mem_checkpoint_put,
    .checkpoint_put_writes = mem_checkpoint_put_writes,
    .checkpoint_get = mem_checkpoint_get,
    .checkpoint_list = mem_checkpoint_list,
    .checkpoint_prune = convo__mem_checkpoint_prune,
    .checkpoint_delete = convo__mem_checkpoint_delete,
    .thread_copy = convo__mem_thread_copy,
    .stored_bytes = mem_stored_bytes,
    .thread_import = mem_thread_import,
    .checkpoint_put_log = mem_checkpoint_put_log,
    .checkpoint_put_refs = mem_checkpoint_put_refs,
    .replace_tail = mem_replace_tail,
    .thread_list_ex = mem_thread_list_ex,
};
