/* rewrite.c — the SQLite driver's tail rewrite (convo_replace_tail): in one
 * BEGIN IMMEDIATE transaction, the conditions, the checkpoints past what is
 * kept, the removal of the old tail, the new messages, the generation + 1 and
 * the idempotency key. A crash at any point leaves the thread as it was before
 * or as it is after (docs/sqlite.md, The tail rewrite). */
#include "config.h"
#include "sqlite_int.h"

typedef struct rewrite_args {
    const char *thread_id;
    int64_t keep;
    const convo_message_in *msgs;
    size_t n;
    const convo_rewrite_opts *opts;
    convo_rewrite_result *res;
} rewrite_args;

/* 1 and res filled when the key was used on thread t (by a rewrite or an
 * append), 0 when not, < 0 on error. */
static int rewrite_replay(sq_conn *c, const rewrite_args *a, const thread_row *t,
                          convo_error *err)
{
    convo_append_result prior;
    int rc = sq_idem_find(c, t->num, a->opts->idempotency_key, &prior, err);
    if (rc == 1) {
        a->res->first_seq = prior.first_seq;
        a->res->count = prior.count;
        a->res->generation = t->generation;
        a->res->replayed = 1;
    }
    return rc;
}

/* The caller's (length, generation) condition, then keep within the log. */
static int rewrite_check(const rewrite_args *a, const thread_row *t, convo_error *err)
{
    const convo_rewrite_opts *o = a->opts;
    if ((o->expected_length >= 0 && o->expected_length != t->length) ||
        (o->expected_generation >= 0 && o->expected_generation != t->generation))
        return convo__error(err, CONVO_ECONFLICT, NULL,
                            "thread has %lld messages at generation %lld: not the expected tail",
                            (long long)t->length, (long long)t->generation);
    if (a->keep > t->length)
        return convo__error(err, CONVO_EINVAL, NULL, "keep %lld is past the %lld messages",
                            (long long)a->keep, (long long)t->length);
    if (a->keep + (int64_t)a->n > MAX_LENGTH)
        return convo__error(err, CONVO_ETOOLARGE, NULL,
                            "sqlite: a thread holds at most %lld messages", (long long)MAX_LENGTH);
    return 0;
}

/* The new messages take seqs keep.. (over the old tail's rows there), what
 * is left of the old tail goes, the thread's row gets generation + 1 and its
 * new deadline. */
static int rewrite_apply(sq_conn *c, const rewrite_args *a, thread_row *t,
                         convo_error *err)
{
    int64_t end = a->keep + (int64_t)a->n;
    int rc = sq_messages_put(c, ST_MSG_REPLACE, t->num, a->keep, a->msgs, a->n,
                             convo__now_micros(), NULL, err);
    if (rc == 0 && end < t->length)
        rc = sq_run_with_ints(c, ST_MSG_DELETE, 2, key_of(t->num, end), key_of(t->num, MAX_LENGTH),
                              0, "deleting the old tail", err);
    if (rc == 0)
        rc = sq_thread_set_generation(c, a->thread_id, t, t->generation + 1, end, err);
    if (rc == 0 && a->opts->idempotency_key)
        rc = sq_idem_put(c, t->num, a->opts->idempotency_key, a->keep, a->n, err);
    return rc;
}

static int rewrite_tx(sq_conn *c, void *arg, convo_error *err)
{
    rewrite_args *a = arg;
    thread_row t;
    int rc = sq_thread_find(c, a->thread_id, VIEW_WRITE, &t, err);
    if (rc <= 0)
        return rc < 0 ? rc : convo__error(err, CONVO_ENOTFOUND, NULL, "thread not found");
    if (a->opts->idempotency_key && (rc = rewrite_replay(c, a, &t, err)) != 0)
        return rc < 0 ? rc : 0;
    if ((rc = rewrite_check(a, &t, err)) != 0 ||
        (rc = sq_checkpoints_beyond(c, t.num, a->keep, a->opts->drop_checkpoints, err)) != 0 ||
        (rc = rewrite_apply(c, a, &t, err)) != 0)
        return rc;
    a->res->first_seq = a->keep;
    a->res->count = a->n;
    a->res->removed = t.length - a->keep;
    a->res->generation = t.generation + 1;
    a->res->replayed = 0;
    return 0;
}

int sq_replace_tail(convo_backend *b, const char *thread_id, int64_t keep,
                    const convo_message_in *msgs, size_t n, const convo_rewrite_opts *opts,
                    convo_rewrite_result *res, convo_error *err)
{
    rewrite_args a = {thread_id, keep, msgs, n, opts, res};
    return sq_run_tx(b, 1, rewrite_tx, &a, err);
}
