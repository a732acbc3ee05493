/* thread_copy.c — a fork that copies the checkpoints too (LangGraph's
 * copy_thread), done by the driver in one step or here one put at a time, and
 * convo_checkpoint_delete (LangGraph's delete_for_runs): what a listing names,
 * removed thread by thread. */
#include "internal.h"
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int no_memory(convo_error *err)
{
    return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
}

/* ------------------------------------------------- copy, one put at a time */

/* The channel values already sent to the copy, by (namespace, channel,
 * version): each goes with the first checkpoint that lists it, as the
 * original puts sent it, so no copied put is bigger than an original. */
static int value_sent_before(json_t *sent, const char *ns, const char *channel,
                             const char *version, int *before)
{
    char *key;
    if (asprintf(&key, "%zu:%s%zu:%s%s", strlen(ns), ns, strlen(channel), channel, version) < 0)
        return CONVO_ENOMEM;
    *before = json_object_get(sent, key) != NULL;
    int rc = *before || json_object_set_new(sent, key, json_true()) == 0 ? 0 : CONVO_ENOMEM;
    free(key);
    return rc;
}

static int put_copy(convo_store *s, const char *dst, const convo_checkpoint *cp, json_t *sent,
                    convo_error *err)
{
    size_t n = convo_checkpoint_channel_count(cp);
    convo_channel_in *ch = calloc(n ? n : 1, sizeof *ch);
    convo_blob *values = calloc(n ? n : 1, sizeof *values);
    int rc = ch && values ? 0 : no_memory(err);
    for (size_t i = 0; i < n && rc == 0; i++) {
        ch[i].channel = convo_checkpoint_channel(cp, i, &ch[i].version, &values[i]);
        int before = 0;
        if (values[i].type &&
            value_sent_before(sent, convo_checkpoint_ns(cp), ch[i].channel, ch[i].version,
                              &before) != 0)
            rc = no_memory(err);
        ch[i].value = values[i].type && !before ? &values[i] : NULL;
    }
    if (rc == 0) {
        convo_checkpoint_in in = CONVO_CHECKPOINT_IN_INIT;
        in.thread_id = dst;
        in.checkpoint_ns = convo_checkpoint_ns(cp);
        in.checkpoint_id = convo_checkpoint_id(cp);
        in.parent_id = convo_checkpoint_parent_id(cp);
        in.metadata_json = convo_checkpoint_metadata(cp);
        in.body = convo_checkpoint_body(cp);
        in.channels = ch;
        in.nchannels = n;
        in.log_length = convo_checkpoint_log_length(cp);
        rc = convo_checkpoint_put(s, &in, err);
    }
    free(ch);
    free(values);
    return rc;
}

/* The pending writes of cp, one put_writes per task (and task path), split
 * where the values would pass the store's limit for one call. */
static int put_copy_writes(convo_store *s, const char *dst, const convo_checkpoint *cp,
                           convo_error *err)
{
    size_t n = convo_checkpoint_write_count(cp);
    convo_write_in *w = calloc(n ? n : 1, sizeof *w);
    if (!w)
        return no_memory(err);
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0;) {
        const char *task_path, *path, *task = convo_checkpoint_write(cp, i, &task_path, &w[0].idx,
                                                                     &w[0].channel, &w[0].value);
        size_t k = 1, bytes = w[0].value.len;
        while (i + k < n) {
            convo_write_in next;
            const char *t = convo_checkpoint_write(cp, i + k, &path, &next.idx, &next.channel,
                                                   &next.value);
            if (strcmp(t, task) != 0 || strcmp(path, task_path) != 0 ||
                bytes + next.value.len > s->limits.max_checkpoint_bytes)
                break;
            bytes += next.value.len;
            w[k++] = next;
        }
        rc = convo_checkpoint_put_writes(s, dst, convo_checkpoint_ns(cp), convo_checkpoint_id(cp),
                                         task, task_path, w, k, err);
        i += k;
    }
    free(w);
    return rc;
}

/* src's checkpoints within the first `length` messages, oldest first, into dst. */
static int copy_checkpoints(convo_store *s, const char *src, const char *dst, int64_t length,
                            convo_error *err)
{
    convo_checkpoint_list_opts lo = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    lo.thread_id = src;
    convo_checkpoint_set *set = NULL;
    int rc = convo_checkpoint_list(s, &lo, &set, err);
    json_t *sent = json_object();
    if (rc == 0 && !sent)
        rc = no_memory(err);
    for (size_t i = convo_checkpoint_set_count(set); i-- > 0 && rc == 0;) {
        const convo_checkpoint *cp = convo_checkpoint_set_get(set, i);
        if (convo_checkpoint_log_length(cp) > length)
            continue; /* it refers to messages the copy does not have */
        rc = put_copy(s, dst, cp, sent, err);
        if (rc == 0)
            rc = put_copy_writes(s, dst, cp, err);
    }
    json_decref(sent);
    convo_checkpoint_set_free(set);
    return rc;
}

static int copied_length(convo_store *s, const char *dst, int64_t *length, convo_error *err)
{
    convo_load_opts lo = CONVO_LOAD_OPTS_INIT;
    lo.limit = 1;
    lo.with_extra = 0;
    convo_history *h = NULL;
    int rc = convo_load(s, dst, &lo, &h, err);
    *length = convo_history_length(h);
    convo_history_free(h);
    return rc;
}

/* thread_fork, then the checkpoints one by one; a failure removes dst again
 * (the fork created it, so it is this call's own). */
static int copy_by_puts(convo_store *s, const char *src, const char *dst, int64_t upto,
                        int64_t expected_generation, convo_error *err)
{
    const convo_driver *d = s->driver;
    if (d->version < 2 || !d->checkpoint_list || !d->checkpoint_put || !d->checkpoint_put_writes)
        return convo__error(err, CONVO_ENOTSUP, NULL, "the %s driver has no checkpoints",
                            d->name);
    int rc = convo__scrubbed(s, d->thread_fork(s->backend, src, dst, upto, expected_generation,
                                               err), err);
    if (rc != 0)
        return rc;
    int64_t length = 0;
    rc = copied_length(s, dst, &length, err);
    if (rc == 0)
        rc = copy_checkpoints(s, src, dst, length, err);
    if (rc != 0) {
        convo_error undo;
        if (convo_thread_delete(s, dst, &undo) != 0 && err)
            snprintf(err->message + strlen(err->message),
                     sizeof err->message - strlen(err->message),
                     "; the partial copy %s is left: %s", dst, undo.message);
    }
    return rc;
}

int convo__thread_copy(convo_store *s, const char *src, const char *dst, int64_t upto,
                       int64_t expected_generation, convo_error *err)
{
    if (s->driver->version >= 6 && s->driver->thread_copy)
        return convo__scrubbed(s, s->driver->thread_copy(s->backend, src, dst, upto,
                                                         expected_generation, err), err);
    return copy_by_puts(s, src, dst, upto, expected_generation, err);
}

/* ------------------------------------------------------- checkpoint delete */

/* A listed checkpoint's thread and position: sorted by both, each thread's
 * share of the listing comes together, in listing order. */
typedef struct listed {
    const char *thread;
    size_t i;
} listed;

static int cmp_listed(const void *a, const void *b)
{
    const listed *x = a, *y = b;
    int c = strcmp(x->thread, y->thread);
    return c ? c : (x->i > y->i) - (x->i < y->i);
}

static int delete_share(convo_store *s, const convo_checkpoint_set *set, const listed *share,
                        size_t n, uint64_t *removed, convo_error *err)
{
    const char **ns = calloc(n, sizeof *ns), **ids = calloc(n, sizeof *ids);
    int rc = ns && ids ? 0 : no_memory(err);
    for (size_t i = 0; i < n && rc == 0; i++) {
        ns[i] = convo_checkpoint_ns(convo_checkpoint_set_get(set, share[i].i));
        ids[i] = convo_checkpoint_id(convo_checkpoint_set_get(set, share[i].i));
    }
    const char *thread = share[0].thread;
    uint64_t r = 0;
    if (rc == 0)
        rc = convo__scrubbed(s, s->driver->checkpoint_delete(s->backend, thread, ns, ids, n, &r,
                                                             err), err);
    *removed += rc == 0 ? r : 0;
    free(ns);
    free(ids);
    return rc;
}

static int delete_listed(convo_store *s, const convo_checkpoint_set *set, uint64_t *removed,
                         convo_error *err)
{
    size_t n = convo_checkpoint_set_count(set);
    if (n == 0)
        return 0;
    listed *order = malloc(n * sizeof *order);
    if (!order)
        return no_memory(err);
    for (size_t i = 0; i < n; i++)
        order[i] = (listed){convo_checkpoint_thread_id(convo_checkpoint_set_get(set, i)), i};
    qsort(order, n, sizeof *order, cmp_listed);
    int rc = 0;
    for (size_t first = 0, end; first < n && rc == 0; first = end) {
        for (end = first + 1; end < n && !strcmp(order[end].thread, order[first].thread); end++)
            ;
        rc = delete_share(s, set, order + first, end - first, removed, err);
    }
    free(order);
    return rc;
}

int convo_checkpoint_delete(convo_store *s, const convo_checkpoint_list_opts *opts,
                            uint64_t *removed, convo_error *err)
{
    convo__error_clear(err);
    uint64_t count = 0;
    if (removed)
        *removed = 0;
    if (!s)
        return convo__error(err, CONVO_EINVAL, NULL, "store is NULL");
    if (!opts)
        return convo__error(err, CONVO_EINVAL, NULL,
                            "checkpoint delete needs options (thread_id NULL: every thread)");
    if (s->driver->version < 6 || !s->driver->checkpoint_delete)
        return convo__error(err, CONVO_ENOTSUP, NULL,
                            "the %s driver cannot delete chosen checkpoints", s->driver->name);
    convo_checkpoint_set *set = NULL;
    int rc = convo_checkpoint_list(s, opts, &set, err);
    if (rc == 0)
        rc = delete_listed(s, set, &count, err);
    convo_checkpoint_set_free(set);
    if (removed)
        *removed = count;
    return rc;
}
