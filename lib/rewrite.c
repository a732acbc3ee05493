/* rewrite.c — convo_replace_tail: the one call that changes a thread's log
 * other than by appending. The core validates, checks the caller's view of the
 * tail, and leaves the atomic step (conditions, removal, insert, generation)
 * to the driver. */
#include "internal.h"
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* Does the stored tail [keep, ...) equal the caller's view of it? The
 * answer holds for the (length, generation) read with it: the driver's step
 * then runs on that condition, so a change in between is a conflict. */
static int tail_matches(convo_store *s, const char *thread_id, int64_t keep,
                        const convo_rewrite_opts *o, int *same, int64_t *length,
                        int64_t *generation, convo_error *err)
{
    convo_load_opts lo = CONVO_LOAD_OPTS_INIT;
    lo.from_seq = keep;
    lo.with_extra = 0;
    convo_history *h;
    int rc = convo_load(s, thread_id, &lo, &h, err);
    if (rc != 0)
        return rc;
    *length = convo_history_length(h);
    *generation = convo_history_generation(h);
    *same = keep <= *length && convo_history_count(h) == o->nexpected_suffix;
    for (size_t i = 0; *same && i < o->nexpected_suffix; i++) {
        const char *want = o->expected_suffix[i];
        size_t want_len = o->expected_suffix_lengths ? o->expected_suffix_lengths[i]
                                                     : (want ? strlen(want) : 0);
        size_t len;
        const char *got = convo_history_message(h, i, &len);
        *same = want && len == want_len && memcmp(got, want, len) == 0;
    }
    convo_history_free(h);
    return 0;
}

static int check_opts(const convo_rewrite_opts *opts, convo_rewrite_opts *o, convo_error *err)
{
    convo_rewrite_opts def = CONVO_REWRITE_OPTS_INIT;
    *o = def;
    if (opts) {
        if (opts->version < 1 || opts->version > CONVO_REWRITE_OPTS_VERSION)
            return convo__error(err, CONVO_EINVAL, NULL,
                                "unsupported convo_rewrite_opts version %u", opts->version);
        *o = *opts;
    }
    if (o->expected_length < -1)
        return convo__error(err, CONVO_EINVAL, NULL, "expected length must be >= 0 or -1");
    if (o->expected_generation < -1)
        return convo__error(err, CONVO_EINVAL, NULL, "expected generation must be >= 0 or -1");
    if (!o->expected_suffix && o->nexpected_suffix > 0)
        return convo__error(err, CONVO_EINVAL, NULL, "expected_suffix is NULL");
    if (o->drop_checkpoints != 0 && o->drop_checkpoints != 1)
        return convo__error(err, CONVO_EINVAL, NULL, "drop_checkpoints must be 0 or 1");
    return convo__check_idempotency_key(o->idempotency_key, err);
}

/* Validates n new messages (n may be 0, unlike an append). */
static int messages_in(convo_store *s, const char *const *messages, const size_t *lengths,
                       size_t n, convo_message_in **in, convo_error *err)
{
    *in = NULL;
    if (n == 0)
        return 0;
    return convo__messages_in(s, messages, lengths, n, in, err);
}

int convo_replace_tail(convo_store *s, const char *thread_id, int64_t keep,
                       const char *const *messages, const size_t *lengths, size_t n,
                       const convo_rewrite_opts *opts, convo_rewrite_result *res,
                       convo_error *err)
{
    convo__error_clear(err);
    if (!s)
        return convo__error(err, CONVO_EINVAL, NULL, "store is NULL");
    if (s->driver->version < 4 || !s->driver->replace_tail)
        return convo__error(err, CONVO_ENOTSUP, NULL, "the %s driver cannot rewrite a tail",
                            s->driver->name);
    int rc = convo__check_thread_id(thread_id, err);
    if (rc != 0)
        return rc;
    convo_rewrite_opts o;
    if ((rc = check_opts(opts, &o, err)) != 0)
        return rc;
    if (keep < 0)
        return convo__error(err, CONVO_EINVAL, NULL, "keep must not be negative");
    convo_message_in *in;
    if ((rc = messages_in(s, messages, lengths, n, &in, err)) != 0)
        return rc;
    int suffix_differs = 0;
    int64_t seen_length = -1, seen_generation = -1;
    if (o.expected_suffix) {
        int same;
        rc = tail_matches(s, thread_id, keep, &o, &same, &seen_length, &seen_generation, err);
        if (rc == 0 && same) {
            /* the view held at (length, generation): require exactly that */
            if ((o.expected_length >= 0 && o.expected_length != seen_length) ||
                (o.expected_generation >= 0 && o.expected_generation != seen_generation))
                suffix_differs = 0; /* the driver reports the stale condition */
            else
                o.expected_length = seen_length, o.expected_generation = seen_generation;
        } else if (rc == 0) {
            /* still ask the driver: a retry of a call that was applied is a replay */
            suffix_differs = 1;
            o.expected_generation = INT64_MAX;
        }
    }
    convo_rewrite_result r = {keep, 0, 0, 0, 0};
    if (rc == 0)
        rc = convo__scrubbed(
            s, s->driver->replace_tail(s->backend, thread_id, keep, in, n, &o, &r, err), err);
    if (rc == CONVO_ECONFLICT && suffix_differs && err) {
        convo__error_clear(err);
        rc = convo__error(err, CONVO_ECONFLICT, NULL,
                          "the tail of thread %s from seq %lld is not the expected %zu "
                          "messages (length %lld, generation %lld): nothing written",
                          thread_id, (long long)keep, o.nexpected_suffix,
                          (long long)seen_length, (long long)seen_generation);
    }
    if (rc == 0 && r.replayed) {
        if (r.first_seq != keep)
            rc = convo__error(err, CONVO_ECONFLICT, NULL,
                              "idempotency key %s was used for another call (seq %lld, %zu "
                              "messages): this one is not applied",
                              o.idempotency_key, (long long)r.first_seq, r.count);
        else
            rc = convo__check_replay(s, thread_id, in, n, o.idempotency_key, r.first_seq,
                                     r.count, err);
    }
    convo__messages_free(in, n);
    if (rc == 0 && res)
        *res = r;
    return rc;
}
