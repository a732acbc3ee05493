/* unit_pool.c — Check tests of the core's connection pool (lib/pool.c) on a fake
 * connector: contention, connect failures, callers blocking while it is full,
 * and the wait hooks called around that wait. */
#include "internal.h"
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct pool_ctx {
    pthread_mutex_t lock;
    int made, freed, live, in_use, max_in_use, fail_next;
} pool_ctx;

static int fake_connect(void *ctx, void **conn, convo_error *err)
{
    pool_ctx *c = ctx;
    pthread_mutex_lock(&c->lock);
    int fail = c->fail_next > 0;
    if (fail)
        c->fail_next--;
    else {
        c->made++;
        c->live++;
    }
    pthread_mutex_unlock(&c->lock);
    if (fail)
        return convo__error(err, CONVO_EIO, NULL, "refused");
    *conn = malloc(1);
    return 0;
}

static void fake_disconnect(void *ctx, void *conn)
{
    pool_ctx *c = ctx;
    pthread_mutex_lock(&c->lock);
    c->freed++;
    c->live--;
    pthread_mutex_unlock(&c->lock);
    free(conn);
}

static const convo_pool_ops fake_ops = {fake_connect, fake_disconnect};

typedef struct pool_user {
    convo_pool *pool;
    pool_ctx *ctx;
    int id, errors;
} pool_user;

static void *pool_hammer(void *arg)
{
    pool_user *u = arg;
    for (int i = 0; i < 2000; i++) {
        void *conn;
        if (convo__pool_acquire(u->pool, &conn, NULL) != 0) {
            u->errors++;
            continue;
        }
        pthread_mutex_lock(&u->ctx->lock);
        int now = ++u->ctx->in_use;
        if (now > u->ctx->max_in_use)
            u->ctx->max_in_use = now;
        pthread_mutex_unlock(&u->ctx->lock);
        if (i % 7 == 0)
            sched_yield();
        pthread_mutex_lock(&u->ctx->lock);
        u->ctx->in_use--;
        pthread_mutex_unlock(&u->ctx->lock);
        convo__pool_release(u->pool, conn, (i + u->id) % 97 == 0); /* some break */
    }
    return NULL;
}

START_TEST(test_pool_contention)
{
    pool_ctx ctx = {.lock = PTHREAD_MUTEX_INITIALIZER};
    convo_pool *pool;
    ck_assert_int_eq(convo__pool_new(&pool, 3, &fake_ops, &ctx), 0);
    pthread_t th[8];
    pool_user users[8];
    for (int i = 0; i < 8; i++) {
        users[i] = (pool_user){pool, &ctx, i, 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, pool_hammer, &users[i]), 0);
    }
    for (int i = 0; i < 8; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(users[i].errors, 0);
    }
    ck_assert_int_le(ctx.max_in_use, 3);
    ck_assert_int_ge(ctx.max_in_use, 1);
    ck_assert_int_le(ctx.live, 3);
    ck_assert_int_gt(ctx.freed, 0); /* broken ones were dropped... */
    ck_assert_int_gt(ctx.made, 3); /* ...and replaced */
    convo__pool_free(pool);
    ck_assert_int_eq(ctx.live, 0);
    convo__pool_free(NULL);
}
END_TEST

START_TEST(test_pool_connect_failure)
{
    pool_ctx ctx = {.lock = PTHREAD_MUTEX_INITIALIZER, .fail_next = 1};
    convo_pool *pool;
    ck_assert_int_eq(convo__pool_new(&pool, 1, &fake_ops, &ctx), 0);
    void *a;
    convo_error err;
    convo__error_clear(&err);
    ck_assert_int_eq(convo__pool_acquire(pool, &a, &err), CONVO_EIO);
    ck_assert_int_eq(err.code, CONVO_EIO);
    /* the failed attempt gave its slot back: the single slot is usable */
    ck_assert_int_eq(convo__pool_acquire(pool, &a, NULL), 0);
    convo__pool_release(pool, a, false);
    void *b;
    ck_assert_int_eq(convo__pool_acquire(pool, &b, NULL), 0);
    ck_assert_ptr_eq(a, b); /* idle connections are reused */
    convo__pool_release(pool, b, true);
    ck_assert_int_eq(ctx.live, 0);
    ck_assert_int_eq(convo__pool_acquire(pool, &a, NULL), 0);
    ck_assert_int_eq(ctx.made, 2);
    convo__pool_release(pool, a, false);
    convo__pool_free(pool);
    ck_assert_int_eq(ctx.live, 0);
}
END_TEST

typedef struct blocker {
    convo_pool *pool;
    volatile int got;
} blocker;

static void *pool_wait(void *arg)
{
    blocker *b = arg;
    void *conn;
    if (convo__pool_acquire(b->pool, &conn, NULL) == 0) {
        b->got = 1;
        convo__pool_release(b->pool, conn, false);
    }
    return NULL;
}

/* acquire blocks while every connection is in use and wakes on release */
START_TEST(test_pool_blocks_when_full)
{
    pool_ctx ctx = {.lock = PTHREAD_MUTEX_INITIALIZER};
    convo_pool *pool;
    ck_assert_int_eq(convo__pool_new(&pool, 1, &fake_ops, &ctx), 0);
    void *held;
    ck_assert_int_eq(convo__pool_acquire(pool, &held, NULL), 0);
    blocker b = {pool, 0};
    pthread_t th;
    pthread_create(&th, NULL, pool_wait, &b);
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
    ck_assert_int_eq(b.got, 0);
    convo__pool_release(pool, held, false);
    pthread_join(th, NULL);
    ck_assert_int_eq(b.got, 1);
    ck_assert_int_eq(ctx.made, 1);
    convo__pool_free(pool);
}
END_TEST

/* ---- the wait hooks (convo_store_opts version 3) around acquire's wait ---- */

static struct {
    pthread_mutex_t lock;
    pthread_cond_t changed;
    int enters, leaves, bad_token;
    convo_pool *pool;
    void *release_in_enter, *release_in_leave; /* what a hook gives back itself */
} hooked = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, 0, 0, NULL, NULL, NULL};
static int hook_token;

static void *hook_enter(void)
{
    /* the pool's lock is not held here: releasing takes it */
    if (hooked.release_in_enter)
        convo__pool_release(hooked.pool, hooked.release_in_enter, false);
    pthread_mutex_lock(&hooked.lock);
    hooked.enters++;
    pthread_cond_broadcast(&hooked.changed);
    pthread_mutex_unlock(&hooked.lock);
    return &hook_token;
}

static void hook_leave(void *entered)
{
    /* nor here */
    if (hooked.release_in_leave)
        convo__pool_release(hooked.pool, hooked.release_in_leave, false);
    pthread_mutex_lock(&hooked.lock);
    hooked.leaves++;
    hooked.bad_token += entered != &hook_token;
    pthread_cond_broadcast(&hooked.changed);
    pthread_mutex_unlock(&hooked.lock);
}

static const convo_wait_hooks counting_hooks = {hook_enter, hook_leave};

static void hooks_reset(convo_pool *pool)
{
    hooked.enters = hooked.leaves = hooked.bad_token = 0;
    hooked.pool = pool;
    hooked.release_in_enter = hooked.release_in_leave = NULL;
}

/* acquire without a wait calls no hook; one that waits calls enter once before
 * blocking and leave once after, each without the pool's lock held */
START_TEST(test_pool_wait_hooks)
{
    pool_ctx ctx = {.lock = PTHREAD_MUTEX_INITIALIZER};
    convo_pool *pool;
    ck_assert_int_eq(convo__pool_new(&pool, 2, &fake_ops, &ctx), 0);
    convo__pool_set_wait(pool, &counting_hooks);
    hooks_reset(pool);
    void *a, *b;
    ck_assert_int_eq(convo__pool_acquire(pool, &a, NULL), 0);
    ck_assert_int_eq(convo__pool_acquire(pool, &b, NULL), 0);
    ck_assert_int_eq(hooked.enters, 0);

    /* enter itself frees a connection: the waiter takes it without sleeping */
    hooked.release_in_enter = a;
    void *c;
    ck_assert_int_eq(convo__pool_acquire(pool, &c, NULL), 0);
    ck_assert_ptr_eq(c, a);
    ck_assert_int_eq(hooked.enters, 1);
    ck_assert_int_eq(hooked.leaves, 1);
    ck_assert_int_eq(hooked.bad_token, 0);

    /* a waiter in another thread: enter before it sleeps, leave once woken;
     * leave gives back the other connection (a deadlock if the lock were held) */
    hooks_reset(pool);
    hooked.release_in_leave = b;
    blocker w = {pool, 0};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, pool_wait, &w), 0);
    pthread_mutex_lock(&hooked.lock);
    while (hooked.enters == 0)
        pthread_cond_wait(&hooked.changed, &hooked.lock);
    pthread_mutex_unlock(&hooked.lock);
    ck_assert_int_eq(hooked.leaves, 0);
    convo__pool_release(pool, c, false);
    pthread_join(th, NULL);
    ck_assert_int_eq(w.got, 1);
    ck_assert_int_eq(hooked.enters, 1);
    ck_assert_int_eq(hooked.leaves, 1);
    ck_assert_int_eq(hooked.bad_token, 0);

    /* both connections are idle again: no wait, no hook */
    void *d, *e;
    ck_assert_int_eq(convo__pool_acquire(pool, &d, NULL), 0);
    ck_assert_int_eq(convo__pool_acquire(pool, &e, NULL), 0);
    ck_assert_int_eq(hooked.enters, 1);
    convo__pool_release(pool, d, false);
    convo__pool_release(pool, e, false);
    ck_assert_int_eq(ctx.made, 2);
    convo__pool_free(pool);
}
END_TEST

void unit_add_pool_tests(Suite *s)
{
    TCase *tc = tcase_create("pool");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_pool_contention);
    tcase_add_test(tc, test_pool_connect_failure);
    tcase_add_test(tc, test_pool_blocks_when_full);
    tcase_add_test(tc, test_pool_wait_hooks);
    suite_add_tcase(s, tc);
}
