/* mongo.c — the MongoDB driver's own checks, beyond the conformance suite: URL
 * parameters, the stored layout and its sizes, a layout 1 store moved up, every
 * crash point of append, delete and fork re-created document by document, ttl,
 * threads racing, and writers (puts with messages among their writes) SIGKILLed
 * at random; tests/mongo_checkpoint.c has
 * the checkpoint checks. Run as tests/mongo_extra with CONVO_TEST_MONGO_URL set. */
#include "mongo_util.h"
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define KILL_ROUNDS 8
#define KILL_WRITERS 5
#define KILL_THREADS 4
#define RACE_THREADS 8

/* ---- URL ---- */

START_TEST(test_url_rejects)
{
    static const char *const bad[] = {
        "database=", "database=a.b", "database=a/b", "database=a%20b", "database=a$b",
        "database=a%22b", "database=a:b", "database=a*b", "database=a?b", "database=a|b",
        "database=0123456789012345678901234567890123456789012345678901234567890123",
        "prefix=", "prefix=.x", "prefix=x.", "prefix=a..b", "prefix=system_x", "prefix=a$b",
        "prefix=a%20b", "ttl=0", "ttl=-1", "ttl=abc", "ttl=1.5", "ttl=99999999999", "ttl=",
        "foo=1", "Database=x", "connectTimeoutMS=abc", "retryWrites=maybe", "w=0", "safe=false",
        "socketTimeoutMS=", NULL};
    for (const char *const *p = bad; *p; p++) {
        int rc = open_rc(*p);
        ck_assert_msg(rc == CONVO_EINVAL, "%s: expected CONVO_EINVAL, got %d", *p, rc);
    }
}
END_TEST

START_TEST(test_url_accepts)
{
    char p[400];
    snprintf(p, sizeof p,
             "database=%s&prefix=%s.x-y&ttl=60&appname=convo-test&w=1&journal=false&"
             "retryWrites=false&readPreference=secondaryPreferred&serverSelectionTimeoutMS=3000&"
             "connectTimeoutMS=2000&maxPoolSize=4&readConcernLevel=local",
             database, prefix);
    int rc = open_rc(p);
    ck_assert_msg(rc == 0, "open: %d %s", rc, err.message);
    snprintf(p, sizeof p, "database=%.63s",
             "012345678901234567890123456789012345678901234567890123456789012");
    ck_assert_int_eq(open_rc(p), 0);
}
END_TEST

START_TEST(test_url_unreachable_hides_password)
{
    const char *u = "mongodb://convo_user:secretpw@127.0.0.1:1/?serverSelectionTimeoutMS=300&"
                    "tlsCertificateKeyFilePassword=keypw99&database=x";
    convo_store *s = NULL;
    int64_t t0 = now_ms();
    int rc = convo_open(&s, u, &err);
    ck_assert_msg(rc == CONVO_EIO || rc == CONVO_ETIMEOUT, "got %d %s", rc, err.message);
    ck_assert_msg(!strstr(err.message, "secretpw") && !strstr(err.message, "keypw99"),
                  "message shows a password: %s", err.message);
    ck_assert_int_lt(now_ms() - t0, 5000);
    ck_assert_ptr_null(s);
}
END_TEST

/* ---- layout ---- */

START_TEST(test_layout)
{
    convo_store *s = open_store(NULL);
    const char *msgs[] = {"{ \"role\": \"user\",  \"x\": 1 }", "{\"role\":\"tool\",\"y\":[1]}"};
    convo_append_opts o = CONVO_APPEND_OPTS_INIT;
    o.idempotency_key = "key-1";
    int64_t before = now_ms() * 1000;
    ck_assert_int_eq(convo_append(s, "lay", msgs, NULL, 2, &o, NULL, &err), 0);
    ck_assert_int_eq(convo_save_extra(s, "lay",
                                      "{\"a.b\":1,\"$x\":1.5,\"\":null,\"%\":\"p\","
                                      "\"n\":{\"c.d\":[{\"$e\":true}]}}",
                                      &err),
                     0);
    bson_t *t = raw_find("threads", BCON_NEW("_id", BCON_UTF8("lay")));
    ck_assert_ptr_nonnull(t);
    assert_field(t, "g", BSON_TYPE_OID);
    assert_field(t, "live", BSON_TYPE_BOOL);
    assert_field(t, "v", BSON_TYPE_INT64);
    assert_field(t, "extra.a%2Eb", BSON_TYPE_INT64);
    assert_field(t, "extra.%24x", BSON_TYPE_DOUBLE);
    assert_field(t, "extra.%", BSON_TYPE_NULL);
    assert_field(t, "extra.%25", BSON_TYPE_UTF8);
    assert_field(t, "extra.n.c%2Ed.0.%24e", BSON_TYPE_BOOL);
    bson_oid_t g, hashed;
    thread_generation("lay", &g);
    new_generation("lay", &hashed);
    ck_assert(memcmp(g.bytes, hashed.bytes, 4) == 0); /* g starts with the id's hash */
    bson_t *b = raw_find("batches", BCON_NEW("g", BCON_OID(&g)));
    ck_assert_ptr_nonnull(b);
    bson_iter_t it;
    ck_assert(!bson_iter_init_find(&it, b, "t")); /* the id is in the thread doc only */
    ck_assert(bson_iter_init_find(&it, b, "s") && bson_iter_as_int64(&it) == 0);
    ck_assert(bson_iter_init_find(&it, b, "e") && bson_iter_as_int64(&it) == 2);
    ck_assert(bson_iter_init_find(&it, b, "n") && bson_iter_as_int64(&it) == 2);
    ck_assert(bson_iter_init_find(&it, b, "at") && BSON_ITER_HOLDS_INT64(&it));
    ck_assert_int_ge(bson_iter_int64(&it), before);
    ck_assert_int_le(bson_iter_int64(&it), now_ms() * 1000);
    ck_assert(bson_iter_init_find(&it, b, "k") && strcmp(bson_iter_utf8(&it, NULL), "key-1") == 0);
    assert_field(b, "m.1.r", BSON_TYPE_UTF8);
    bson_iter_t m;
    ck_assert(bson_iter_init(&it, b) && bson_iter_find_descendant(&it, "m.0.b", &m));
    uint32_t len;
    const uint8_t *data;
    bson_iter_binary(&m, NULL, &len, &data);
    ck_assert_int_eq(len, strlen(msgs[0]));
    ck_assert(memcmp(data, msgs[0], len) == 0);
    bson_destroy(t);
    bson_destroy(b);
    /* without a key, k is the batch's position: unique in its generation */
    ck_assert_int_eq(convo_append(s, "lay", msgs, NULL, 1, NULL, NULL, &err), 0);
    b = raw_find("batches", BCON_NEW("g", BCON_OID(&g), "s", BCON_INT64(2)));
    ck_assert_ptr_nonnull(b);
    ck_assert(bson_iter_init_find(&it, b, "k") && BSON_ITER_HOLDS_INT64(&it) &&
              bson_iter_int64(&it) == 2);
    ck_assert(!bson_iter_init_find(&it, b, "u"));
    bson_destroy(b);
    bson_t *meta = raw_find("meta", BCON_NEW("_id", BCON_UTF8("schema")));
    ck_assert_ptr_nonnull(meta);
    ck_assert(bson_iter_init_find(&it, meta, "version") && bson_iter_as_int64(&it) == 6);
    bson_destroy(meta);
    convo_close(s);
}
END_TEST

/* Indexes with a partialFilterExpression in the store's collections. */
static int partial_indexes(void)
{
    static const char *const kinds[] = {"threads", "batches", "checkpoints", "values", "writes",
                                        "meta"};
    int n = 0;
    for (int k = 0; k < 6; k++) {
        mongoc_collection_t *c = coll(kinds[k]);
        mongoc_cursor_t *cur = mongoc_collection_find_indexes_with_opts(c, NULL);
        const bson_t *doc;
        bson_iter_t it;
        while (mongoc_cursor_next(cur, &doc))
            n += bson_iter_init_find(&it, doc, "partialFilterExpression");
        mongoc_cursor_destroy(cur);
        mongoc_collection_destroy(c);
    }
    return n;
}

START_TEST(test_indexes)
{
    convo_store *s = open_store(NULL);
    /* none is partial: servers without partial indexes ignore or refuse them */
    ck_assert_int_eq(partial_indexes(), 0);
    bson_t *chain = index_named("batches", "convo_chain_v2");
    bson_t *idem = index_named("batches", "convo_idempotency_v4");
    bson_t *gen = index_named("threads", "convo_generation");
    ck_assert_ptr_nonnull(chain);
    ck_assert_ptr_nonnull(idem);
    ck_assert_ptr_nonnull(gen);
    ck_assert_ptr_null(index_named("batches", "convo_chain"));
    bson_iter_t it, key;
    ck_assert(bson_iter_init_find(&it, chain, "unique") && bson_iter_as_bool(&it));
    ck_assert(bson_iter_init_find(&it, chain, "key") && bson_iter_recurse(&it, &key) &&
              bson_iter_next(&key) && strcmp(bson_iter_key(&key), "g") == 0 &&
              bson_iter_next(&key) && strcmp(bson_iter_key(&key), "s") == 0 &&
              !bson_iter_next(&key));
    ck_assert(bson_iter_init_find(&it, idem, "unique") && bson_iter_as_bool(&it));
    ck_assert(!bson_iter_init_find(&it, idem, "partialFilterExpression")); /* see Servers */
    ck_assert_ptr_null(index_named("batches", "convo_idempotency_v2"));
    ck_assert_ptr_null(index_named("batches", "convo_expiry"));
    bson_destroy(chain);
    bson_destroy(idem);
    bson_destroy(gen);
    convo_close(s);
    s = open_store("ttl=30"); /* reopening with ttl adds the expiry indexes */
    for (int i = 0; i < 2; i++) {
        bson_t *ttl = index_named(i ? "threads" : "batches", "convo_expiry");
        ck_assert_ptr_nonnull(ttl);
        ck_assert(bson_iter_init_find(&it, ttl, "expireAfterSeconds") &&
                  bson_iter_as_int64(&it) == 0);
        bson_destroy(ttl);
    }
    convo_close(s);
}
END_TEST

START_TEST(test_newer_schema_refused)
{
    convo_store *s = open_store(NULL);
    convo_close(s);
    raw_update("meta", BCON_NEW("_id", BCON_UTF8("schema")),
               BCON_NEW("$set", "{", "version", BCON_INT32(99), "}"));
    char p[200];
    snprintf(p, sizeof p, "database=%s&prefix=%s", database, prefix);
    ck_assert_int_eq(open_rc(p), CONVO_ENOTSUP);
}
END_TEST

START_TEST(test_extra_keys_round_trip)
{
    convo_store *s = open_store(NULL);
    const char *patch = "{\"a\":{\"b.c\":{\"$d\":1,\"\":[{\"%\":2}]}},\"%\":2,\"%2E\":3,\".\":4,"
                        "\"%25\":5,\"$\":{\"$\":{\"$\":null}},\"f\":-0.0,\"big\":9007199254740993}";
    ck_assert_int_eq(convo_save_extra(s, "keys", patch, &err), 0);
    json_t *want = json_loads(patch, 0, NULL), *got = extra_of(s, "keys");
    ck_assert_msg(json_equal(want, got), "extra came back as %s", json_dumps(got, JSON_COMPACT));
    /* integers stay integers, reals reals */
    ck_assert(json_is_integer(json_object_get(got, "big")));
    ck_assert(json_is_real(json_object_get(got, "f")));
    json_decref(want);
    json_decref(got);
    ck_assert_int_eq(convo_save_extra(s, "keys", "{\"%2E\":\"x\"}", &err), 0);
    got = extra_of(s, "keys");
    ck_assert_str_eq(json_string_value(json_object_get(got, "%2E")), "x");
    ck_assert_int_eq(json_integer_value(json_object_get(got, ".")), 4);
    json_decref(got);
    convo_close(s);
}
END_TEST

START_TEST(test_extra_too_deep)
{
    convo_store *s = open_store(NULL);
    char deep[400] = "";
    for (int i = 0; i < 120; i++)
        strcat(deep, "[");
    for (int i = 0; i < 120; i++)
        strcat(deep, "]");
    char patch[420];
    snprintf(patch, sizeof patch, "{\"d\":%s}", deep);
    ck_assert_int_eq(convo_save_extra(s, "deep", patch, &err), CONVO_EINVAL);
    ck_assert_int_eq(length_of(s, "deep"), -1);
    convo_close(s);
}
END_TEST

/* ---- size ---- */

START_TEST(test_batch_document_limit)
{
    convo_store *s = open_store(NULL);
    char *one = big_message(1000000);
    const char *msgs[17];
    for (int i = 0; i < 17; i++)
        msgs[i] = one;
    ck_assert_int_eq(convo_append(s, "big", msgs, NULL, 17, NULL, NULL, &err), CONVO_ETOOLARGE);
    ck_assert_int_eq(length_of(s, "big"), -1);
    ck_assert_int_eq(raw_count("threads", BCON_NEW("_id", BCON_UTF8("big"))), 0);
    ck_assert_int_eq(raw_count("batches", of_thread("big")), 0);
    ck_assert_int_eq(convo_append(s, "big", msgs, NULL, 16, NULL, NULL, &err), 0);
    convo_history *h;
    ck_assert_int_eq(convo_load(s, "big", NULL, &h, &err), 0);
    ck_assert_int_eq(convo_history_count(h), 16);
    size_t len;
    const char *m = convo_history_message(h, 15, &len);
    ck_assert_int_eq(len, 1000000);
    ck_assert(memcmp(m, one, len) == 0);
    convo_history_free(h);
    free(one);
    convo_close(s);
}
END_TEST

/* stored_bytes: storageSize + totalIndexSize of this prefix's collections only. */
START_TEST(test_stored_bytes)
{
    convo_store *s = open_store(NULL);
    int64_t before, after, again;
    ck_assert_msg(convo_store_bytes(s, &before, &err) == 0, "%s", err.message);
    char *big = big_message(100000);
    const char *const *one = (const char *const *)&big;
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(convo_append(s, "sb", one, NULL, 1, NULL, NULL, &err), 0);
    ck_assert_int_eq(convo_store_bytes(s, &after, &err), 0);
    ck_assert_int_gt(after, 0);
    if (standin()) { /* uncompressed BSON: the messages, plus a little per document */
        ck_assert_int_ge(after - before, 5 * 100000);
        ck_assert_int_le(after - before, 5 * 100000 + 5 * 400 + 1000);
    }
    /* another prefix in the same database is not this store's */
    char other[48];
    snprintf(other, sizeof other, "%s", prefix);
    strcat(prefix, "o");
    convo_store *o = open_store(NULL);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(convo_append(o, "sb", one, NULL, 1, NULL, NULL, &err), 0);
    ck_assert_int_eq(convo_store_bytes(s, &again, &err), 0);
    ck_assert_int_eq(again, after);
    strcpy(prefix, other);
    free(big);
    convo_close(o);
    convo_close(s);
}
END_TEST

/* ---- import (convo copy into MongoDB) ---- */

static void assert_same_history(convo_store *a, convo_store *b, const char *id)
{
    convo_history *ha, *hb;
    ck_assert_int_eq(convo_load(a, id, NULL, &ha, &err), 0);
    ck_assert_int_eq(convo_load(b, id, NULL, &hb, &err), 0);
    ck_assert_int_eq(convo_history_count(ha), convo_history_count(hb));
    for (size_t i = 0; i < convo_history_count(ha); i++) {
        size_t la, lb;
        const char *ma = convo_history_message(ha, i, &la), *mb = convo_history_message(hb, i, &lb);
        ck_assert_int_eq(la, lb);
        ck_assert(memcmp(ma, mb, la) == 0);
        ck_assert_int_eq(convo_history_seq(ha, i), convo_history_seq(hb, i));
        ck_assert_int_eq(convo_history_created_at(ha, i), convo_history_created_at(hb, i));
        ck_assert_str_eq(convo_history_role(ha, i), convo_history_role(hb, i));
    }
    convo_history_free(ha);
    convo_history_free(hb);
}

START_TEST(test_import)
{
    convo_store *src = NULL, *dst = open_store(NULL);
    ck_assert_int_eq(convo_open(&src, "memory:", &err), 0);
    char *big = big_message(900000);
    for (int i = 0; i < 30; i++) { /* one dump chunk of 18 MB: more than one document */
        const char *m = i % 3 ? big : "{\"role\":\"tool\",\"small\":true}";
        ck_assert_int_eq(convo_append(src, "imp", &m, NULL, 1, NULL, NULL, &err), 0);
        sleep_ms(1); /* every message its own created_at */
    }
    const char *id = "imp";
    convo_dump_stats st;
    ck_assert_msg(convo_copy(src, dst, &id, 1, NULL, &st, &err) == 0, "copy: %s", err.message);
    assert_same_history(src, dst, "imp");
    int64_t docs = raw_count("batches", of_thread("imp"));
    ck_assert_int_ge(docs, 2);
    ck_assert_int_eq(convo_copy(src, dst, &id, 1, NULL, &st, &err), 0);
    ck_assert_int_eq(st.skipped, 30); /* the same dump again changes nothing */
    /* an import killed between two documents of one chunk resumes where it stopped */
    bson_oid_t g;
    thread_generation("imp", &g);
    raw_delete("batches", BCON_NEW("g", BCON_OID(&g), "s", "{", "$gt", BCON_INT64(0), "}"));
    ck_assert_int_lt(length_of(dst, "imp"), 30);
    ck_assert_msg(convo_copy(src, dst, &id, 1, NULL, &st, &err) == 0, "copy: %s", err.message);
    assert_same_history(src, dst, "imp");
    /* a thread that went its own way is a conflict */
    append_batch(dst, "imp", 1, 1, 1);
    convo_close(dst);
    dst = open_store(NULL);
    ck_assert_int_eq(convo_copy(src, dst, &id, 1, NULL, &st, &err), 0); /* 31 >= 30: skipped */
    free(big);
    convo_close(src);
    convo_close(dst);
}
END_TEST

/* ---- crash points, re-created by writing the documents a killed call leaves ---- */

/* An append killed after making its placeholder, before its batch. */
START_TEST(test_crash_append_placeholder)
{
    convo_store *s = open_store(NULL);
    bson_oid_t g;
    new_generation("ph", &g);
    forge_thread("ph", &g, false, false, 0);
    ck_assert_int_eq(length_of(s, "ph"), -1);
    ck_assert(!listed(s, "ph"));
    ck_assert_int_eq(convo_save_extra(s, "other", "{}", &err), 0);
    ck_assert(listed(s, "other"));
    ck_assert_int_eq(append_batch(s, "ph", 1, 1, 2), 0);
    ck_assert_int_eq(verify_thread(s, "ph"), 2);
    ck_assert(listed(s, "ph"));
    /* a placeholder is removed by a delete, which still reports it missing */
    new_generation("ph2", &g);
    forge_thread("ph2", &g, false, false, 0);
    ck_assert_int_eq(convo_thread_delete(s, "ph2", &err), CONVO_ENOTFOUND);
    ck_assert_int_eq(raw_count("threads", BCON_NEW("_id", BCON_UTF8("ph2"))), 0);
    ck_assert_int_eq(generation_batches(&g), 0);
    /* and a fork into one takes its place */
    new_generation("ph3", &g);
    forge_thread("ph3", &g, false, false, 0);
    ck_assert_int_eq(convo_thread_fork(s, "ph", "ph3", -1, &err), 0);
    ck_assert_int_eq(verify_thread(s, "ph3"), 2);
    convo_close(s);
}
END_TEST

/* An append killed after its batch, before marking the placeholder live. */
START_TEST(test_crash_append_not_marked)
{
    convo_store *s = open_store(NULL);
    bson_oid_t g;
    new_generation("nm", &g);
    forge_thread("nm", &g, false, false, 0);
    forge_batch(&g, 0, 3, 1);
    ck_assert_int_eq(verify_thread(s, "nm"), 3);
    ck_assert(listed(s, "nm"));
    ck_assert_int_eq(append_batch(s, "nm", 2, 1, 2), 3);
    ck_assert_int_eq(verify_thread(s, "nm"), 5);
    convo_close(s);
}
END_TEST

/* A delete killed after marking the thread dying, before the fence. */
START_TEST(test_crash_delete_marked)
{
    convo_store *s = open_store(NULL);
    append_batch(s, "dm", 1, 1, 3);
    append_batch(s, "dm2", 1, 1, 3);
    bson_oid_t g;
    thread_generation("dm", &g);
    for (int i = 0; i < 2; i++)
        raw_update("threads", BCON_NEW("_id", BCON_UTF8(i ? "dm2" : "dm")),
                   BCON_NEW("$set", "{", "dying", BCON_BOOL(true), "}"));
    ck_assert_int_eq(verify_thread(s, "dm"), 3); /* not deleted yet */
    ck_assert(listed(s, "dm"));
    /* the next writer finishes the delete, then writes to a new thread */
    ck_assert_int_eq(convo_save_extra(s, "dm", "{\"z\":1}", &err), 0);
    ck_assert_int_eq(verify_thread(s, "dm"), 0);
    json_t *e = extra_of(s, "dm");
    ck_assert_int_eq(json_integer_value(json_object_get(e, "z")), 1);
    json_decref(e);
    ck_assert_int_eq(generation_batches(&g), 0);
    ck_assert_int_eq(append_batch(s, "dm2", 2, 1, 1), 0);
    ck_assert_int_eq(verify_thread(s, "dm2"), 1);
    /* a second delete helps and reports the thread gone */
    append_batch(s, "dm3", 1, 1, 1);
    raw_update("threads", BCON_NEW("_id", BCON_UTF8("dm3")),
               BCON_NEW("$set", "{", "dying", BCON_BOOL(true), "}"));
    ck_assert_int_eq(convo_thread_delete(s, "dm3", &err), CONVO_ENOTFOUND);
    ck_assert_int_eq(length_of(s, "dm3"), -1);
    convo_close(s);
}
END_TEST

/* A delete killed after its fence: the thread is gone for everyone. */
START_TEST(test_crash_delete_fenced)
{
    convo_store *s = open_store(NULL);
    append_batch(s, "df", 1, 1, 3);
    bson_oid_t g;
    thread_generation("df", &g);
    raw_update("threads", BCON_NEW("_id", BCON_UTF8("df")),
               BCON_NEW("$set", "{", "dying", BCON_BOOL(true), "}"));
    forge_fence(&g, 3);
    ck_assert_int_eq(length_of(s, "df"), -1);
    ck_assert(!listed(s, "df"));
    convo_load_opts lo = CONVO_LOAD_OPTS_INIT;
    lo.limit = 1;
    convo_history *h;
    ck_assert_int_eq(convo_load(s, "df", &lo, &h, &err), CONVO_ENOTFOUND);
    ck_assert_int_eq(convo_thread_fork(s, "df", "df-copy", -1, &err), CONVO_ENOTFOUND);
    ck_assert_int_eq(append_batch(s, "df", 2, 1, 2), 0);
    ck_assert_int_eq(verify_thread(s, "df"), 2);
    ck_assert_int_eq(generation_batches(&g), 0);
    ck_assert_int_eq(raw_count("batches", of_thread("df")), 1);
    convo_close(s);
}
END_TEST

/* A delete killed after removing the thread doc, before its batches. */
START_TEST(test_crash_delete_leftovers)
{
    convo_store *s = open_store(NULL);
    append_batch(s, "dl", 1, 1, 3);
    append_batch(s, "dl", 1, 2, 3);
    bson_oid_t g;
    thread_generation("dl", &g);
    raw_delete("threads", BCON_NEW("_id", BCON_UTF8("dl")));
    ck_assert_int_eq(length_of(s, "dl"), -1);
    ck_assert_int_eq(append_batch(s, "dl", 2, 1, 1), 0); /* a new incarnation */
    ck_assert_int_eq(verify_thread(s, "dl"), 1);
    ck_assert_int_eq(generation_batches(&g), 2);
    /* a batch a racing writer put into a dead generation */
    bson_oid_t dead;
    new_generation("dl", &dead);
    forge_batch(&dead, 7, 1, 3);
    ck_assert_int_eq(verify_thread(s, "dl"), 1);
    ck_assert_int_eq(convo_thread_delete(s, "dl", &err), 0);
    ck_assert_int_eq(raw_count("batches", of_thread("dl")), 0);
    ck_assert_int_eq(raw_count("threads", BCON_NEW("_id", BCON_UTF8("dl"))), 0);
    convo_close(s);
}
END_TEST

/* A fork killed while copying: its placeholder is invisible; writers cancel it. */
START_TEST(test_crash_fork_placeholder)
{
    convo_store *s = open_store(NULL);
    append_batch(s, "src", 1, 1, 2);
    bson_oid_t g;
    new_generation("fk", &g);
    forge_thread("fk", &g, false, true, now_ms());
    forge_batch(&g, 0, 2, 9);
    ck_assert_int_eq(length_of(s, "fk"), -1);
    ck_assert(!listed(s, "fk"));
    /* a fresh placeholder: another fork is under way */
    ck_assert_int_eq(convo_thread_fork(s, "src", "fk", -1, &err), CONVO_ECONFLICT);
    ck_assert_int_eq(convo_thread_delete(s, "fk", &err), CONVO_ENOTFOUND);
    ck_assert_int_eq(raw_count("threads", BCON_NEW("_id", BCON_UTF8("fk"))), 1);
    /* an append cancels it and goes first */
    ck_assert_int_eq(append_batch(s, "fk", 2, 1, 1), 0);
    ck_assert_int_eq(verify_thread(s, "fk"), 1);
    ck_assert_int_eq(generation_batches(&g), 0);
    /* save_extra does the same */
    new_generation("fk2", &g);
    forge_thread("fk2", &g, false, true, now_ms());
    ck_assert_int_eq(convo_save_extra(s, "fk2", "{\"a\":1}", &err), 0);
    ck_assert_int_eq(verify_thread(s, "fk2"), 0);
    /* an abandoned placeholder (older than 10 minutes) is taken over by a fork */
    new_generation("fk3", &g);
    forge_thread("fk3", &g, false, true, now_ms() - 11 * 60 * 1000);
    forge_batch(&g, 0, 1, 9);
    ck_assert_int_eq(convo_thread_fork(s, "src", "fk3", -1, &err), 0);
    ck_assert_int_eq(verify_thread(s, "fk3"), 2);
    ck_assert_int_eq(generation_batches(&g), 0);
    convo_close(s);
}
END_TEST

/* ---- layout 1 -> 2 ---- */

/* Sets t on every document of generation g: what layout 1 stored. */
static void as_layout_1(const char *id, const bson_oid_t *g)
{
    static const char *const kinds[] = {"batches", "checkpoints", "values", "writes"};
    for (int k = 0; k < 4; k++) {
        mongoc_collection_t *c = coll(kinds[k]);
        bson_t *f = BCON_NEW("g", BCON_OID(g)), *u = BCON_NEW("$set", "{", "t", BCON_UTF8(id), "}");
        bson_error_t e;
        ck_assert_msg(mongoc_collection_update_many(c, f, u, NULL, NULL, &e), "%s", e.message);
        bson_destroy(f);
        bson_destroy(u);
        mongoc_collection_destroy(c);
    }
}

/* Layout 1's indexes, led by the thread id. */
static void layout_1_indexes(void)
{
    static const struct {
        const char *kind, *name, *key[6];
        bool unique;
    } ix[] = {{"batches", "convo_chain", {"t", "g", "s"}, true},
              {"batches", "convo_idempotency", {"t", "g", "k"}, true},
              {"checkpoints", "convo_checkpoint", {"t", "g", "ns", "id"}, true},
              {"checkpoints", "convo_checkpoint_order", {"t", "g", "o"}, false},
              {"values", "convo_value", {"t", "g", "ns", "c", "v"}, true},
              {"writes", "convo_write", {"t", "g", "ns", "cp", "task"}, true}};
    for (size_t i = 0; i < sizeof ix / sizeof ix[0]; i++) {
        mongoc_collection_t *c = coll(ix[i].kind);
        bson_t key = BSON_INITIALIZER;
        for (int j = 0; ix[i].key[j]; j++)
            BSON_APPEND_INT32(&key, ix[i].key[j], 1);
        bson_t *cmd = BCON_NEW("createIndexes", BCON_UTF8(mongoc_collection_get_name(c)), "indexes",
                               "[", "{", "key", BCON_DOCUMENT(&key), "name", BCON_UTF8(ix[i].name),
                               "unique", BCON_BOOL(ix[i].unique), "}", "]");
        if (strcmp(ix[i].name, "convo_idempotency") == 0) { /* partial: keyed batches only */
            bson_destroy(cmd);
            cmd = BCON_NEW("createIndexes", BCON_UTF8(mongoc_collection_get_name(c)), "indexes",
                           "[", "{", "key", BCON_DOCUMENT(&key), "name", BCON_UTF8(ix[i].name),
                           "unique", BCON_BOOL(true), "partialFilterExpression", "{", "k", "{",
                           "$type", BCON_UTF8("string"), "}", "}", "}", "]");
        }
        bson_error_t e;
        ck_assert_msg(mongoc_collection_write_command_with_opts(c, cmd, NULL, NULL, &e), "%s",
                      e.message);
        bson_destroy(cmd);
        bson_destroy(&key);
        mongoc_collection_destroy(c);
    }
}

/* A store written by layout 1 (the thread id in every document, random
 * generations, a dead generation left over) moves up at open, and keeps its
 * messages, extra and checkpoints. */
START_TEST(test_upgrade_from_v1)
{
    bson_oid_t g, dead, gone;
    bson_oid_init(&g, NULL);
    bson_oid_init(&dead, NULL);
    bson_oid_init(&gone, NULL);
    layout_1_indexes();
    raw_insert("meta", BCON_NEW("_id", BCON_UTF8("schema"), "version", BCON_INT32(1)));
    raw_insert("threads", BCON_NEW("_id", BCON_UTF8("old"), "g", BCON_OID(&g), "live",
                                   BCON_BOOL(true), "v", BCON_INT64(1), "co", BCON_INT64(1),
                                   "extra", "{", "a", BCON_INT64(1), "}"));
    forge_batch(&g, 0, 2, 1);
    forge_batch(&g, 2, 1, 1);
    raw_insert("checkpoints",
               BCON_NEW("g", BCON_OID(&g), "ns", BCON_UTF8(""), "id", BCON_UTF8("c1"), "o",
                        BCON_INT64(1), "p", BCON_NULL, "meta", BCON_UTF8("{}"), "bt",
                        BCON_UTF8("json"), "bb", BCON_BIN(BSON_SUBTYPE_BINARY, (uint8_t *)"{}", 2),
                        "ch", "[", "{", "c", BCON_UTF8("a"), "v", BCON_UTF8("1"), "}", "]", "ll",
                        BCON_INT64(3), "at", BCON_INT64(now_ms() * 1000)));
    raw_insert("values", BCON_NEW("g", BCON_OID(&g), "ns", BCON_UTF8(""), "c", BCON_UTF8("a"), "v",
                                  BCON_UTF8("1"), "ty", BCON_UTF8("json"), "b",
                                  BCON_BIN(BSON_SUBTYPE_BINARY, (uint8_t *)"\"1\"", 3)));
    as_layout_1("old", &g);
    forge_batch(&dead, 0, 1, 2); /* leftovers of killed deletes */
    as_layout_1("old", &dead);
    raw_insert("values", BCON_NEW("g", BCON_OID(&gone), "ns", BCON_UTF8(""), "c", BCON_UTF8("a"),
                                  "v", BCON_UTF8("1")));
    as_layout_1("gone", &gone);

    convo_store *s = open_store(NULL);
    bson_t *meta = raw_find("meta", BCON_NEW("_id", BCON_UTF8("schema")));
    bson_iter_t it;
    ck_assert(bson_iter_init_find(&it, meta, "version") && bson_iter_as_int64(&it) == 6);
    bson_destroy(meta);
    static const char *const kinds[] = {"batches", "checkpoints", "values", "writes"};
    for (int k = 0; k < 4; k++)
        ck_assert_int_eq(raw_count(kinds[k], BCON_NEW("t", "{", "$exists", BCON_BOOL(true), "}")),
                         0);
    ck_assert_ptr_null(index_named("batches", "convo_chain"));
    ck_assert_ptr_null(index_named("values", "convo_value"));
    bson_t *ix = index_named("batches", "convo_chain_v2");
    ck_assert_ptr_nonnull(ix);
    bson_destroy(ix);
    ck_assert_int_eq(generation_batches(&dead), 0);
    ck_assert_int_eq(raw_count("values", BCON_NEW("g", BCON_OID(&gone))), 0);
    /* the thread reads as before, takes appends at its end, and deletes whole */
    ck_assert_int_eq(verify_thread(s, "old"), 3);
    json_t *e = extra_of(s, "old");
    ck_assert_int_eq(json_integer_value(json_object_get(e, "a")), 1);
    json_decref(e);
    convo_checkpoint *cp;
    ck_assert_int_eq(convo_checkpoint_get(s, "old", NULL, NULL, &cp, &err), 0);
    const char *version;
    convo_blob v;
    ck_assert_str_eq(convo_checkpoint_id(cp), "c1");
    convo_checkpoint_channel(cp, 0, &version, &v);
    ck_assert(v.len == 3 && memcmp(v.bytes, "\"1\"", 3) == 0);
    convo_checkpoint_free(cp);
    put_checkpoint(s, "old", "c2", "2");
    ck_assert_int_eq(append_batch(s, "old", 2, 1, 1), 3);
    ck_assert_int_eq(verify_thread(s, "old"), 4);
    convo_close(s);
    s = open_store(NULL); /* once moved up, opening changes nothing */
    ck_assert_int_eq(verify_thread(s, "old"), 4);
    ck_assert_int_eq(convo_thread_delete(s, "old", &err), 0);
    ck_assert_int_eq(generation_batches(&g), 0);
    ck_assert_int_eq(raw_count("checkpoints", BCON_NEW("g", BCON_OID(&g))), 0);
    ck_assert_int_eq(raw_count("values", BCON_NEW("g", BCON_OID(&g))), 0);
    convo_close(s);
}
END_TEST

/* ---- ttl ---- */

START_TEST(test_ttl)
{
    convo_store *s = open_store("ttl=1");
    append_batch(s, "tt", 1, 1, 2);
    ck_assert_int_eq(convo_save_extra(s, "tt", "{\"a\":1}", &err), 0);
    bson_t *t = raw_find("threads", BCON_NEW("_id", BCON_UTF8("tt")));
    bson_t *b = raw_find("batches", of_thread("tt"));
    bson_iter_t it;
    ck_assert(bson_iter_init_find(&it, t, "exp") && BSON_ITER_HOLDS_DATE_TIME(&it));
    int64_t texp = bson_iter_date_time(&it);
    ck_assert(bson_iter_init_find(&it, b, "exp") && BSON_ITER_HOLDS_DATE_TIME(&it));
    int64_t bexp = bson_iter_date_time(&it);
    ck_assert_int_ge(texp, now_ms() + 500 - 2000);
    ck_assert_int_le(texp, now_ms() + 1000);
    ck_assert_int_ge(bexp, texp + 60000); /* messages outlive their thread doc */
    bson_destroy(t);
    bson_destroy(b);
    convo_store *plain = open_store(NULL);
    ck_assert_int_eq(verify_thread(plain, "tt"), 2);
    sleep_ms(1300);
    /* expired: gone at once for every store, whatever the server's TTL monitor did */
    ck_assert_int_eq(length_of(s, "tt"), -1);
    ck_assert_int_eq(length_of(plain, "tt"), -1);
    ck_assert(!listed(plain, "tt"));
    ck_assert_int_eq(append_batch(s, "tt", 2, 1, 1), 0); /* starts afresh */
    ck_assert_int_eq(verify_thread(s, "tt"), 1);
    json_t *e = extra_of(s, "tt");
    ck_assert_int_eq(json_object_size(e), 0);
    json_decref(e);
    convo_close(plain);
    convo_close(s);
}
END_TEST

/* ---- threads racing in one process ---- */

typedef struct racer {
    convo_store *s;
    int w;
    int successes;
} racer;

static void *race_append(void *arg)
{
    racer *r = arg;
    for (int b = 0; b < 25; b++) {
        char *msgs[4];
        int n = 1 + (r->w + b) % 4;
        for (int i = 0; i < n; i++) {
            msgs[i] = malloc(96);
            snprintf(msgs[i], 96, "{\"role\":\"user\",\"w\":%d,\"b\":%d,\"i\":%d,\"n\":%d}", r->w,
                     b, i, n);
        }
        convo_error e;
        if (convo_append(r->s, "race", (const char *const *)msgs, NULL, (size_t)n, NULL, NULL,
                         &e) == 0)
            r->successes++;
        for (int i = 0; i < n; i++)
            free(msgs[i]);
    }
    return NULL;
}

static void *race_expected(void *arg)
{
    racer *r = arg;
    for (int b = 0; b < 200 && r->successes < 10; b++) {
        convo_history *h;
        convo_error e;
        convo_load_opts lo = CONVO_LOAD_OPTS_INIT;
        lo.tail = 1;
        int64_t len = 0;
        if (convo_load(r->s, "cond", &lo, &h, &e) == 0) {
            len = convo_history_length(h);
            convo_history_free(h);
        }
        char msg[96];
        snprintf(msg, sizeof msg, "{\"role\":\"user\",\"w\":%d,\"b\":%d,\"i\":0,\"n\":1}", r->w, b);
        const char *m = msg;
        convo_append_opts o = CONVO_APPEND_OPTS_INIT;
        o.expected_length = len;
        int rc = convo_append(r->s, "cond", &m, NULL, 1, &o, NULL, &e);
        if (rc == 0)
            r->successes++;
        else if (rc != CONVO_ECONFLICT)
            return (void *)1;
    }
    return NULL;
}

static void *race_extra(void *arg)
{
    racer *r = arg;
    for (int i = 0; i < 15; i++) {
        char patch[64];
        convo_error e;
        snprintf(patch, sizeof patch, "{\"w%d_%d\":%d}", r->w, i, i);
        if (convo_save_extra(r->s, "xr", patch, &e) == 0)
            r->successes++;
    }
    return NULL;
}

static void run_racers(convo_store *s, void *(*fn)(void *), racer *r)
{
    pthread_t th[RACE_THREADS];
    for (int i = 0; i < RACE_THREADS; i++) {
        r[i] = (racer){s, i, 0};
        ck_assert_int_eq(pthread_create(&th[i], NULL, fn, &r[i]), 0);
    }
    for (int i = 0; i < RACE_THREADS; i++) {
        void *ret;
        pthread_join(th[i], &ret);
        ck_assert_ptr_null(ret);
    }
}

START_TEST(test_threads_race)
{
    convo_store *s = open_store(NULL);
    racer r[RACE_THREADS];
    run_racers(s, race_append, r);
    int64_t total = 0;
    for (int i = 0; i < RACE_THREADS; i++) {
        ck_assert_int_eq(r[i].successes, 25);
        for (int b = 0; b < 25; b++)
            total += 1 + (i + b) % 4;
    }
    ck_assert_int_eq(verify_thread(s, "race"), total);
    run_racers(s, race_expected, r);
    int won = 0;
    for (int i = 0; i < RACE_THREADS; i++)
        won += r[i].successes;
    ck_assert_int_eq(verify_thread(s, "cond"), won);
    run_racers(s, race_extra, r);
    json_t *e = extra_of(s, "xr");
    ck_assert_int_eq(json_object_size(e), RACE_THREADS * 15);
    json_decref(e);
    convo_close(s);
}
END_TEST

/* ---- writers SIGKILLed at random ---- */

static const char *kill_thread_name(unsigned r)
{
    static const char *const names[KILL_THREADS] = {"k0", "k1", "k2", "k3"};
    return names[r % KILL_THREADS];
}

/* A child's endless mix of writes; it only ever stops by SIGKILL. */
static void chaos_writer(int w, unsigned seed)
{
    char p[200];
    snprintf(p, sizeof p, "database=%s&prefix=%s", database, prefix);
    char *u = url_with(p);
    convo_store *s = NULL;
    convo_error e;
    if (convo_open(&s, u, &e) != 0)
        _exit(3);
    for (int b = 0;; b++) {
        unsigned r = (unsigned)rand_r(&seed);
        const char *t = kill_thread_name(r >> 4);
        if (r % 100 < 55) {
            char *msgs[6], key[40];
            int n = 1 + (int)((r >> 8) % 6);
            for (int i = 0; i < n; i++) {
                msgs[i] = malloc(96);
                snprintf(msgs[i], 96, "{\"role\":\"user\",\"w\":%d,\"b\":%d,\"i\":%d,\"n\":%d}", w,
                         b, i, n);
            }
            convo_append_opts o = CONVO_APPEND_OPTS_INIT;
            snprintf(key, sizeof key, "w%d-b%d", w, b);
            o.idempotency_key = r & 1 ? key : NULL;
            convo_append(s, t, (const char *const *)msgs, NULL, (size_t)n, &o, NULL, &e);
            for (int i = 0; i < n; i++)
                free(msgs[i]);
        } else if (r % 100 < 68) {
            char patch[40];
            snprintf(patch, sizeof patch, "{\"w%d\":%d}", w, b);
            convo_save_extra(s, t, patch, &e);
        } else if (r % 100 < 80) { /* a checkpoint put with messages at the length read */
            convo_history *h;
            convo_load_opts lo = CONVO_LOAD_OPTS_INIT;
            char id[40];
            int64_t len = 0;
            lo.tail = 1;
            if (convo_load(s, t, &lo, &h, &e) == 0) {
                len = convo_history_length(h);
                convo_history_free(h);
            }
            snprintf(id, sizeof id, "w%d-b%d", w, b);
            put_log(s, t, id, w, b, 1 + (int)((r >> 8) % 3), len, "{}", &e);
        } else if (r % 100 < 84) {
            char id[40], value[44];
            snprintf(id, sizeof id, "w%d-b%d", w, b);
            snprintf(value, sizeof value, "\"%s\"", id);
            convo_blob v = {"json", value, strlen(value)};
            convo_channel_in ch[] = {{"a", id, &v}};
            convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
            cp.thread_id = t;
            cp.checkpoint_id = id;
            cp.channels = ch;
            cp.nchannels = 1;
            convo_checkpoint_put(s, &cp, &e);
        } else if (r % 100 < 90) {
            convo_thread_delete(s, t, &e);
        } else if (r % 100 < 96) {
            convo_thread_fork(s, t, kill_thread_name(r >> 12), -1, &e);
        } else {
            convo_history *h;
            if (convo_load(s, t, NULL, &h, &e) == 0)
                convo_history_free(h);
        }
    }
}

START_TEST(test_sigkill_writers)
{
    unsigned seed = (unsigned)time(NULL) ^ (unsigned)getpid();
    const char *env = getenv("CONVO_MONGO_SEED");
    if (env)
        seed = (unsigned)strtoul(env, NULL, 0);
    fprintf(stderr, "mongo_extra: sigkill seed %u (CONVO_MONGO_SEED repeats it)\n", seed);
    convo_store *s = open_store(NULL);
    for (int round = 0; round < KILL_ROUNDS; round++) {
        pid_t pids[KILL_WRITERS];
        for (int k = 0; k < KILL_WRITERS; k++) {
            int w = 1 + round * KILL_WRITERS + k;
            unsigned child_seed = seed * 31u + (unsigned)w;
            pids[k] = fork();
            ck_assert_int_ge(pids[k], 0);
            if (pids[k] == 0)
                chaos_writer(w, child_seed);
        }
        sleep_ms(150 + rand_r(&seed) % 400);
        for (int k = 0; k < KILL_WRITERS; k++) {
            sleep_ms(rand_r(&seed) % 40);
            kill(pids[k], SIGKILL);
        }
        for (int k = 0; k < KILL_WRITERS; k++) {
            int status;
            waitpid(pids[k], &status, 0);
            ck_assert_msg(WIFSIGNALED(status), "writer %d stopped on its own (%d)", k, status);
        }
        for (int t = 0; t < KILL_THREADS; t++) {
            verify_thread(s, kill_thread_name((unsigned)t));
            verify_checkpoints(s, kill_thread_name((unsigned)t));
            verify_log_lengths(s, kill_thread_name((unsigned)t));
            if (length_of(s, kill_thread_name((unsigned)t)) >= 0) /* listing settled them */
                ck_assert_int_eq(unsettled(kill_thread_name((unsigned)t)), 0);
        }
        verify_raw_chains();
    }
    int64_t messages = 0;
    int with_log = 0;
    for (int t = 0; t < KILL_THREADS; t++) {
        int64_t len = verify_thread(s, kill_thread_name((unsigned)t));
        messages += len > 0 ? len : 0;
        with_log += verify_log_lengths(s, kill_thread_name((unsigned)t));
    }
    fprintf(stderr,
            "mongo_extra: %d writers killed; %lld messages whole in %d threads, %d checkpoints "
            "put with their messages; %lld batch documents stored (leftovers of killed deletes "
            "included)\n",
            KILL_ROUNDS * KILL_WRITERS, (long long)messages, KILL_THREADS, with_log,
            (long long)raw_count("batches", bson_new()));
    /* every thread still takes appends exactly at its end (or, when a killed delete
     * left its mark, at 0 of a new thread: the append finishes that delete first) */
    for (int t = 0; t < KILL_THREADS; t++) {
        const char *id = kill_thread_name((unsigned)t);
        int64_t len = verify_thread(s, id);
        bson_t *doc = raw_find("threads", BCON_NEW("_id", BCON_UTF8(id)));
        bson_iter_t it;
        if (doc && bson_iter_init_find(&it, doc, "dying"))
            len = -1;
        if (doc)
            bson_destroy(doc);
        ck_assert_int_eq(append_batch(s, id, 0, t, 2), len < 0 ? 0 : len);
        ck_assert_int_eq(verify_thread(s, id), (len < 0 ? 0 : len) + 2);
        ck_assert(listed(s, id));
    }
    convo_close(s);
}
END_TEST

static Suite *mongo_suite(void)
{
    Suite *s = suite_create("mongo");
    struct {
        const char *name;
        const TTest *tests[8];
        int timeout;
    } cases[] = {
        {"url", {test_url_rejects, test_url_accepts, test_url_unreachable_hides_password}, 30},
        {"layout",
         {test_layout, test_indexes, test_newer_schema_refused, test_extra_keys_round_trip,
          test_extra_too_deep},
         30},
        {"size", {test_batch_document_limit, test_stored_bytes, test_import}, 120},
        {"crash_points", {test_crash_append_placeholder, test_crash_append_not_marked,
                          test_crash_delete_marked, test_crash_delete_fenced,
                          test_crash_delete_leftovers, test_crash_fork_placeholder}, 30},
        {"upgrade", {test_upgrade_from_v1}, 30},
        {"ttl", {test_ttl}, 30},
        {"race", {test_threads_race}, 120},
        {"sigkill", {test_sigkill_writers}, 300},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        TCase *tc = tcase_create(cases[i].name);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_set_timeout(tc, cases[i].timeout);
        for (size_t j = 0; cases[i].tests[j]; j++)
            _tcase_add_test(tc, cases[i].tests[j], 0, 0, 0, 1);
        suite_add_tcase(s, tc);
    }
    add_checkpoint_cases(s);
    add_rewrite_cases(s);
    add_index_cases(s);
    return s;
}

int main(void)
{
    base_url = getenv("CONVO_TEST_MONGO_URL");
    if (!base_url || !*base_url) {
        fprintf(stderr, "mongo_extra: skipped: set CONVO_TEST_MONGO_URL\n");
        return 77;
    }
    mongoc_init();
    snprintf(database, sizeof database, "mx%lx%x", (unsigned long)time(NULL), (unsigned)getpid());
    SRunner *sr = srunner_create(mongo_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    /* drop the run's database */
    char *u = strdup(base_url), *q = strchr(u, '?');
    if (q)
        *q = '\0';
    mongoc_client_t *c = mongoc_client_new(u);
    if (c) {
        mongoc_database_t *db = mongoc_client_get_database(c, database);
        mongoc_database_drop(db, NULL);
        mongoc_database_destroy(db);
        mongoc_client_destroy(c);
    }
    free(u);
    mongoc_cleanup();
    return failed ? 1 : 0;
}
