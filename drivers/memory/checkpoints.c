/* checkpoints.c — the memory driver: removing checkpoints (prune, delete) and
 * copying a thread with its checkpoints, each under the store's mutex in one
 * critical section. */
#include "memory_int.h"
#include <stdlib.h>
#include <string.h>

static int blob_in_use(mem_thread *t, const mem_blob *v)
{
    for (size_t i = 0; i < t->ncps; i++) {
        const mem_checkpoint *c = &t->cps[i];
        if (strcmp(c->ns, v->ns) != 0)
            continue;
        for (size_t j = 0; j < c->nchannels; j++)
            if (!strcmp(c->channels[j], v->channel) && !strcmp(c->versions[j], v->version))
                return 1;
    }
    return 0;
}

/* Removes the checkpoints marked in drop (with their writes), then every value
 * no remaining checkpoint lists; *removed = how many were marked. */
static void drop_marked(mem_thread *t, const char *drop, uint64_t *removed)
{
    size_t kept = 0;
    for (size_t i = 0; i < t->ncps; i++) {
        if (drop[i])
            convo__mem_checkpoint_clear(&t->cps[i]);
        else
            t->cps[kept++] = t->cps[i];
    }
    *removed = t->ncps - kept;
    t->ncps = kept;
    size_t nb = 0;
    for (size_t i = 0; i < t->nblobs; i++) {
        if (blob_in_use(t, &t->blobs[i]))
            t->blobs[nb++] = t->blobs[i];
        else
            convo__mem_blob_clear(&t->blobs[i]);
    }
    t->nblobs = nb;
    convo__mem_lookup_stale(t);
}

static int prune_locked(mem_thread *t, size_t keep_last)
{
    /* decide first (newest first, counted per namespace), then drop */
    char *drop = calloc(t->ncps + 1, 1);
    if (!drop)
        return CONVO_ENOMEM;
    for (size_t i = 0; i < t->ncps; i++) {
        size_t newer = 0;
        for (size_t j = i + 1; j < t->ncps; j++)
            newer += strcmp(t->cps[j].ns, t->cps[i].ns) == 0;
        drop[i] = newer >= keep_last;
    }
    uint64_t removed;
    drop_marked(t, drop, &removed);
    free(drop);
    return 0;
}

int convo__mem_checkpoint_prune(convo_backend *b, const char *thread_id, size_t keep_last,
                                convo_error *err)
{
    pthread_mutex_lock(&b->lock);
    mem_thread *t = convo__mem_lookup(b, thread_id);
    int rc = t ? prune_locked(t, keep_last) : CONVO_ENOTFOUND;
    pthread_mutex_unlock(&b->lock);
    if (rc == CONVO_ENOTFOUND)
        return convo__error(err, rc, NULL, "thread not found");
    return rc ? convo__error(err, rc, NULL, "out of memory") : 0;
}

int convo__mem_checkpoint_delete(convo_backend *b, const char *thread_id,
                                 const char *const *ns, const char *const *ids, size_t n,
                                 uint64_t *removed, convo_error *err)
{
    *removed = 0;
    pthread_mutex_lock(&b->lock);
    mem_thread *t = convo__mem_lookup(b, thread_id);
    char *drop = t ? calloc(t->ncps + 1, 1) : NULL;
    for (size_t i = 0; drop && i < n; i++) {
        mem_checkpoint *c = convo__mem_find_cp(t, ns[i], ids[i]);
        if (c)
            drop[c - t->cps] = 1;
    }
    if (drop)
        drop_marked(t, drop, removed);
    pthread_mutex_unlock(&b->lock);
    int failed = t && !drop;
    free(drop);
    return failed ? convo__error(err, CONVO_ENOMEM, NULL, "out of memory") : 0;
}

/* ---- copying a thread with its checkpoints ---- */

static int copy_write(mem_write *to, const mem_write *w)
{
    int failed = 0;
    *to = (mem_write){convo__mem_xdup(w->task_id, &failed), convo__mem_xdup(w->task_path, &failed),
                      convo__mem_xdup(w->channel, &failed), convo__mem_xdup(w->type, &failed),
                      w->idx, convo__mem_xdupb(w->bytes, w->len, &failed), w->len};
    return failed;
}

/* A deep copy of c into to (zeroed); on failure what was copied is in to, for
 * convo__mem_checkpoint_clear. */
static int copy_checkpoint(mem_checkpoint *to, const mem_checkpoint *c)
{
    int failed = 0;
    to->ns = convo__mem_xdup(c->ns, &failed);
    to->id = convo__mem_xdup(c->id, &failed);
    to->parent_id = convo__mem_xdup(c->parent_id, &failed);
    to->metadata = convo__mem_xdup(c->metadata, &failed);
    to->body_type = convo__mem_xdup(c->body_type, &failed);
    to->body = c->body ? convo__mem_xdupb(c->body, c->body_len, &failed) : NULL;
    to->body_len = c->body_len;
    to->log_length = c->log_length;
    to->channels = calloc(c->nchannels + 1, sizeof *to->channels);
    to->versions = calloc(c->nchannels + 1, sizeof *to->versions);
    failed |= !to->channels || !to->versions;
    for (size_t i = 0; !failed && i < c->nchannels; i++, to->nchannels++) {
        to->channels[i] = convo__mem_xdup(c->channels[i], &failed);
        to->versions[i] = convo__mem_xdup(c->versions[i], &failed);
    }
    to->writes = calloc(c->nwrites + 1, sizeof *to->writes);
    failed |= !to->writes;
    for (size_t i = 0; !failed && i < c->nwrites; i++, to->nwrites++)
        failed |= copy_write(&to->writes[i], &c->writes[i]);
    return failed;
}

static int copy_blob(mem_blob *to, const mem_blob *v)
{
    int failed = 0;
    *to = (mem_blob){convo__mem_xdup(v->ns, &failed), convo__mem_xdup(v->channel, &failed),
                     convo__mem_xdup(v->version, &failed), convo__mem_xdup(v->type, &failed),
                     v->type ? convo__mem_xdupb(v->bytes, v->len, &failed) : NULL, v->len};
    return failed;
}

/* s's checkpoints within d's messages, in their order, as if put now; then
 * the values they list. */
static int copy_checkpoints(convo_backend *b, const mem_thread *s, mem_thread *d)
{
    d->cps = calloc(s->ncps + 1, sizeof *d->cps);
    d->blobs = calloc(s->nblobs + 1, sizeof *d->blobs);
    if (!d->cps || !d->blobs)
        return CONVO_ENOMEM;
    int64_t now = convo__now_micros();
    for (size_t i = 0; i < s->ncps; i++) {
        if (s->cps[i].log_length > (int64_t)d->count)
            continue;
        mem_checkpoint *c = &d->cps[d->ncps++];
        if (copy_checkpoint(c, &s->cps[i]))
            return CONVO_ENOMEM;
        c->put_seq = ++b->put_seq;
        c->created_at = now;
    }
    for (size_t i = 0; i < s->nblobs; i++) {
        if (!blob_in_use(d, &s->blobs[i]))
            continue;
        if (copy_blob(&d->blobs[d->nblobs++], &s->blobs[i]))
            return CONVO_ENOMEM;
    }
    convo__mem_lookup_stale(d);
    return 0; /* updated_at stays the fork's: the index placed the thread by it */
}

int convo__mem_thread_copy(convo_backend *b, const char *src, const char *dst, int64_t upto,
                           int64_t expected_generation, convo_error *err)
{
    pthread_mutex_lock(&b->lock);
    int rc = convo__mem_fork_locked(b, src, dst, upto, expected_generation, err);
    if (rc == 0 &&
        copy_checkpoints(b, convo__mem_lookup(b, src), convo__mem_lookup(b, dst)) != 0) {
        convo__mem_remove_thread(b, dst); /* frees what was copied */
        rc = convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    }
    pthread_mutex_unlock(&b->lock);
    return rc;
}
