/* rewrite.c — `convo pop` (read the last messages, then remove exactly those:
 * a replace conditional on the (length, generation) they were read at) and
 * `convo replace-tail` (keep N messages, store new ones after them). */
#include "rewrite.h"
#include <errno.h>
#include <stdio.h>
#include <string.h>

/* A pop that lost a race with another writer reads the tail again; this many
 * times at most, so that a thread rewritten without pause cannot hold it forever. */
#define POP_ATTEMPTS 50

/* The thread's length and generation, without reading a message. */
static int thread_state(convo_store *s, const char *thread_id, int64_t *length,
                        int64_t *generation, convo_error *err)
{
    convo_load_opts lo = CONVO_LOAD_OPTS_INIT;
    lo.from_seq = INT64_MAX; /* past the end: no messages */
    lo.with_extra = 0;
    convo_history *h;
    int rc = convo_load(s, thread_id, &lo, &h, err);
    if (rc == 0) {
        *length = convo_history_length(h);
        *generation = convo_history_generation(h);
        convo_history_free(h);
    }
    return rc;
}

/* Removes the messages of h (the tail read at (length, generation)) only if
 * the thread is still at that state. */
static int remove_read_tail(convo_store *s, const char *thread_id, const convo_history *h,
                            int drop_checkpoints, convo_error *err)
{
    convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
    o.expected_length = convo_history_length(h);
    o.expected_generation = convo_history_generation(h);
    o.drop_checkpoints = drop_checkpoints;
    int64_t keep = o.expected_length - (int64_t)convo_history_count(h);
    return convo_replace_tail(s, thread_id, keep, NULL, NULL, 0, &o, NULL, err);
}

static int print_removed(const convo_history *h)
{
    size_t n = convo_history_count(h);
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *msg = convo_history_message(h, i, &len);
        fwrite(msg, 1, len, stdout);
        putchar('\n');
    }
    if (fflush(stdout) != 0 || ferror(stdout)) {
        /* they are gone from the store: say so, a retry would remove more */
        fprintf(stderr, "convo: %zu messages were removed (from seq %lld) but standard output "
                "could not be written: %s\n", n,
                (long long)(n ? convo_history_seq(h, 0) : convo_history_length(h)),
                strerror(errno));
        return STATUS_STORED_NO_OUTPUT;
    }
    return STATUS_OK;
}

/* One attempt: *h gets the tail that was read; *retry is set when the
 * removal lost a race that a fresh read may win. */
static int pop_once(convo_store *s, const char *thread_id, int64_t count, int64_t expect_length,
                    int drop_checkpoints, convo_history **h, int *retry)
{
    convo_load_opts lo = CONVO_LOAD_OPTS_INIT;
    lo.tail = count;
    lo.with_extra = 0;
    convo_error err;
    *retry = 0;
    int rc = convo_load(s, thread_id, &lo, h, &err);
    if (rc != 0)
        return fail(rc, &err);
    int64_t length = convo_history_length(*h), generation = convo_history_generation(*h);
    if (expect_length >= 0 && length != expect_length)
        return fail_msg(STATUS_CONFLICT, "thread %s has %lld messages, not the expected %lld: "
                        "nothing removed", thread_id, (long long)length,
                        (long long)expect_length);
    if (convo_history_count(*h) == 0)
        return STATUS_OK; /* nothing to pop: nothing written */
    rc = remove_read_tail(s, thread_id, *h, drop_checkpoints, &err);
    if (rc == CONVO_ECONFLICT && expect_length < 0) {
        /* retry only if another writer moved the thread; a checkpoint in the
         * way (or anything else) stays a conflict however often it is tried */
        int64_t now_length, now_generation;
        convo_error err2;
        int rc2 = thread_state(s, thread_id, &now_length, &now_generation, &err2);
        if (rc2 == 0 && (now_length != length || now_generation != generation)) {
            *retry = 1;
            return STATUS_CONFLICT;
        }
        if (rc2 != 0)
            return fail(rc2, &err2); /* e.g. deleted meanwhile: not found */
    }
    return rc != 0 ? fail(rc, &err) : STATUS_OK;
}

int convo_tool_pop(convo_store *s, const invocation *inv)
{
    int64_t count = 1, expect_length = -1;
    int st = opt_count(inv, "--count", &count);
    if (st == STATUS_OK)
        st = opt_count(inv, "--expect-length", &expect_length);
    if (st != STATUS_OK)
        return st;
    if (count == 0)
        return usage_error(inv->cmd, "--count must be at least 1");
    int drop = opt_value(inv, "--drop-checkpoints") != NULL;
    for (int attempt = 0; attempt < POP_ATTEMPTS; attempt++) {
        convo_history *h = NULL;
        int retry;
        st = pop_once(s, inv->args[0], count, expect_length, drop, &h, &retry);
        if (st == STATUS_OK)
            st = print_removed(h);
        convo_history_free(h);
        if (!retry)
            return st;
    }
    return fail_msg(STATUS_CONFLICT, "thread %s changed under each of %d attempts to pop: "
                    "nothing removed", inv->args[0], POP_ATTEMPTS);
}

/* The new messages: the JSON arguments after THREAD, else JSON Lines on stdin
 * (none at all is a truncation to --keep). */
static int new_messages(const invocation *inv, batch *b, int *from_stdin)
{
    *from_stdin = inv->nargs == 1;
    if (*from_stdin)
        return read_lines(stdin, b, 1);
    b->msgs = (const char **)inv->args + 1;
    b->n = (size_t)inv->nargs - 1;
    return STATUS_OK;
}

static int rewrite_opts(const invocation *inv, int64_t *keep, convo_rewrite_opts *o)
{
    *keep = -1;
    int st = opt_count(inv, "--keep", keep);
    if (st == STATUS_OK)
        st = opt_count(inv, "--expect-length", &o->expected_length);
    if (st == STATUS_OK)
        st = opt_count(inv, "--expect-generation", &o->expected_generation);
    if (st == STATUS_OK && *keep < 0)
        st = usage_error(inv->cmd, "replace-tail needs --keep N");
    o->idempotency_key = opt_value(inv, "--idempotency-key");
    o->drop_checkpoints = opt_value(inv, "--drop-checkpoints") != NULL;
    return st;
}

int convo_tool_replace_tail(convo_store *s, const invocation *inv)
{
    convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
    int64_t keep;
    int st = rewrite_opts(inv, &keep, &o);
    if (st != STATUS_OK)
        return st;
    batch b = {0};
    int from_stdin;
    if ((st = new_messages(inv, &b, &from_stdin)) != STATUS_OK) {
        batch_free(&b);
        return st;
    }
    convo_rewrite_result res;
    convo_error err;
    int rc = convo_replace_tail(s, inv->args[0], keep, b.msgs, b.lens, b.n, &o, &res, &err);
    if (rc != 0) {
        name_rejected_message(&err, &b, from_stdin);
        st = fail(rc, &err);
    } else {
        printf("%lld %zu %lld\n", (long long)res.first_seq, res.count,
               (long long)res.generation);
        if (fflush(stdout) != 0 || ferror(stdout)) {
            fprintf(stderr, "convo: the tail is rewritten (first seq %lld, %zu messages, "
                    "generation %lld) but standard output could not be written: %s\n",
                    (long long)res.first_seq, res.count, (long long)res.generation,
                    strerror(errno));
            st = STATUS_STORED_NO_OUTPUT;
        }
    }
    if (from_stdin)
        batch_free(&b);
    return st;
}
