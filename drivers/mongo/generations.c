/* generations.c — the MongoDB driver: thread documents, batches, retiring a
 * generation, garbage. */
#include "mongo_int.h"

/* ---- thread documents ---- */

int convo__mg_parse_thread(call *c, const bson_t *doc, thread_doc *t)
{
    bson_iter_t it;
    if (!bson_iter_init_find(&it, doc, "g") || !BSON_ITER_HOLDS_OID(&it))
        return convo__mg_corrupt(c, "thread document without a generation");
    bson_oid_copy(bson_iter_oid(&it), &t->g);
    t->live = convo__mg_get_bool(doc, "live");
    t->dying = convo__mg_get_bool(doc, "dying");
    t->forking = convo__mg_get_bool(doc, "forking");
    t->v = convo__mg_get_int(doc, "v", 0);
    t->created_ms = convo__mg_get_int(doc, "c", 0);
    t->exp_ms = convo__mg_get_date(doc, "exp");
    t->bexp_ms = convo__mg_get_date(doc, "bexp");
    t->ua = convo__mg_get_int(doc, "ua", -1);
    t->ca = convo__mg_get_int(doc, "ca", -1);
    t->ln = convo__mg_get_int(doc, "ln", -1);
    t->sl = convo__mg_get_int(doc, "sl", -1);
    t->indexed = t->ua >= 0 && t->ca >= 0;
    if (bson_iter_init_find(&it, doc, "extra") && BSON_ITER_HOLDS_DOCUMENT(&it)) {
        uint32_t len;
        const uint8_t *data;
        bson_t view;
        bson_iter_document(&it, &len, &data);
        if (!bson_init_static(&view, data, len))
            return convo__mg_corrupt(c, "stored extra is not a document");
        bson_destroy(&t->extra);
        bson_copy_to(&view, &t->extra);
    }
    return 0;
}

int convo__mg_read_thread(call *c, const char *id, bool with_extra, thread_doc *t)
{
    memset(t, 0, sizeof *t);
    bson_init(&t->extra);
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(id));
    bson_t *opts = with_extra ? BCON_NEW("limit", BCON_INT64(1))
                              : BCON_NEW("limit", BCON_INT64(1), "projection", "{", "extra",
                                         BCON_INT32(0), "}");
    bson_t doc;
    int rc = convo__mg_find_one(c, c->threads, filter, opts, &doc, &t->found, "reading a thread");
    if (rc == 0 && t->found)
        rc = convo__mg_parse_thread(c, &doc, t);
    bson_destroy(&doc);
    bson_destroy(filter);
    bson_destroy(opts);
    return rc;
}

void convo__mg_thread_free(thread_doc *t)
{
    bson_destroy(&t->extra);
}

bool convo__mg_expired(const thread_doc *t, int64_t now)
{
    return t->exp_ms != 0 && t->exp_ms <= now;
}

/* A new thread document; false when extra makes it too large. */
bool convo__mg_build_thread(const convo_backend *b, const char *id, const bson_oid_t *g, bool live,
                         bool forking, int64_t v, const bson_t *extra, int64_t now, bson_t *doc)
{
    bson_t empty = BSON_INITIALIZER;
    bson_init(doc);
    BSON_APPEND_UTF8(doc, "_id", id);
    BSON_APPEND_OID(doc, "g", g);
    BSON_APPEND_BOOL(doc, "live", live);
    if (forking) {
        BSON_APPEND_BOOL(doc, "forking", true);
        BSON_APPEND_INT64(doc, "c", now);
    }
    BSON_APPEND_INT64(doc, "v", v);
    if (live && convo__mg_listable(id)) { /* created by save_extra: in the index at once */
        int64_t us = convo__now_micros();
        BSON_APPEND_INT64(doc, "ua", us);
        BSON_APPEND_INT64(doc, "ca", us);
        BSON_APPEND_INT64(doc, "ln", 0);
    }
    if (b->ttl_ms) {
        BSON_APPEND_DATE_TIME(doc, "exp", now + b->ttl_ms);
        BSON_APPEND_DATE_TIME(doc, "bexp", now + 2 * b->ttl_ms + TTL_MARGIN_MS);
    }
    return BSON_APPEND_DOCUMENT(doc, "extra", extra ? extra : &empty) && doc->len <= DOC_LIMIT;
}

/* ---- batches ---- */

void convo__mg_parse_head(const bson_t *doc, batch_head *h)
{
    h->found = true;
    h->s = convo__mg_get_int(doc, "s", 0);
    h->e = convo__mg_get_int(doc, "e", h->s);
    h->n = convo__mg_get_int(doc, "n", h->e - h->s);
    h->r = convo__mg_get_int(doc, "r", 0);
    h->pb = convo__mg_get_int(doc, "pb", NO_BELOW);
    h->fence = convo__mg_get_bool(doc, "f");
    h->at = convo__mg_get_int(doc, "at", 0);
}

/* The batch after top (NULL or not found: the first): the next slot, at the
 * thread's length, with its rewrite count. A batch takes max(n, 1) slots, so a
 * thread never rewritten has each batch at the seq of its first message. Its
 * pb names the batch holding the message before its first: top, unless top is
 * empty (a rewrite that removed and added nothing): then top's pb is its too.
 * (Recorded so a later rewrite of the tail finds that batch without a read.) */
void convo__mg_next_pos(const batch_head *top, batch_pos *p)
{
    bool any = top && top->found;
    p->slot = any ? top->s + (top->n > 0 ? top->n : 1) : 0;
    p->start = any ? top->e : 0;
    p->r = any ? top->r : 0;
    p->pb = !any ? NO_BELOW : top->n > 0 ? top->s : top->pb;
}

/* The batch with the highest s of generation g: its end is the thread's length. */
int convo__mg_top_batch(call *c, const bson_oid_t *g, batch_head *h)
{
    bson_t *filter = convo__mg_generation_filter(g);
    bson_t *opts = BCON_NEW("sort", "{", "s", BCON_INT32(-1), "}", "limit", BCON_INT64(1),
                            "projection", "{", "m", BCON_INT32(0), "cp", BCON_INT32(0), "dc",
                            BCON_INT32(0), "}");
    bson_t doc;
    memset(h, 0, sizeof *h);
    bool found;
    int rc =
        convo__mg_find_one(c, c->batches, filter, opts, &doc, &found, "reading a thread's length");
    if (rc == 0 && found)
        convo__mg_parse_head(&doc, h);
    bson_destroy(&doc);
    bson_destroy(filter);
    bson_destroy(opts);
    return rc;
}

/* One batch of a walk down by slot: STEP_SKIP when a rewrite above replaced its
 * messages (they start at or above lim), STEP_TAKE when the walk reads its
 * messages [e - n, *hi), STEP_GAP when the chain is not whole: a fence, or
 * not the batch the one above names (pb) or ends at (a delete removing the
 * thread, or the collection after a newer rewrite removing batches this walk
 * still needs: without the check a longer batch below could stand in for
 * them). The caller starts with lim: the length (the top batch's e), or the
 * end of a window in a thread never rewritten. */
int convo__mg_walk_step(chain_walk *w, const batch_head *h, int64_t *hi)
{
    int64_t start = h->e - h->n;
    if (h->fence)
        return STEP_GAP;
    if (start >= w->lim) {
        if (!w->started) { /* an empty top batch: it names the batch below it */
            w->want = h->pb;
            w->started = true;
        }
        return STEP_SKIP;
    }
    if (w->started && (w->want != NO_BELOW ? h->s != w->want : h->e != w->lim))
        return STEP_GAP;
    if (h->e < w->lim)
        return STEP_GAP;
    *hi = w->lim;
    w->lim = start;
    w->want = h->pb;
    w->started = true;
    return STEP_TAKE;
}

/* Stores batch doc at its slot s as the new top of its generation's chain:
 * an upsert {g, s: {$gte: s}} with the batch as $setOnInsert, so it is stored
 * only while no batch lies at or above s. *dup when one does (another writer
 * went on top: the slot was taken, or taken and then collected below a
 * rewrite above it, see "Tail rewrite" in docs/mongo.md) or when its key is
 * taken; read again then. A plain insert would take a collected slot below
 * the top: an append or rewrite no load ever reads, reported as done. */
int convo__mg_insert_batch(call *c, const bson_t *doc, bool *dup, const char *what)
{
    bson_iter_t it;
    bson_t *filter = bson_new(), update = BSON_INITIALIZER, fields, reply;
    bson_error_t e;
    *dup = false;
    if (bson_iter_init_find(&it, doc, "g"))
        bson_append_iter(filter, "g", 1, &it);
    BCON_APPEND(filter, "s", "{", "$gte", BCON_INT64(convo__mg_get_int(doc, "s", 0)), "}");
    BSON_APPEND_DOCUMENT_BEGIN(&update, "$setOnInsert", &fields);
    bson_copy_to_excluding_noinit(doc, &fields, "g", NULL);
    bson_append_document_end(&update, &fields);
    bson_t *opts = BCON_NEW("upsert", BCON_BOOL(true));
    bool ok = mongoc_collection_update_one(c->batches, filter, &update, opts, &reply, &e);
    int rc = 0;
    if (ok)
        *dup = convo__mg_get_int(&reply, "upsertedCount", 0) != 1;
    else if (convo__mg_is_duplicate(&e))
        *dup = true;
    else
        rc = convo__mg_fail(c, &e, what);
    bson_destroy(&reply);
    bson_destroy(opts);
    bson_destroy(&update);
    bson_destroy(filter);
    return rc;
}

/* A fence ends generation g after top (NULL: none): no batch can be inserted
 * there any more. */
int convo__mg_insert_fence(call *c, const bson_oid_t *g, const batch_head *top, bool *dup)
{
    batch_pos p;
    convo__mg_next_pos(top, &p);
    bson_t *doc = BCON_NEW("g", BCON_OID(g), "s", BCON_INT64(p.slot), "e", BCON_INT64(p.start),
                           "n", BCON_INT64(0), "k", BCON_INT64(p.slot), "f", BCON_BOOL(true));
    if (c->b->ttl_ms)
        BSON_APPEND_DATE_TIME(doc, "exp", convo__mg_now_ms() + 3 * c->b->ttl_ms + TTL_MARGIN_MS);
    int rc = convo__mg_insert_batch(c, doc, dup, "fencing a thread");
    bson_destroy(doc);
    return rc;
}

/* Removes fenced generation g: the thread doc first (readers then see no thread),
 * then its messages and checkpoints, then the fence. */
int convo__mg_retire(call *c, const char *id, const bson_oid_t *g)
{
    bson_t *thread = BCON_NEW("_id", BCON_UTF8(id), "g", BCON_OID(g));
    bson_t *messages = BCON_NEW("g", BCON_OID(g), "f", "{", "$exists", BCON_BOOL(false), "}");
    bson_t *all = convo__mg_generation_filter(g);
    int rc = convo__mg_delete_docs(c, c->threads, thread, false, NULL, "deleting a thread");
    if (rc == 0)
        rc = convo__mg_delete_docs(c, c->batches, messages, true, NULL, "deleting messages");
    for (int k = CHECKPOINTS; k < KINDS && rc == 0; k++)
        rc =
            convo__mg_delete_docs(c, convo__mg_kind(c, k), all, true, NULL, "deleting checkpoints");
    if (rc == 0)
        rc = convo__mg_delete_docs(c, c->batches, all, true, NULL, "deleting messages");
    bson_destroy(thread);
    bson_destroy(messages);
    bson_destroy(all);
    return rc;
}

/* Deletes every document of generation g (fork placeholders, dead generations). */
int convo__mg_delete_generation(call *c, const bson_oid_t *g, const char *what)
{
    bson_t *all = convo__mg_generation_filter(g);
    int rc = 0;
    for (int k = 0; k < KINDS && rc == 0; k++)
        rc = convo__mg_delete_docs(c, convo__mg_kind(c, k), all, true, NULL, what);
    bson_destroy(all);
    return rc;
}

/* Sets the dying mark: extra writes in flight miss their filter on v, and list
 * no longer trusts live without a look at the top batch. */
int convo__mg_mark_dying(call *c, const char *id, const bson_oid_t *g, bool only_first,
                      int64_t *matched)
{
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(id), "g", BCON_OID(g));
    if (only_first)
        BCON_APPEND(filter, "dying", "{", "$ne", BCON_BOOL(true), "}");
    bson_t *update = BCON_NEW("$set", "{", "dying", BCON_BOOL(true), "}", "$inc", "{", "v",
                              BCON_INT64(1), "}");
    int rc = convo__mg_update_one(c, c->threads, filter, update, matched, "deleting a thread");
    bson_destroy(filter);
    bson_destroy(update);
    return rc;
}

/* Completes the delete of generation g: marks it dying (unless the caller did),
 * fences it at its end, then retires it. */
int convo__mg_finish_delete(call *c, const char *id, const bson_oid_t *g, bool marked)
{
    int rc = marked ? 0 : convo__mg_mark_dying(c, id, g, false, NULL);
    for (int attempt = 0; rc == 0 && attempt < ATTEMPTS; attempt++) {
        batch_head top;
        bool dup = false;
        rc = convo__mg_top_batch(c, g, &top);
        if (rc == 0 && !(top.found && top.fence))
            rc = convo__mg_insert_fence(c, g, &top, &dup);
        if (rc == 0 && !dup)
            return convo__mg_retire(c, id, g);
    }
    return rc ? rc : convo__mg_contention(c);
}

/* Cancels a fork still copying into id: whoever deletes its placeholder wins, and
 * the fork's commit then matches nothing. */
int convo__mg_abort_fork(call *c, const char *id, const bson_oid_t *g)
{
    bson_t *filter = BCON_NEW("_id", BCON_UTF8(id), "g", BCON_OID(g), "forking", BCON_BOOL(true));
    int64_t deleted = 0;
    int rc = convo__mg_delete_docs(c, c->threads, filter, false, &deleted, "cancelling a fork");
    bson_destroy(filter);
    if (rc == 0 && deleted == 1) {
        bson_t *batches = convo__mg_generation_filter(g);
        rc = convo__mg_delete_docs(c, c->batches, batches, true, NULL, "cancelling a fork");
        bson_destroy(batches);
    }
    return rc;
}

/* Whether a thread doc names generation g (any thread's: ids may share a hash). */
int convo__mg_generation_named(call *c, const bson_oid_t *g, bool *named)
{
    bson_t *filter = BCON_NEW("g", BCON_OID(g)), doc;
    bson_t *opts = BCON_NEW("limit", BCON_INT64(1), "projection", "{", "_id", BCON_INT32(1), "}");
    int rc = convo__mg_find_one(c, c->threads, filter, opts, &doc, named, "looking for leftovers");
    bson_destroy(&doc);
    bson_destroy(filter);
    bson_destroy(opts);
    return rc;
}

/* Deletes the documents of kind k of dead generations of id (left by a process
 * killed during a delete, or by a write racing one), found by the id's hash
 * prefix of g. A generation is dead once no thread doc names it: its doc was
 * written before any of its documents and a g is never named again, so reading
 * a document first and the thread docs second cannot mistake a newborn for the
 * dead. */
static int collect_garbage_in(call *c, const char *id, int k)
{
    bson_oid_t live[GC_ROUNDS], low, high;
    size_t nlive = 0;
    int rc = 0;
    convo__mg_generation_range(id, &low, &high);
    for (int round = 0; round < GC_ROUNDS && rc == 0; round++) {
        bson_t filter = BSON_INITIALIZER, g, nin, doc;
        BSON_APPEND_DOCUMENT_BEGIN(&filter, "g", &g);
        BSON_APPEND_OID(&g, "$gte", &low);
        BSON_APPEND_OID(&g, "$lte", &high);
        BSON_APPEND_ARRAY_BEGIN(&g, "$nin", &nin);
        for (size_t i = 0; i < nlive; i++) {
            char buf[16];
            const char *key;
            bson_uint32_to_string((uint32_t)i, &key, buf, sizeof buf);
            BSON_APPEND_OID(&nin, key, &live[i]);
        }
        bson_append_array_end(&g, &nin);
        bson_append_document_end(&filter, &g);
        bson_t *opts =
            BCON_NEW("limit", BCON_INT64(1), "projection", "{", "g", BCON_INT32(1), "}");
        bool found, named = false;
        bson_iter_t it;
        rc = convo__mg_find_one(c, convo__mg_kind(c, k), &filter, opts, &doc, &found,
                                "looking for leftovers");
        bson_destroy(&filter);
        bson_destroy(opts);
        if (rc || !found || !bson_iter_init_find(&it, &doc, "g") || !BSON_ITER_HOLDS_OID(&it)) {
            bson_destroy(&doc);
            break;
        }
        bson_oid_t candidate;
        bson_oid_copy(bson_iter_oid(&it), &candidate);
        bson_destroy(&doc);
        rc = convo__mg_generation_named(c, &candidate, &named);
        if (rc == 0 && named)
            bson_oid_copy(&candidate, &live[nlive++]);
        else if (rc == 0)
            rc = convo__mg_delete_generation(c, &candidate, "deleting leftovers");
    }
    return rc;
}

int convo__mg_collect_garbage(call *c, const char *id)
{
    int rc = 0;
    for (int k = 0; k < KINDS && rc == 0; k++)
        rc = collect_garbage_in(c, id, k);
    return rc;
}

/* With ttl: pushes the expiry of g's batches well past the thread doc's, before
 * the thread doc's own expiry moves, so messages never expire first. */
int convo__mg_refresh_batches(call *c, const thread_doc *t, int64_t now, bool *refreshed)
{
    const convo_backend *b = c->b;
    *refreshed = false;
    if (!b->ttl_ms || t->bexp_ms >= now + b->ttl_ms + TTL_MARGIN_MS)
        return 0;
    bson_t *filter = BCON_NEW("g", BCON_OID(&t->g), "exp", "{", "$lt",
                              BCON_DATE_TIME(now + 2 * b->ttl_ms + TTL_MARGIN_MS), "}");
    bson_t *update = BCON_NEW("$set", "{", "exp",
                              BCON_DATE_TIME(now + 3 * b->ttl_ms + TTL_MARGIN_MS), "}");
    int rc = 0;
    for (int k = 0; k < KINDS && rc == 0; k++)
        rc = convo__mg_update_many(c, convo__mg_kind(c, k), filter, update, "extending expiry");
    bson_destroy(filter);
    bson_destroy(update);
    *refreshed = rc == 0;
    return rc;
}

/* Adds exp (and bexp after a refresh) to the $max document of a thread update. */
void convo__mg_expiry_fields(const convo_backend *b, bson_t *max, int64_t now, bool refreshed)
{
    if (!b->ttl_ms)
        return;
    BSON_APPEND_DATE_TIME(max, "exp", now + b->ttl_ms);
    if (refreshed)
        BSON_APPEND_DATE_TIME(max, "bexp", now + 2 * b->ttl_ms + TTL_MARGIN_MS);
}

/* Adds the $max of exp (and bexp after a refresh) to a thread update. */
void convo__mg_append_expiry(const convo_backend *b, bson_t *update, int64_t now, bool refreshed)
{
    if (!b->ttl_ms)
        return;
    bson_t max = BSON_INITIALIZER;
    convo__mg_expiry_fields(b, &max, now, refreshed);
    BSON_APPEND_DOCUMENT(update, "$max", &max);
    bson_destroy(&max);
}

/* Clears what stands in the way of a write to thread doc t (as read): an expired
 * or half-deleted incarnation is finished off, a fork still copying is cancelled
 * (*again: start over). A missing doc is made as an invisible placeholder when
 * create is set (appends; *created), else left to the caller (t->found false). */
int convo__mg_clear_way(call *c, const char *id, bool create, thread_doc *t, bool *created,
                     bool *again)
{
    int64_t now = convo__mg_now_ms();
    int rc = 0;
    *created = false;
    if (!t->found && create) {
        bson_t doc;
        bool dup = false;
        convo__mg_new_generation(id, &t->g);
        convo__mg_build_thread(c->b, id, &t->g, false, false, 0, NULL, now, &doc);
        rc = convo__mg_insert_doc(c, c->threads, &doc, &dup, "creating a thread");
        bson_destroy(&doc);
        t->found = *created = rc == 0 && !dup;
        t->bexp_ms = c->b->ttl_ms ? now + 2 * c->b->ttl_ms + TTL_MARGIN_MS : 0;
        *again = dup;
    } else if (t->found && (convo__mg_expired(t, now) || t->dying)) {
        rc = convo__mg_finish_delete(c, id, &t->g, false);
        *again = true;
    } else if (t->found && t->forking) {
        rc = convo__mg_abort_fork(c, id, &t->g);
        *again = true;
    }
    return rc;
}

/* Reads the thread doc for a write and clears what stands in the way (clear_way). */
int convo__mg_writable_thread(call *c, const char *id, bool with_extra, bool create, thread_doc *t,
                           bool *again)
{
    bool created;
    int rc = convo__mg_read_thread(c, id, with_extra, t);
    return rc ? rc : convo__mg_clear_way(c, id, create, t, &created, again);
}
