/* import.c — the MongoDB driver: thread import (convo import / copy). */
#include "mongo_int.h"

/* ---- import (convo import / copy) ---- */

/* A run of messages [from, to) of an import chunk and its messages array (on
 * the heap: a bson_t must not move once it has grown). */
typedef struct piece {
    size_t from, to;
    bson_t *m;
} piece;

/* A new piece starting with message i; false when that message alone is too big. */
static bool piece_start(piece *p, size_t i, const convo_message_in *msgs, const int64_t *at)
{
    p->from = i;
    p->to = i + 1;
    p->m = bson_new();
    return convo__mg_add_message(p->m, 0, &msgs[i], false, at[i], PIECE_LIMIT);
}

/* Adds message i to p, or leaves p as it was and returns false when it would not fit. */
static bool piece_add(piece *p, size_t i, const convo_message_in *msgs, const int64_t *at)
{
    const int64_t base = at[p->from];
    if (convo__mg_add_message(p->m, (uint32_t)(i - p->from), &msgs[i], at[i] != base, at[i],
                              PIECE_LIMIT)) {
        p->to = i + 1;
        return true;
    }
    bson_destroy(p->m); /* rebuild without the message that did not fit */
    p->m = bson_new();
    for (size_t j = p->from; j < p->to; j++)
        convo__mg_add_message(p->m, (uint32_t)(j - p->from), &msgs[j], at[j] != base, at[j],
                              PIECE_LIMIT);
    return false;
}

/* Splits a chunk into pieces whose batch documents fit in 16 MiB (one piece,
 * stored atomically, unless the chunk is larger). */
static int split_chunk(call *c, const convo_message_in *msgs, const int64_t *at, size_t n,
                       piece **out, size_t *count)
{
    piece *p = NULL;
    size_t np = 0;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (np && piece_add(&p[np - 1], i, msgs, at))
            continue;
        piece *grown = realloc(p, (np + 1) * sizeof *p);
        if (!grown) {
            rc = convo__mg_no_memory(c);
            break;
        }
        p = grown;
        if (!piece_start(&p[np++], i, msgs, at))
            rc = convo__error(c->err, CONVO_ETOOLARGE, NULL,
                              "message %zu is larger than a MongoDB document (16 MiB)", i);
    }
    *out = p;
    *count = np;
    return rc;
}

static void pieces_free(piece *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        bson_destroy(p[i].m);
    free(p);
}

/* One try at storing a chunk at first_seq; resumes at a piece boundary a killed
 * import of the same chunk reached. */
static int import_attempt(call *c, const char *id, int64_t first_seq, const piece *p, size_t np,
                          const int64_t *at, int64_t generation, int *skipped, bool *again)
{
    thread_doc t;
    batch_head top;
    int64_t now = convo__mg_now_ms(), end = first_seq + (int64_t)p[np - 1].to;
    size_t j = 0;
    int rc = convo__mg_writable_thread(c, id, false, true, &t, again);
    if (rc == 0 && !*again)
        rc = convo__mg_top_batch(c, &t.g, &top);
    if (rc || *again)
        goto out;
    if (top.found && top.fence) {
        rc = convo__mg_finish_delete(c, id, &t.g, false);
        *again = true;
        goto out;
    }
    batch_pos pos;
    convo__mg_next_pos(&top, &pos);
    int64_t length = pos.start;
    if (!top.found && first_seq == 0) /* the thread's first batch carries its generation */
        pos.r = generation;
    else if (pos.r != generation) {
        rc = convo__error(c->err, CONVO_ECONFLICT, NULL,
                          "thread is at generation %lld, the dump at %lld: its tail was rewritten",
                          (long long)pos.r, (long long)generation);
        goto out;
    }
    if ((*skipped = length >= end))
        goto out;
    while (j < np && first_seq + (int64_t)p[j].from != length)
        j++;
    if (j == np) {
        rc = convo__error(c->err, CONVO_ECONFLICT, NULL,
                          "thread has %lld messages, the dump continues at %lld",
                          (long long)length, (long long)first_seq);
        goto out;
    }
    if ((rc = convo__mg_extend_expiry(c, id, &t, now, again)) != 0 || *again)
        goto out;
    for (; j < np && rc == 0 && !*again; j++) {
        bson_t doc;
        size_t n = p[j].to - p[j].from;
        pos.start = first_seq + (int64_t)p[j].from;
        convo__mg_build_batch(c->b, &t.g, &pos, n, NULL, at[p[j].from], now, p[j].m, &doc);
        rc = convo__mg_insert_batch(c, &doc, again, "importing messages");
        bson_destroy(&doc);
        pos.pb = pos.slot; /* the next piece starts where this one ends */
        pos.slot += (int64_t)n;
    }
    if (rc == 0 && !*again) /* an import's own times: now (a staged copy is not listed) */
        quietly(c, convo__mg_index_after_batch, id, &t.g, pos.slot - (int64_t)(p[np - 1].to -
                p[np - 1].from), end, convo__now_micros());
out:
    convo__mg_thread_free(&t);
    return rc;
}

int convo__mg_thread_import(convo_backend *b, const char *id, int64_t first_seq,
                               const convo_message_in *msgs, const int64_t *created_at, size_t n,
                               int64_t generation, int *skipped, convo_error *err)
{
    call c;
    piece *p = NULL;
    size_t np = 0;
    convo__mg_call_begin(&c, b, err);
    *skipped = 0;
    int rc = split_chunk(&c, msgs, created_at, n, &p, &np);
    for (int attempt = 0; rc == 0; attempt++) {
        bool again = false;
        if (attempt == ATTEMPTS) {
            rc = convo__mg_contention(&c);
            break;
        }
        convo__mg_backoff(attempt);
        rc = import_attempt(&c, id, first_seq, p, np, created_at, generation, skipped, &again);
        if (!again)
            break;
    }
    pieces_free(p, np);
    convo__mg_call_end(&c);
    return rc;
}
