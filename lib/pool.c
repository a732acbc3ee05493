/* pool.c — a small, blocking pool of backend connections shared by the
 * threads that use one store. Connections are made lazily; a broken one is
 * dropped on release, so the next call reconnects. Also the wait hooks
 * (convo_store_opts version 3) that a wait of the pool or a driver runs in. */
#include "internal.h"
#include <pthread.h>
#include <stdlib.h>

struct convo_pool {
    pthread_mutex_t lock;
    pthread_cond_t freed;
    const convo_pool_ops *ops;
    void *ctx;
    void **idle;
    size_t nidle, size, open; /* open = idle + in use */
    convo_wait_hooks wait;
};

/* Set in threads of libconvo's own (convo_copy's export): the hooks are the
 * caller's, for the caller's threads; such a thread holds no lock of theirs. */
static _Thread_local bool unhooked;

void convo__wait_unhook_thread(void)
{
    unhooked = true;
}

/* The hooks a wait of this thread runs: NULL for none. */
static const convo_wait_hooks *active(const convo_wait_hooks *hooks)
{
    return hooks && hooks->enter && !unhooked ? hooks : NULL;
}

void convo__wait_begin(convo_wait *w, const convo_wait_hooks *hooks)
{
    w->hooks = active(hooks);
    w->entered = w->hooks ? w->hooks->enter() : NULL;
}

void convo__wait_end(convo_wait *w)
{
    if (w->hooks)
        w->hooks->leave(w->entered);
    w->hooks = NULL;
}

void convo__pool_set_wait(convo_pool *p, const convo_wait_hooks *hooks)
{
    p->wait = *hooks;
}

int convo__pool_new(convo_pool **out, size_t size, const convo_pool_ops *ops, void *ctx)
{
    convo_pool *p = calloc(1, sizeof *p);
    if (!p || !(p->idle = calloc(size ? size : 1, sizeof *p->idle))) {
        free(p);
        return CONVO_ENOMEM;
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->freed, NULL);
    p->ops = ops;
    p->ctx = ctx;
    p->size = size ? size : 1;
    *out = p;
    return 0;
}

void convo__pool_free(convo_pool *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->nidle; i++)
        p->ops->disconnect(p->ctx, p->idle[i]);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->freed);
    free(p->idle);
    free(p);
}

int convo__pool_acquire(convo_pool *p, void **conn, convo_error *err)
{
    convo_wait w = {NULL, NULL};
    pthread_mutex_lock(&p->lock);
    while (p->nidle == 0 && p->open >= p->size) {
        if (!w.hooks && active(&p->wait)) {
            /* enter may give up a lock of the caller's that the thread
             * releasing a connection needs first: never call it holding ours */
            pthread_mutex_unlock(&p->lock);
            convo__wait_begin(&w, &p->wait);
            pthread_mutex_lock(&p->lock);
            continue;
        }
        pthread_cond_wait(&p->freed, &p->lock);
    }
    if (p->nidle > 0) {
        *conn = p->idle[--p->nidle];
        pthread_mutex_unlock(&p->lock);
        convo__wait_end(&w); /* leave may block (on the caller's lock): after ours */
        return 0;
    }
    p->open++; /* reserve the slot, then connect without holding the lock */
    pthread_mutex_unlock(&p->lock);
    convo__wait_end(&w); /* before connect, whose own waits enter again */
    int rc = p->ops->connect(p->ctx, conn, err);
    if (rc != 0) {
        pthread_mutex_lock(&p->lock);
        p->open--;
        pthread_cond_signal(&p->freed);
        pthread_mutex_unlock(&p->lock);
    }
    return rc;
}

void convo__pool_release(convo_pool *p, void *conn, bool broken)
{
    if (broken)
        p->ops->disconnect(p->ctx, conn);
    pthread_mutex_lock(&p->lock);
    if (broken)
        p->open--;
    else
        p->idle[p->nidle++] = conn;
    pthread_cond_signal(&p->freed);
    pthread_mutex_unlock(&p->lock);
}
