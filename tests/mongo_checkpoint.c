/* mongo_checkpoint.c — the MongoDB driver's checkpoint checks (part of
 * tests/mongo_extra): the stored layout, a put with messages (one insert
 * carrying the checkpoint, settled afterwards), every point where such a put
 * can be killed re-created document by document, conflicts that write nothing,
 * the 16 MiB document, the store-wide order, a layout 2 and a layout 3 store
 * moved up, threads racing puts with messages, and a put with log references
 * (its swaps, each point where it can be killed, conflicts). */
#include "mongo_util.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RACERS 6

/* The store-wide checkpoint counter (the last number handed out). */
static int64_t counter(void)
{
    bson_t *doc = raw_find("meta", BCON_NEW("_id", BCON_UTF8("order")));
    bson_iter_t it;
    int64_t n = doc && bson_iter_init_find(&it, doc, "n") ? bson_iter_as_int64(&it) : 0;
    if (doc)
        bson_destroy(doc);
    return n;
}

/* A number taken from the counter, as a put does before its insert. */
static int64_t take_number(void)
{
    raw_update("meta", BCON_NEW("_id", BCON_UTF8("order")),
               BCON_NEW("$inc", "{", "n", BCON_INT64(1), "}"));
    return counter();
}

static int64_t field_int(const bson_t *doc, const char *key)
{
    bson_iter_t it;
    ck_assert_msg(bson_iter_init_find(&it, doc, key), "no field %s", key);
    return bson_iter_as_int64(&it);
}

/* The stored checkpoint document of (thread, "", id), or NULL. */
static bson_t *checkpoint_doc(const char *thread, const char *id)
{
    bson_oid_t g;
    thread_generation(thread, &g);
    return raw_find("checkpoints", BCON_NEW("g", BCON_OID(&g), "id", BCON_UTF8(id)));
}

/* What a put with messages killed right after its insert leaves: a batch of 1
 * message at s carrying checkpoint id (numbered order, channel "a" = "\"id\"",
 * metadata meta, log_length s + 1), nothing in the checkpoint collections. */
static void forge_pending(const char *thread, int64_t s, const char *id, int64_t order,
                          const char *meta)
{
    bson_oid_t g;
    char value[64];
    thread_generation(thread, &g);
    forge_batch(&g, s, 1, 9);
    snprintf(value, sizeof value, "\"%s\"", id);
    raw_update("batches", BCON_NEW("g", BCON_OID(&g), "s", BCON_INT64(s)),
               BCON_NEW("$set", "{", "u", BCON_BOOL(true), "cp", "{", "ns", BCON_UTF8(""), "id", BCON_UTF8(id), "o",
                        BCON_INT64(order), "at", BCON_INT64(now_ms() * 1000), "p", BCON_NULL,
                        "meta", BCON_UTF8(meta), "bt", BCON_UTF8("json"), "bb",
                        BCON_BIN(BSON_SUBTYPE_BINARY, (const uint8_t *)"{}", 2), "ch", "[", "{",
                        "c", BCON_UTF8("a"), "v", BCON_UTF8(id), "}", "]", "ll",
                        BCON_INT64(s + 1), "vs", "[", "{", "c", BCON_UTF8("a"), "v",
                        BCON_UTF8(id), "ty", BCON_UTF8("json"), "b",
                        BCON_BIN(BSON_SUBTYPE_BINARY, (const uint8_t *)value,
                                 (uint32_t)strlen(value)),
                        "}", "]", "}", "}"));
}

/* Checks checkpoint cp is id with log_length ll and channel a = "\"id\"". */
static void assert_checkpoint(const convo_checkpoint *cp, const char *id, int64_t ll)
{
    const char *version;
    convo_blob v;
    char value[64];
    ck_assert_str_eq(convo_checkpoint_id(cp), id);
    ck_assert_int_eq(convo_checkpoint_log_length(cp), ll);
    ck_assert_int_eq(convo_checkpoint_channel_count(cp), 1);
    convo_checkpoint_channel(cp, 0, &version, &v);
    snprintf(value, sizeof value, "\"%s\"", id);
    ck_assert_str_eq(version, id);
    ck_assert(v.type && v.len == strlen(value) && memcmp(v.bytes, value, v.len) == 0);
}

/* The ids listed by opts, newest first, joined by spaces. */
static char *list_ids(convo_store *s, const char *thread, const char *before_thread,
                      const char *before, const char *filter)
{
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    convo_checkpoint_set *set;
    static char out[512];
    o.thread_id = thread;
    o.before_thread_id = before_thread;
    o.before = before;
    o.filter_json = filter;
    ck_assert_msg(convo_checkpoint_list(s, &o, &set, &err) == 0, "list: %s", err.message);
    out[0] = '\0';
    for (size_t i = 0; i < convo_checkpoint_set_count(set); i++) {
        if (i)
            strcat(out, " ");
        strcat(out, convo_checkpoint_id(convo_checkpoint_set_get(set, i)));
    }
    convo_checkpoint_set_free(set);
    return out;
}


START_TEST(test_checkpoint_layout)
{
    convo_store *s = open_store(NULL);
    put_checkpoint(s, "cpt", "c1", "1");
    put_checkpoint(s, "cpt", "c2", "2");
    convo_write_in w = {0, "a", {"json", "9", 1}};
    ck_assert_int_eq(convo_checkpoint_put_writes(s, "cpt", NULL, "c2", "task", "", &w, 1, &err), 0);
    bson_oid_t g;
    thread_generation("cpt", &g);
    bson_t *doc = raw_find("checkpoints", BCON_NEW("g", BCON_OID(&g), "id", BCON_UTF8("c2")));
    ck_assert_ptr_nonnull(doc);
    assert_field(doc, "g", BSON_TYPE_OID);
    assert_field(doc, "o", BSON_TYPE_INT64);
    assert_field(doc, "w", BSON_TYPE_INT64);
    assert_field(doc, "meta", BSON_TYPE_UTF8);
    /* numbered by the store-wide counter: c2 after c1, and the counter at c2 */
    bson_t *c1 = raw_find("checkpoints", BCON_NEW("g", BCON_OID(&g), "id", BCON_UTF8("c1")));
    ck_assert_int_lt(field_int(c1, "o"), field_int(doc, "o"));
    ck_assert_int_eq(field_int(doc, "o"), field_int(doc, "w"));
    ck_assert_int_eq(field_int(doc, "o"), counter());
    /* put again, a key keeps its position o and gets a new w */
    put_checkpoint(s, "cpt", "c1", "1");
    bson_t *again = raw_find("checkpoints", BCON_NEW("g", BCON_OID(&g), "id", BCON_UTF8("c1")));
    ck_assert_int_eq(field_int(again, "o"), field_int(c1, "o"));
    ck_assert_int_eq(field_int(again, "w"), counter());
    bson_destroy(c1);
    bson_destroy(again);
    assert_field(doc, "ch.0.v", BSON_TYPE_UTF8);
    bson_destroy(doc);
    ck_assert_int_eq(thread_docs("checkpoints", "cpt"), 2);
    ck_assert_int_eq(thread_docs("values", "cpt"), 2);
    ck_assert_int_eq(thread_docs("writes", "cpt"), 1);
    bson_t *idx = index_named("checkpoints", "convo_checkpoint_v2");
    ck_assert_ptr_nonnull(idx);
    bson_destroy(idx);
    ck_assert_int_eq(convo_checkpoint_prune(s, "cpt", 1, &err), 0);
    ck_assert_int_eq(thread_docs("checkpoints", "cpt"), 1);
    ck_assert_int_eq(thread_docs("values", "cpt"), 1); /* c1's value went with it */
    /* a delete takes everything of the generation */
    ck_assert_int_eq(convo_thread_delete(s, "cpt", &err), 0);
    ck_assert_int_eq(thread_docs("checkpoints", "cpt"), 0);
    ck_assert_int_eq(thread_docs("values", "cpt"), 0);
    ck_assert_int_eq(thread_docs("writes", "cpt"), 0);
    convo_close(s);
}
END_TEST

/* A put killed after its checkpoint doc, before marking a new thread live: the
 * checkpoint is invisible until the thread is written to again. */
START_TEST(test_crash_checkpoint_put)
{
    convo_store *s = open_store(NULL);
    put_checkpoint(s, "cpk", "c1", "1");
    raw_update("threads", BCON_NEW("_id", BCON_UTF8("cpk")),
               BCON_NEW("$set", "{", "live", BCON_BOOL(false), "}"));
    convo_checkpoint *cp;
    ck_assert_int_eq(convo_checkpoint_get(s, "cpk", NULL, NULL, &cp, &err), CONVO_ENOTFOUND);
    ck_assert_int_eq(length_of(s, "cpk"), -1);
    ck_assert(!listed(s, "cpk"));
    append_batch(s, "cpk", 1, 1, 1);
    ck_assert_int_eq(convo_checkpoint_get(s, "cpk", NULL, NULL, &cp, &err), 0);
    ck_assert_str_eq(convo_checkpoint_id(cp), "c1");
    convo_checkpoint_free(cp);
    /* leftovers of a dead generation go with the next delete */
    bson_oid_t dead;
    new_generation("cpk", &dead);
    raw_insert("values", BCON_NEW("g", BCON_OID(&dead), "ns", BCON_UTF8(""), "c", BCON_UTF8("x"),
                                  "v", BCON_UTF8("1")));
    ck_assert_int_eq(convo_thread_delete(s, "cpk", &err), 0);
    ck_assert_int_eq(thread_docs("values", "cpk"), 0);
    convo_close(s);
}
END_TEST

/* A put with messages: one batch document, settled before the put returns (no
 * cp left), the checkpoint numbered from the counter, the pending index on the
 * mark u (not partial). */
START_TEST(test_put_log_layout)
{
    convo_store *s = open_store(NULL);
    convo_checkpoint *cp;
    ck_assert_msg(put_log(s, "pl", "c1", 1, 0, 2, 0, "{\"k\":1}", &err) == 0, "%s", err.message);
    ck_assert_int_eq(unsettled("pl"), 0);
    ck_assert_int_eq(thread_docs("checkpoints", "pl"), 1);
    ck_assert_msg(put_log(s, "pl", "c2", 1, 1, 1, 2, "{\"k\":2}", &err) == 0, "%s", err.message);
    ck_assert_int_eq(unsettled("pl"), 0);
    ck_assert_int_eq(convo_checkpoint_get(s, "pl", NULL, NULL, &cp, &err), 0);
    assert_checkpoint(cp, "c2", 3);
    convo_checkpoint_free(cp);
    ck_assert_int_eq(verify_thread(s, "pl"), 3);
    bson_oid_t g;
    thread_generation("pl", &g);
    ck_assert_int_eq(generation_batches(&g), 2);
    ck_assert_int_eq(unsettled("pl"), 0);
    bson_t *t = raw_find("threads", BCON_NEW("_id", BCON_UTF8("pl")));
    bson_iter_t it;
    ck_assert(bson_iter_init_find(&it, t, "live") && bson_iter_as_bool(&it));
    bson_destroy(t);
    bson_t *doc = checkpoint_doc("pl", "c2");
    ck_assert_ptr_nonnull(doc);
    ck_assert_int_eq(field_int(doc, "o"), counter());
    ck_assert_int_eq(field_int(doc, "w"), counter());
    ck_assert_int_eq(field_int(doc, "ll"), 3);
    bson_destroy(doc);
    ck_assert_int_eq(thread_docs("checkpoints", "pl"), 2);
    ck_assert_int_eq(thread_docs("values", "pl"), 2);
    ck_assert_ptr_null(index_named("batches", "convo_pending_v3"));
    bson_t *ix = index_named("batches", "convo_pending_v4"); /* sparse, never partial */
    ck_assert_ptr_nonnull(ix);
    ck_assert(!bson_iter_init_find(&it, ix, "partialFilterExpression"));
    bson_destroy(ix);
    convo_close(s);
}
END_TEST

/* Documents of every collection, and the counter: what "nothing written" means. */
static void snapshot(int64_t out[6])
{
    static const char *const kinds[] = {"threads", "batches", "checkpoints", "values", "writes"};
    for (int k = 0; k < 5; k++)
        out[k] = raw_count(kinds[k], bson_new());
    out[5] = counter();
}

/* A wrong expected length writes nothing at all, not even a placeholder or a
 * number; neither does a put too large for one document. */
START_TEST(test_put_log_writes_nothing)
{
    convo_store *s = open_store(NULL);
    int64_t before[6], after[6];
    convo_checkpoint *got;
    ck_assert_int_eq(put_log(s, "pc", "c1", 1, 0, 2, 0, "{}", &err), 0);
    ck_assert_int_eq(convo_checkpoint_get(s, "pc", NULL, "c1", &got, &err), 0); /* settled */
    convo_checkpoint_free(got);
    snapshot(before);
    ck_assert_int_eq(put_log(s, "pc", "c2", 1, 1, 1, 1, "{}", &err), CONVO_ECONFLICT);
    ck_assert_ptr_nonnull(strstr(err.message, "thread has 2 messages, expected 1"));
    ck_assert_int_eq(put_log(s, "pc", "c2", 1, 1, 1, 3, "{}", &err), CONVO_ECONFLICT);
    ck_assert_int_eq(put_log(s, "pc-new", "c1", 1, 0, 1, 3, "{}", &err), CONVO_ECONFLICT);
    ck_assert_ptr_nonnull(strstr(err.message, "thread has 0 messages, expected 3"));
    snapshot(after);
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(before[i], after[i]);
    ck_assert_int_eq(length_of(s, "pc-new"), -1);
    /* 16 messages of ~1 MB and a 1 MB body do not fit one 16 MiB document */
    char *one = big_message(1000000), *body = big_message(1000000);
    const char *msgs[16];
    for (int i = 0; i < 16; i++)
        msgs[i] = one;
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = "pc";
    cp.checkpoint_id = "big";
    cp.body = (convo_blob){"json", body, strlen(body)};
    cp.messages = msgs;
    cp.nmessages = 16;
    cp.expected_length = 2;
    ck_assert_int_eq(convo_checkpoint_put(s, &cp, &err), CONVO_ETOOLARGE);
    snapshot(after);
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(before[i], after[i]);
    cp.nmessages = 15; /* fits */
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "%s", err.message);
    ck_assert_int_eq(length_of(s, "pc"), 17);
    ck_assert_int_eq(convo_checkpoint_get(s, "pc", NULL, "big", &got, &err), 0);
    ck_assert_int_eq(convo_checkpoint_body(got).len, strlen(body));
    convo_checkpoint_free(got);
    ck_assert_int_eq(unsettled("pc"), 0);
    free(one);
    free(body);
    convo_close(s);
}
END_TEST

/* A put with messages killed after its insert: the batch carries the
 * checkpoint, nothing else is written. The messages show, and so does the
 * checkpoint to every call that reads checkpoints: each settles it first. */
START_TEST(test_crash_put_log_unsettled)
{
    convo_store *s = open_store(NULL);
    static const char *const threads[] = {"kg", "kl", "ka", "kw", "kp"};
    for (int i = 0; i < 5; i++) {
        char meta[40];
        append_batch(s, threads[i], 1, 0, 1);
        snprintf(meta, sizeof meta, "{\"forged\":\"%s\"}", threads[i]);
        forge_pending(threads[i], 1, "c1", take_number(), meta);
        ck_assert_int_eq(unsettled(threads[i]), 1);
        ck_assert_int_eq(thread_docs("checkpoints", threads[i]), 0);
        ck_assert_int_eq(length_of(s, threads[i]), 2); /* the messages are there */
    }
    convo_checkpoint *cp;
    ck_assert_int_eq(convo_checkpoint_get(s, "kg", NULL, NULL, &cp, &err), 0); /* get */
    assert_checkpoint(cp, "c1", 2);
    convo_checkpoint_free(cp);
    ck_assert_str_eq(list_ids(s, "kl", NULL, NULL, NULL), "c1");               /* list */
    ck_assert_str_eq(list_ids(s, NULL, NULL, NULL, "{\"forged\":\"ka\"}"), "c1"); /* all */
    convo_write_in w = {0, "a", {"json", "1", 1}};
    ck_assert_int_eq(convo_checkpoint_put_writes(s, "kw", NULL, "c1", "t", "", &w, 1, &err), 0);
    ck_assert_int_eq(convo_checkpoint_prune(s, "kp", 0, &err), 0);
    for (int i = 0; i < 5; i++) {
        ck_assert_int_eq(unsettled(threads[i]), 0);
        ck_assert_int_eq(thread_docs("checkpoints", threads[i]), i == 4 ? 0 : 1);
        ck_assert_int_eq(thread_docs("values", threads[i]), i == 4 ? 0 : 1);
    }
    ck_assert_int_eq(convo_checkpoint_get(s, "kw", NULL, "c1", &cp, &err), 0);
    ck_assert_int_eq(convo_checkpoint_write_count(cp), 1);
    convo_checkpoint_free(cp);
    /* killed after the values, or after the checkpoint, before cp went: settling
     * again changes nothing */
    forge_pending("kg", 2, "c2", take_number(), "{}");
    ck_assert_int_eq(convo_checkpoint_get(s, "kg", NULL, "c2", &cp, &err), 0);
    convo_checkpoint_free(cp);
    bson_t *first = checkpoint_doc("kg", "c2");
    bson_oid_t g;
    thread_generation("kg", &g);
    bson_iter_t it;
    ck_assert(bson_iter_init_find(&it, first, "ch"));
    raw_update("batches", BCON_NEW("g", BCON_OID(&g), "s", BCON_INT64(2)),
               BCON_NEW("$set", "{", "u", BCON_BOOL(true), "cp", "{", "ns", BCON_UTF8(""), "id", BCON_UTF8("c2"), "o",
                        BCON_INT64(field_int(first, "o")), "at", BCON_INT64(1), "p", BCON_NULL,
                        "meta", BCON_UTF8("{}"), "bt", BCON_NULL, "bb", BCON_NULL, "ch", "[",
                        "{", "c", BCON_UTF8("a"), "v", BCON_UTF8("c2"), "}", "]", "ll",
                        BCON_INT64(3), "vs", "[", "]", "}", "}"));
    ck_assert_int_eq(convo_checkpoint_get(s, "kg", NULL, "c2", &cp, &err), 0);
    assert_checkpoint(cp, "c2", 3);
    ck_assert_str_eq(convo_checkpoint_body(cp).type, "json"); /* not the second copy's */
    convo_checkpoint_free(cp);
    ck_assert_int_eq(unsettled("kg"), 0);
    ck_assert_int_eq(thread_docs("checkpoints", "kg"), 2);
    bson_destroy(first);
    /* a newer version of the key stored meanwhile wins; the key keeps the
     * earlier position */
    append_batch(s, "kn", 1, 0, 1);
    int64_t early = take_number();
    put_checkpoint(s, "kn", "c1", "9");
    forge_pending("kn", 1, "c1", early, "{\"stale\":true}");
    ck_assert_int_eq(convo_checkpoint_get(s, "kn", NULL, "c1", &cp, &err), 0);
    ck_assert_str_eq(convo_checkpoint_metadata(cp), "{\"step\":1}");
    convo_checkpoint_free(cp);
    bson_t *doc = checkpoint_doc("kn", "c1");
    ck_assert_int_eq(field_int(doc, "o"), early);
    ck_assert_int_eq(field_int(doc, "w"), early + 1);
    bson_destroy(doc);
    /* a delete takes a batch still carrying its checkpoint with the rest */
    forge_pending("kn", 2, "c9", take_number(), "{}");
    ck_assert_int_eq(convo_thread_delete(s, "kn", &err), 0);
    ck_assert_int_eq(thread_docs("batches", "kn"), 0);
    ck_assert_int_eq(convo_checkpoint_get(s, "kn", NULL, NULL, &cp, &err), CONVO_ENOTFOUND);
    convo_close(s);
}
END_TEST

/* A store written by layout 2 (per-thread numbers) moves up: the counter starts
 * above every number given out, each thread keeps its order, and puts from now
 * on come after all of them, whatever the thread. */
START_TEST(test_upgrade_from_v2)
{
    static const struct {
        const char *thread, *id;
        int64_t o;
    } old[] = {{"va", "a1", 1}, {"va", "a2", 2}, {"va", "a3", 3}, {"vb", "b1", 1},
               {"vb", "b2", 2}};
    bson_oid_t ga, gb;
    new_generation("va", &ga);
    new_generation("vb", &gb);
    raw_insert("meta", BCON_NEW("_id", BCON_UTF8("schema"), "version", BCON_INT32(2)));
    raw_insert("threads", BCON_NEW("_id", BCON_UTF8("va"), "g", BCON_OID(&ga), "live",
                                   BCON_BOOL(true), "v", BCON_INT64(0), "co", BCON_INT64(3),
                                   "extra", "{", "}"));
    raw_insert("threads", BCON_NEW("_id", BCON_UTF8("vb"), "g", BCON_OID(&gb), "live",
                                   BCON_BOOL(true), "v", BCON_INT64(0), "co", BCON_INT64(2),
                                   "extra", "{", "}"));
    for (size_t i = 0; i < sizeof old / sizeof old[0]; i++) {
        const bson_oid_t *g = old[i].thread[1] == 'a' ? &ga : &gb;
        char value[16];
        snprintf(value, sizeof value, "\"%s\"", old[i].id);
        raw_insert("checkpoints",
                   BCON_NEW("g", BCON_OID(g), "ns", BCON_UTF8(""), "id", BCON_UTF8(old[i].id),
                            "o", BCON_INT64(old[i].o), "p", BCON_NULL, "meta", BCON_UTF8("{}"),
                            "bt", BCON_NULL, "bb", BCON_NULL, "ch", "[", "{", "c", BCON_UTF8("a"),
                            "v", BCON_UTF8(old[i].id), "}", "]", "ll", BCON_INT64(0), "at",
                            BCON_INT64(now_ms() * 1000)));
        raw_insert("values", BCON_NEW("g", BCON_OID(g), "ns", BCON_UTF8(""), "c", BCON_UTF8("a"),
                                      "v", BCON_UTF8(old[i].id), "ty", BCON_UTF8("json"), "b",
                                      BCON_BIN(BSON_SUBTYPE_BINARY, (const uint8_t *)value,
                                               (uint32_t)strlen(value))));
    }
    convo_store *s = open_store(NULL);
    bson_t *meta = raw_find("meta", BCON_NEW("_id", BCON_UTF8("schema")));
    ck_assert_int_eq(field_int(meta, "version"), 6);
    bson_destroy(meta);
    ck_assert_int_eq(counter(), 3);
    ck_assert_str_eq(list_ids(s, "va", NULL, NULL, NULL), "a3 a2 a1");
    ck_assert_str_eq(list_ids(s, "vb", NULL, NULL, NULL), "b2 b1");
    convo_checkpoint *cp;
    ck_assert_int_eq(convo_checkpoint_get(s, "va", NULL, NULL, &cp, &err), 0);
    assert_checkpoint(cp, "a3", 0);
    convo_checkpoint_free(cp);
    put_checkpoint(s, "vb", "b3", "3");
    bson_t *doc = checkpoint_doc("vb", "b3");
    ck_assert_int_eq(field_int(doc, "o"), 4);
    bson_destroy(doc);
    ck_assert_int_eq(put_log(s, "va", "a4", 1, 0, 1, 0, "{}", &err), 0);
    ck_assert_str_eq(list_ids(s, "vb", NULL, "b3", NULL), "b2 b1");
    ck_assert_str_eq(list_ids(s, "va", "vb", "b3", NULL), "a3 a2 a1");
    ck_assert_str_eq(list_ids(s, "vb", "va", "a4", NULL), "b3 b2 b1");
    ck_assert_str_eq(list_ids(s, "va", NULL, "a4", NULL), "a3 a2 a1");
    /* every thread: all five layout 2 checkpoints were put before b3 */
    char *all = list_ids(s, NULL, "vb", "b3", NULL);
    ck_assert_str_eq(all, "a3 a2 a1 b2 b1");
    convo_close(s);
    s = open_store(NULL); /* once moved up, opening changes nothing */
    ck_assert_int_eq(counter(), 5);
    convo_close(s);
}
END_TEST

/* Layout 3's indexes on the batches: the two partial ones layout 4 replaced. */
static void layout_3_indexes(void)
{
    mongoc_collection_t *c = coll("batches");
    bson_t *cmd = BCON_NEW(
        "createIndexes", BCON_UTF8(mongoc_collection_get_name(c)), "indexes", "[", "{", "key", "{",
        "g", BCON_INT32(1), "s", BCON_INT32(1), "}", "name", BCON_UTF8("convo_chain_v2"), "unique",
        BCON_BOOL(true), "}", "{", "key", "{", "g", BCON_INT32(1), "k", BCON_INT32(1), "}", "name",
        BCON_UTF8("convo_idempotency_v2"), "unique", BCON_BOOL(true), "partialFilterExpression",
        "{", "k", "{", "$type", BCON_UTF8("string"), "}", "}", "}", "{", "key", "{", "g",
        BCON_INT32(1), "}", "name", BCON_UTF8("convo_pending_v3"), "partialFilterExpression", "{",
        "cp", "{", "$exists", BCON_BOOL(true), "}", "}", "}", "]");
    bson_error_t e;
    ck_assert_msg(mongoc_collection_write_command_with_opts(c, cmd, NULL, NULL, &e), "%s",
                  e.message);
    bson_destroy(cmd);
    mongoc_collection_destroy(c);
}

/* The k of the batch of generation g at s: its int64, or -1 for a string. */
static int64_t stored_k(const bson_oid_t *g, int64_t s)
{
    bson_t *b = raw_find("batches", BCON_NEW("g", BCON_OID(g), "s", BCON_INT64(s)));
    bson_iter_t it;
    ck_assert_ptr_nonnull(b);
    ck_assert_msg(bson_iter_init_find(&it, b, "k"), "batch at %lld has no k", (long long)s);
    int64_t k = BSON_ITER_HOLDS_UTF8(&it) ? -1 : BSON_ITER_HOLDS_INT64(&it) ? bson_iter_int64(&it)
                                                                           : -2;
    bson_destroy(b);
    return k;
}

/* A store written by layout 3 (k only on keyed batches, a partial unique index
 * on it, a partial index on cp) moves up at open: every batch gets k (its
 * position when it had no key), a batch still carrying a checkpoint is marked
 * u and settles, the partial indexes are gone, keys replay, and batches without
 * a key no longer collide (they did on a server ignoring partial filters). */
START_TEST(test_upgrade_from_v3)
{
    bson_oid_t g;
    new_generation("v3", &g);
    layout_3_indexes();
    raw_insert("meta", BCON_NEW("_id", BCON_UTF8("schema"), "version", BCON_INT32(3)));
    raw_insert("threads", BCON_NEW("_id", BCON_UTF8("v3"), "g", BCON_OID(&g), "live",
                                   BCON_BOOL(true), "v", BCON_INT64(0), "extra", "{", "}"));
    forge_batch(&g, 0, 2, 1);
    forge_batch(&g, 2, 1, 1);
    raw_update("batches", BCON_NEW("g", BCON_OID(&g), "s", BCON_INT64(2)),
               BCON_NEW("$set", "{", "k", BCON_UTF8("key-a"), "}"));
    forge_pending("v3", 3, "c1", take_number(), "{}");
    /* as layout 3 wrote them: no k without a key, cp without the mark */
    raw_update("batches", BCON_NEW("g", BCON_OID(&g), "k", "{", "$type", BCON_UTF8("long"), "}"),
               BCON_NEW("$unset", "{", "k", BCON_UTF8(""), "}"));
    raw_update("batches", BCON_NEW("g", BCON_OID(&g), "s", BCON_INT64(0)),
               BCON_NEW("$unset", "{", "k", BCON_UTF8(""), "}"));
    raw_update("batches", BCON_NEW("g", BCON_OID(&g), "s", BCON_INT64(3)),
               BCON_NEW("$unset", "{", "k", BCON_UTF8(""), "u", BCON_UTF8(""), "}"));
    ck_assert_int_eq(raw_count("batches", BCON_NEW("k", "{", "$exists", BCON_BOOL(false), "}")), 2);
    ck_assert_int_eq(raw_count("batches", BCON_NEW("u", "{", "$exists", BCON_BOOL(true), "}")), 0);

    convo_store *s = open_store(NULL);
    bson_t *meta = raw_find("meta", BCON_NEW("_id", BCON_UTF8("schema")));
    ck_assert_int_eq(field_int(meta, "version"), 6);
    bson_destroy(meta);
    ck_assert_int_eq(stored_k(&g, 0), 0);
    ck_assert_int_eq(stored_k(&g, 2), -1);
    ck_assert_int_eq(stored_k(&g, 3), 3);
    ck_assert_int_eq(raw_count("batches", BCON_NEW("g", BCON_OID(&g), "s", BCON_INT64(3), "u",
                                                   BCON_BOOL(true))),
                     1);
    ck_assert_ptr_null(index_named("batches", "convo_idempotency_v2"));
    ck_assert_ptr_null(index_named("batches", "convo_pending_v3"));
    bson_t *ix = index_named("batches", "convo_idempotency_v4");
    ck_assert_ptr_nonnull(ix);
    bson_destroy(ix);
    /* the checkpoint the batch carried is found and settled */
    convo_checkpoint *cp;
    ck_assert_int_eq(convo_checkpoint_get(s, "v3", NULL, NULL, &cp, &err), 0);
    assert_checkpoint(cp, "c1", 4);
    convo_checkpoint_free(cp);
    ck_assert_int_eq(unsettled("v3"), 0);
    /* the key replays; appends without a key take the next positions */
    convo_append_opts o = CONVO_APPEND_OPTS_INIT;
    convo_append_result r;
    const char *msg = "{\"role\":\"user\",\"w\":1,\"b\":2,\"i\":0,\"n\":1}"; /* forge_batch's */
    o.idempotency_key = "key-a";
    ck_assert_int_eq(convo_append(s, "v3", &msg, NULL, 1, &o, &r, &err), 0);
    ck_assert(r.replayed && r.first_seq == 2 && r.count == 1);
    for (int i = 0; i < 3; i++) {
        ck_assert_int_eq(append_batch(s, "v3", 2, i, 1), 4 + i);
        ck_assert_int_eq(stored_k(&g, 4 + i), 4 + i);
    }
    ck_assert_int_eq(verify_thread(s, "v3"), 7);
    convo_close(s);
    s = open_store(NULL); /* once moved up, opening changes nothing */
    ck_assert_int_eq(verify_thread(s, "v3"), 7);
    ck_assert_int_eq(raw_count("batches", BCON_NEW("k", "{", "$exists", BCON_BOOL(false), "}")), 0);
    convo_close(s);
}
END_TEST

/* With ttl, a put with messages stores everything with an expiry beyond the
 * thread doc's; once the thread expired it has 0 messages: a put expecting the
 * old length conflicts, one expecting 0 starts a new thread. */
START_TEST(test_put_log_ttl)
{
    convo_store *s = open_store("ttl=1");
    ck_assert_int_eq(put_log(s, "pt", "c1", 1, 0, 2, 0, "{}", &err), 0);
    bson_t *t = raw_find("threads", BCON_NEW("_id", BCON_UTF8("pt")));
    bson_iter_t it;
    ck_assert(bson_iter_init_find(&it, t, "exp") && BSON_ITER_HOLDS_DATE_TIME(&it));
    int64_t texp = bson_iter_date_time(&it);
    bson_destroy(t);
    static const char *const kinds[] = {"batches", "checkpoints", "values"};
    for (int k = 0; k < 3; k++) {
        bson_t *doc = raw_find(kinds[k], of_thread("pt"));
        ck_assert_ptr_nonnull(doc);
        ck_assert_msg(bson_iter_init_find(&it, doc, "exp") && BSON_ITER_HOLDS_DATE_TIME(&it),
                      "%s without exp", kinds[k]);
        ck_assert_int_ge(bson_iter_date_time(&it), texp + 60000);
        bson_destroy(doc);
    }
    sleep_ms(1300);
    convo_checkpoint *cp;
    ck_assert_int_eq(convo_checkpoint_get(s, "pt", NULL, NULL, &cp, &err), CONVO_ENOTFOUND);
    ck_assert_int_eq(put_log(s, "pt", "c2", 1, 1, 1, 2, "{}", &err), CONVO_ECONFLICT);
    ck_assert_ptr_nonnull(strstr(err.message, "thread has 0 messages, expected 2"));
    ck_assert_int_eq(put_log(s, "pt", "c2", 1, 1, 1, 0, "{}", &err), 0);
    ck_assert_int_eq(verify_thread(s, "pt"), 1);
    ck_assert_str_eq(list_ids(s, "pt", NULL, NULL, NULL), "c2");
    convo_close(s);
}
END_TEST

/* ---- threads racing puts with messages ---- */

typedef struct put_racer {
    convo_store *s;
    int w, won;
    int bad; /* an answer other than 0 or CONVO_ECONFLICT */
} put_racer;

static void *race_put_log(void *arg)
{
    put_racer *r = arg;
    for (int b = 0; b < 300 && r->won < 5; b++) {
        convo_history *h;
        convo_error e;
        convo_load_opts lo = CONVO_LOAD_OPTS_INIT;
        char id[32];
        lo.tail = 1;
        int64_t len = 0;
        if (convo_load(r->s, "pr", &lo, &h, &e) == 0) {
            len = convo_history_length(h);
            convo_history_free(h);
        }
        snprintf(id, sizeof id, "w%d-b%d", r->w, b);
        int rc = put_log(r->s, "pr", id, r->w, b, 1 + (r->w + b) % 3, len, "{}", &e);
        if (rc == 0)
            r->won++;
        else if (rc != CONVO_ECONFLICT)
            r->bad++;
    }
    return NULL;
}

/* Each put with messages either lands whole at the length it expected or not
 * at all; every checkpoint's log_length ends at its own messages. */
START_TEST(test_put_log_race)
{
    convo_store *s = open_store(NULL);
    pthread_t th[RACERS];
    put_racer r[RACERS];
    for (int i = 0; i < RACERS; i++) {
        r[i] = (put_racer){s, i + 1, 0, 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, race_put_log, &r[i]), 0);
    }
    int won = 0;
    for (int i = 0; i < RACERS; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(r[i].bad, 0);
        won += r[i].won;
    }
    int64_t len = verify_thread(s, "pr");
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    convo_checkpoint_set *set;
    convo_history *h;
    o.thread_id = "pr";
    ck_assert_int_eq(convo_checkpoint_list(s, &o, &set, &err), 0);
    ck_assert_int_eq(convo_checkpoint_set_count(set), won);
    ck_assert_int_eq(convo_load(s, "pr", NULL, &h, &err), 0);
    int64_t prev = len + 1;
    for (size_t i = 0; i < convo_checkpoint_set_count(set); i++) {
        const convo_checkpoint *cp = convo_checkpoint_set_get(set, i);
        int64_t ll = convo_checkpoint_log_length(cp);
        int w, b;
        ck_assert(ll > 0 && ll <= len && ll < prev); /* newest first: the logs grow */
        prev = ll;
        json_t *m = json_loads(convo_history_message(h, (size_t)ll - 1, NULL), 0, NULL);
        ck_assert_int_eq(sscanf(convo_checkpoint_id(cp), "w%d-b%d", &w, &b), 2);
        ck_assert_int_eq(json_integer_value(json_object_get(m, "w")), w);
        ck_assert_int_eq(json_integer_value(json_object_get(m, "b")), b);
        json_decref(m);
    }
    convo_history_free(h);
    convo_checkpoint_set_free(set);
    verify_checkpoints(s, "pr");
    verify_raw_chains();
    ck_assert_int_eq(unsettled("pr"), 0);
    convo_close(s);
}
END_TEST

/* ---- log references (drivers/mongo/refs.c) ----
 * A turn's input checkpoint "in": __start__ (version 1) = {messages: [hi]}
 * and the __start__ task's pending write [hi], both inline; then a checkpoint
 * (parent "in") whose message channel appends hi, turning both into
 * references right after its put. */
static const char *const hi = "{\"role\":\"user\",\"content\":\"hi\"}";

static void refs_input(convo_store *s, const char *thread)
{
    convo_items_in it = CONVO_ITEMS_IN_INIT;
    it.items = &hi;
    it.n = 1;
    it.key = "messages";
    it.rest = (convo_blob){"json", "{}", 2};
    const convo_items_in *per[1] = {&it};
    convo_channel_in ch = {"__start__", "1", NULL};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = thread;
    cp.checkpoint_id = "in";
    cp.channels = &ch;
    cp.nchannels = 1;
    cp.channel_items = per;
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put in: %s", err.message);
    it.key = NULL;
    it.rest = (convo_blob){NULL, NULL, 0};
    convo_write_in w = {0, "messages", {NULL, NULL, 0}};
    convo_writes_in in = CONVO_WRITES_IN_INIT;
    in.thread_id = thread;
    in.checkpoint_id = "in";
    in.task_id = "start";
    in.writes = &w;
    in.n = 1;
    in.items = per;
    ck_assert_msg(convo_checkpoint_put_writes_ex(s, &in, &err) == 0, "writes: %s", err.message);
}

/* Checkpoint id (parent "in") whose messages are [hi] (hint: its seq or -1). */
static int refs_commit(convo_store *s, const char *thread, const char *id, int64_t hint,
                       int64_t expected_generation)
{
    convo_items_in it = CONVO_ITEMS_IN_INIT;
    it.items = &hi;
    it.seqs = &hint;
    it.n = 1;
    it.log = 1;
    const convo_items_in *per[1] = {&it};
    convo_channel_in ch = {"messages", id, NULL};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = thread;
    cp.checkpoint_id = id;
    cp.parent_id = "in";
    cp.channels = &ch;
    cp.nchannels = 1;
    cp.channel_items = per;
    cp.expected_generation = expected_generation;
    return convo_checkpoint_put(s, &cp, &err);
}

/* The key of "in"'s pending write (write 1) or __start__ value (0). */
static bson_t *in_key(const char *thread, int write)
{
    bson_oid_t g;
    thread_generation(thread, &g);
    return write ? BCON_NEW("g", BCON_OID(&g), "cp", BCON_UTF8("in"), "task", BCON_UTF8("start"),
                            "idx", BCON_INT64(0))
                 : BCON_NEW("g", BCON_OID(&g), "c", BCON_UTF8("__start__"), "v", BCON_UTF8("1"));
}

static bson_t *in_doc(const char *thread, int write)
{
    bson_t *d = raw_find(write ? "writes" : "values", in_key(thread, write));
    ck_assert_ptr_nonnull(d);
    return d;
}

static bool same_blob(const bson_t *a, const bson_t *b)
{
    bson_iter_t i, j;
    uint32_t la = 0, lb = 0;
    const uint8_t *pa = NULL, *pb = NULL;
    if (bson_iter_init_find(&i, a, "b") && bson_iter_init_find(&j, b, "b")) {
        bson_iter_binary(&i, NULL, &la, &pa);
        bson_iter_binary(&j, NULL, &lb, &pb);
    }
    return pa && pb && la == lb && memcmp(pa, pb, la) == 0;
}

/* "in"'s write and value as items: their first seq (-1 inline), and its log_length. */
static void in_items(convo_store *s, const char *thread, int64_t *wseq, int64_t *vseq,
                     int64_t *log_length)
{
    convo_checkpoint *cp;
    convo_items it;
    ck_assert_msg(convo_checkpoint_get(s, thread, NULL, "in", &cp, &err) == 0, "%s", err.message);
    ck_assert_int_eq(convo_checkpoint_write_items(cp, 0, &it), 1);
    ck_assert_uint_eq(it.n, 1);
    ck_assert_str_eq(it.items[0], hi);
    *wseq = it.seqs[0];
    ck_assert_int_eq(convo_checkpoint_channel_items(cp, 0, &it), 1);
    ck_assert_uint_eq(it.n, 1);
    ck_assert_str_eq(it.items[0], hi);
    *vseq = it.seqs[0];
    *log_length = convo_checkpoint_log_length(cp);
    convo_checkpoint_free(cp);
}

START_TEST(test_put_refs_swaps)
{
    convo_store *s = open_store(NULL);
    int64_t w, v, ll;
    refs_input(s, "rs");
    bson_t *w0 = in_doc("rs", 1), *v0 = in_doc("rs", 0);
    ck_assert_msg(refs_commit(s, "rs", "c0", -1, -1) == 0, "%s", err.message);
    bson_t *w1 = in_doc("rs", 1), *v1 = in_doc("rs", 0), *cp = checkpoint_doc("rs", "in");
    ck_assert(!same_blob(w0, w1) && !same_blob(v0, v1)); /* both swapped */
    ck_assert_int_eq(field_int(cp, "ll"), 1);
    in_items(s, "rs", &w, &v, &ll);
    ck_assert_int_eq(w, 0);
    ck_assert_int_eq(v, 0);
    ck_assert_int_eq(length_of(s, "rs"), 1);
    bson_destroy(w0);
    bson_destroy(v0);
    bson_destroy(w1);
    bson_destroy(v1);
    bson_destroy(cp);
    convo_close(s);
}
END_TEST

/* The swaps come after the put, each raising log_length before its value
 * changes. Killed between the steps, re-created document by document: after
 * the put (values inline, ll 0), after a raise (ll 1, values inline). Readers
 * get the same items either way, and the raised ll protects them. */
START_TEST(test_crash_put_refs)
{
    convo_store *s = open_store(NULL);
    int64_t w, v, ll;
    refs_input(s, "rk");
    bson_t *w0 = in_doc("rk", 1), *v0 = in_doc("rk", 0);
    ck_assert_msg(refs_commit(s, "rk", "c0", -1, -1) == 0, "%s", err.message);
    bson_oid_t g;
    thread_generation("rk", &g);
    for (int k = 0; k < 2; k++) { /* the inline values back */
        bson_iter_t it;
        uint32_t len;
        const uint8_t *bytes;
        ck_assert(bson_iter_init_find(&it, k ? w0 : v0, "b"));
        bson_iter_binary(&it, NULL, &len, &bytes);
        raw_update(k ? "writes" : "values", in_key("rk", k),
                   BCON_NEW("$set", "{", "b", BCON_BIN(BSON_SUBTYPE_BINARY, bytes, len), "}"));
    }
    raw_update("checkpoints", BCON_NEW("g", BCON_OID(&g), "id", BCON_UTF8("in")),
               BCON_NEW("$set", "{", "ll", BCON_INT64(0), "}"));
    in_items(s, "rk", &w, &v, &ll); /* killed after the put */
    ck_assert(w == -1 && v == -1 && ll == 0);
    raw_update("checkpoints", BCON_NEW("g", BCON_OID(&g), "id", BCON_UTF8("in")),
               BCON_NEW("$set", "{", "ll", BCON_INT64(1), "}"));
    in_items(s, "rk", &w, &v, &ll); /* killed after the raise */
    ck_assert(w == -1 && v == -1 && ll == 1);
    /* a rewrite that drops what refers past keep takes "in" with it */
    convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
    convo_rewrite_result r;
    o.drop_checkpoints = 1;
    ck_assert_int_eq(convo_replace_tail(s, "rk", 0, NULL, NULL, 0, &o, &r, &err), 0);
    convo_checkpoint *cp;
    ck_assert_int_eq(convo_checkpoint_get(s, "rk", NULL, "in", &cp, &err), CONVO_ENOTFOUND);
    bson_destroy(w0);
    bson_destroy(v0);
    convo_close(s);
}
END_TEST

/* Without messages the generation is read before the put: not met, nothing is
 * written (no checkpoint, value, number or placeholder); with them, as a put
 * with messages (a missing thread is at generation 0: no placeholder either). */
START_TEST(test_put_refs_conflict_writes_nothing)
{
    convo_store *s = open_store(NULL);
    int64_t before[6], after[6];
    refs_input(s, "rg");
    snapshot(before);
    ck_assert_int_eq(refs_commit(s, "rg", "c0", -1, 7), CONVO_ECONFLICT); /* with hi */
    ck_assert_ptr_nonnull(strstr(err.message, "expected generation 7"));
    snapshot(after);
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(before[i], after[i]);
    ck_assert_int_eq(convo_append(s, "rg", &hi, NULL, 1, NULL, NULL, &err), 0);
    snapshot(before);
    ck_assert_int_eq(refs_commit(s, "rg", "c0", 0, 7), CONVO_ECONFLICT); /* hi is seq 0 */
    ck_assert_ptr_nonnull(strstr(err.message, "expected generation 7"));
    snapshot(after);
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(before[i], after[i]);
    ck_assert_int_eq(refs_commit(s, "rg-new", "c0", -1, 3), CONVO_ECONFLICT);
    snapshot(after);
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(before[i], after[i]);
    ck_assert_int_eq(length_of(s, "rg-new"), -1);
    ck_assert_msg(refs_commit(s, "rg", "c0", 0, 0) == 0, "%s", err.message);
    ck_assert_int_eq(length_of(s, "rg"), 1);
    convo_close(s);
}
END_TEST

void add_checkpoint_cases(Suite *s)
{
    struct {
        const char *name;
        const TTest *tests[8];
        int timeout;
    } cases[] = {
        {"checkpoints", {test_checkpoint_layout, test_crash_checkpoint_put, test_put_log_layout,
                         test_crash_put_log_unsettled}, 30},
        {"checkpoint_size", {test_put_log_writes_nothing}, 120},
        {"checkpoint_upgrade", {test_upgrade_from_v2, test_upgrade_from_v3}, 30},
        {"checkpoint_ttl", {test_put_log_ttl}, 30},
        {"checkpoint_race", {test_put_log_race}, 120},
        {"checkpoint_refs",
         {test_put_refs_swaps, test_crash_put_refs, test_put_refs_conflict_writes_nothing},
         30},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, cases[i].timeout);
        for (size_t j = 0; cases[i].tests[j]; j++)
            _tcase_add_test(tc, cases[i].tests[j], 0, 0, 0, 1);
        suite_add_tcase(s, tc);
    }
}
