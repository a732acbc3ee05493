/* refs.c — the MongoDB driver: a checkpoint put with log references
 * (checkpoint_put_refs). Without transactions the put and its swaps cannot be
 * one write: the put first, exactly as checkpoint_put_log (or checkpoint_put
 * after the generation check), then each swap, raising log_length before the
 * value changes. docs/mongo.md, "Put with log references", says why every
 * crash between the steps is safe. */
#include "mongo_int.h"

/* No message with the put: the generation condition, read as an append reads
 * it (a thread callers cannot see is at generation 0). */
static int generation_check(call *c, const char *id, int64_t expected)
{
    thread_doc t;
    batch_head top;
    bool replayed = false, yes = false;
    convo_append_result unused;
    batch_pos pos;
    int rc = convo__mg_read_for_append(c, id, NULL, &t, &top, &replayed, &unused);
    if (rc == 0 && t.found)
        rc = convo__mg_visible(c, &t, convo__mg_now_ms(), &yes);
    if (rc == 0) {
        convo__mg_next_pos(yes ? &top : NULL, &pos);
        rc = convo__mg_generation_conflict(c, pos.start, pos.r, expected);
    }
    convo__mg_thread_free(&t);
    return rc;
}

/* The key of a swap's value: {g, ns, cp, task, idx} in writes, {g, ns, c, v} in values. */
static bson_t *swap_key(const bson_oid_t *g, const char *ns, const convo_swap *w)
{
    bson_t *key = convo__mg_ns_filter(g, ns);
    if (w->task_id)
        BCON_APPEND(key, "cp", BCON_UTF8(w->checkpoint_id), "task", BCON_UTF8(w->task_id), "idx",
                    BCON_INT64(w->idx));
    else
        BCON_APPEND(key, "c", BCON_UTF8(w->channel), "v", BCON_UTF8(w->version));
    return key;
}

static bool holds(const bson_t *doc, const convo_blob *v)
{
    uint32_t len;
    const char *type = convo__mg_get_utf8(doc, "ty");
    const uint8_t *bytes = convo__mg_get_binary(doc, "b", &len);
    return type && strcmp(type, v->type) == 0 && len == v->len &&
           (len == 0 || memcmp(bytes, v->bytes, len) == 0);
}

static void append_blob(bson_t *doc, const convo_blob *v)
{
    BSON_APPEND_UTF8(doc, "ty", v->type);
    BSON_APPEND_BINARY(doc, "b", BSON_SUBTYPE_BINARY, v->bytes ? v->bytes : (const void *)"",
                       (uint32_t)v->len);
}

/* One swap: the value read; when it holds old_value, its checkpoint's ll
 * raised ($max; no checkpoint: skipped), then the value replaced only while it
 * still holds old_value (the filter names ty and b: a value changed meanwhile
 * is left alone). */
static int swap_one(call *c, const bson_oid_t *g, const char *ns, const convo_swap *w)
{
    mongoc_collection_t *coll = convo__mg_kind(c, w->task_id ? WRITES : VALUES);
    bson_t *key = swap_key(g, ns, w), doc;
    bool found = false;
    int64_t matched = 0;
    int rc = convo__mg_find_one(c, coll, key, NULL, &doc, &found, "reading a value to swap");
    bool same = rc == 0 && found && holds(&doc, &w->old_value);
    bson_destroy(&doc);
    if (same) {
        bson_t *cp = convo__mg_ns_filter(g, ns);
        BSON_APPEND_UTF8(cp, "id", w->checkpoint_id);
        bson_t *raise = BCON_NEW("$max", "{", "ll", BCON_INT64(w->log_length), "}");
        rc = convo__mg_update_one(c, convo__mg_kind(c, CHECKPOINTS), cp, raise, &matched,
                                  "raising a checkpoint's log length");
        bson_destroy(cp);
        bson_destroy(raise);
    }
    if (same && rc == 0 && matched > 0) {
        bson_t set;
        bson_t *update = bson_new();
        append_blob(key, &w->old_value);
        BSON_APPEND_DOCUMENT_BEGIN(update, "$set", &set);
        append_blob(&set, &w->new_value);
        bson_append_document_end(update, &set);
        rc = convo__mg_update_one(c, coll, key, update, NULL, "swapping a value for a reference");
        bson_destroy(update);
    }
    bson_destroy(key);
    return rc;
}

/* After the put: the thread's generation id (its checkpoints settled, so the
 * parent is where the swaps look), then the swaps in order; the first error
 * stops them. */
static int swap_all(call *c, const char *id, const char *ns, const convo_swap *swaps,
                    size_t n)
{
    thread_doc t;
    bool yes = false;
    int rc = convo__mg_read_settled(c, id, &t, &yes);
    for (size_t i = 0; rc == 0 && yes && i < n; i++)
        if (swaps[i].new_value.len <= PIECE_LIMIT)
            rc = swap_one(c, &t.g, ns, &swaps[i]);
    convo__mg_thread_free(&t);
    return rc;
}

int convo__mg_checkpoint_put_refs(convo_backend *b, const convo_checkpoint_in *cp,
                                  const convo_message_in *msgs, size_t nmsgs,
                                  const convo_swap *swaps, size_t nswaps, convo_error *err)
{
    call c;
    int rc = 0;
    if (nmsgs == 0 && cp->expected_generation >= 0) {
        convo__mg_call_begin(&c, b, err);
        rc = generation_check(&c, cp->thread_id, cp->expected_generation);
        convo__mg_call_end(&c);
    }
    if (rc == 0)
        rc = nmsgs ? convo__mg_checkpoint_put_log(b, cp, msgs, err)
                   : convo__mg_checkpoint_put(b, cp, err);
    if (rc != 0 || nswaps == 0)
        return rc;
    /* the put is in: a swap that fails leaves its value inline, as good */
    convo__mg_call_begin(&c, b, err);
    quietly(&c, swap_all, cp->thread_id, cp->checkpoint_ns, swaps, nswaps);
    convo__mg_call_end(&c);
    return 0;
}
