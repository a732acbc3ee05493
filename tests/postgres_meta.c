/* postgres_meta.c — a checkpoint's metadata with LangGraph's usual fragments
 * as one byte each (schema version 36): stored packed, read back and filtered
 * as put, fragments inside strings and raw control bytes kept exactly, and a
 * version 35 schema migrated with its rows. */
#include "postgres.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DELTA_META "{\"source\":\"loop\",\"step\":3,\"parents\":{},\"delta_writes_versioned\":true," \
                   "\"counters_since_delta_snapshot\":{\"messages\":[1,2]}}"
#define ODD_META "{\"note\":\"\\\"step\\\": \\\"source\\\":\\\"loop\\\"\",\"parents\":{\"\":\"x\"}," \
                 "\"source\":\"fork\",\"u\":\"\\u0001\"}"

static void put_meta(convo_store *s, const char *id, const char *meta)
{
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = "t";
    cp.checkpoint_id = id;
    cp.metadata_json = meta;
    convo_error err;
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put %s: %s", id, err.message);
}

static void meta_is(convo_store *s, const char *id, const char *meta)
{
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_get(s, "t", "", id, &cp, &err) == 0, "%s", err.message);
    ck_assert_str_eq(convo_checkpoint_metadata(cp), meta);
    convo_checkpoint_free(cp);
}

/* How many checkpoints of "t" a list filtered by `filter` gives. */
static size_t listed(convo_store *s, const char *filter)
{
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = "t";
    o.filter_json = filter;
    convo_checkpoint_set *set = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_list(s, &o, &set, &err) == 0, "%s", err.message);
    size_t n = convo_checkpoint_set_count(set);
    convo_checkpoint_set_free(set);
    return n;
}

/* The stored metadata of checkpoint id, as hex. */
static char *stored_hex(PGconn *pg, const char *schema, const char *id)
{
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT encode(convert_to(metadata, 'UTF8'), 'hex')"
             " FROM \"%s\".checkpoints WHERE checkpoint_id = \"%s\".id_pack('%s')",
             schema, schema, id);
    return query1(pg, sql);
}

START_TEST(test_metadata_packed)
{
    const char *name = "meta1", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    put_meta(s, "c1", DELTA_META);
    put_meta(s, "c2", "{\"source\":\"input\",\"step\":-1,\"parents\":{}}");
    put_meta(s, "c3", ODD_META);
    PGconn *pg = admin();
    /* {, "source":"loop" (06), ",", "step": (0c), "3,", "parents":{} (04), ",",
     * "delta_writes_versioned":true (03), ",", the counters (01), "1,2]}}" */
    char *hex = stored_hex(pg, schema, "c1");
    ck_assert_str_eq(hex, "7b062c0c332c042c032c01312c325d7d7d");
    free(hex);
    hex = stored_hex(pg, schema, "c2");
    ck_assert_str_eq(hex, "7b072c0c2d312c047d");
    free(hex);
    meta_is(s, "c1", DELTA_META);
    meta_is(s, "c2", "{\"source\":\"input\",\"step\":-1,\"parents\":{}}");
    meta_is(s, "c3", ODD_META);
    ck_assert_uint_eq(listed(s, "{\"source\":\"loop\"}"), 1);
    ck_assert_uint_eq(listed(s, "{\"step\":-1}"), 1);
    ck_assert_uint_eq(listed(s, "{\"parents\":{}}"), 3);
    ck_assert_uint_eq(listed(s, "{\"counters_since_delta_snapshot\":{\"messages\":[2]}}"), 1);
    ck_assert_uint_eq(listed(s, "{\"source\":\"fork\",\"u\":\"\\u0001\"}"), 1);
    ck_assert_uint_eq(listed(s, "{\"source\":\"update\"}"), 0);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* A json value with raw control bytes (a tab and a newline between its tokens,
 * as json accepts them) is kept as it is behind 0x1f and read back as put (as
 * the json column of v23-v35 did); every fragment read back by meta_text(). */
START_TEST(test_control_bytes_kept)
{
    const char *name = "meta2", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    PGconn *pg = admin();
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM (SELECT \"%s\".checkpoint_put('t', '', 'c1', NULL,"
             " E'{\"source\":\"loop\",\\t\"step\":\\n1}', NULL, NULL, 0, NULL, NULL, NULL, NULL,"
             " now(), NULL)) x", schema);
    ck_assert_int_eq(query_long(pg, sql), 1);
    char *hex = stored_hex(pg, schema, "c1");
    ck_assert_str_eq(hex, "1f7b22736f75726365223a226c6f6f70222c0922737465702"
                          "23a0a317d");
    free(hex);
    snprintf(sql, sizeof sql,
             "SELECT \"%s\".meta_text(metadata) = E'{\"source\":\"loop\",\\t\"step\":\\n1}'"
             " FROM \"%s\".checkpoints", schema, schema);
    char *v = query1(pg, sql);
    ck_assert_str_eq(v, "t");
    free(v);
    meta_is(s, "c1", "{\"source\":\"loop\",\t\"step\":\n1}"); /* as put, as json kept it */
    ck_assert_uint_eq(listed(s, "{\"step\":1}"), 1);
    /* every fragment, and each packed byte, round trips */
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM (VALUES ('{\"counters_since_delta_snapshot\":{\"a\":1},"
             "\"parents\":{\"p\":\"\"},\"source\":\"update\",\"x\":[{\"source\":\"fork\"},"
             "{\"step\":2}]}')) v(j)"
             " WHERE \"%s\".meta_text(\"%s\".meta_pack(v.j::json)) = v.j"
             " AND octet_length(\"%s\".meta_pack(v.j::json)) = 37",
             schema, schema, schema);
    ck_assert_int_eq(query_long(pg, sql), 1);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

START_TEST(test_migration_from_version_35)
{
    const char *name = "meta3", *schema = schema_name(name);
    schema_at_version(name, 35);
    PGconn *pg = admin();
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM (SELECT \"%s\".checkpoint_put('t', '', 'c1', NULL,"
             " '" DELTA_META "', NULL, NULL, 0, NULL, NULL, NULL, NULL, now(), NULL)) x",
             schema);
    ck_assert_int_eq(query_long(pg, sql), 1);
    convo_store *s = open_ok(schema_url(name, NULL));
    snprintf(sql, sizeof sql, "SELECT string_agg(version::text, ',' ORDER BY version)"
             " FROM \"%s\".schema_version", schema);
    char *v = query1(pg, sql);
    ck_assert_str_eq(v, PG_SCHEMA_VERSIONS);
    free(v);
    snprintf(sql, sizeof sql, "SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a"
             " WHERE a.attrelid = '\"%s\".checkpoints'::regclass AND a.attname = 'metadata'",
             schema);
    v = query1(pg, sql);
    ck_assert_str_eq(v, "text");
    free(v);
    /* the row kept as its JSON text reads back and filters as before */
    meta_is(s, "c1", DELTA_META);
    ck_assert_uint_eq(listed(s, "{\"source\":\"loop\"}"), 1);
    put_meta(s, "c2", DELTA_META);
    ck_assert_uint_eq(listed(s, "{\"delta_writes_versioned\":true}"), 2);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

void postgres_add_meta_tests(Suite *s)
{
    TCase *tc = tcase_create("meta");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_metadata_packed);
    tcase_add_test(tc, test_control_bytes_kept);
    tcase_add_test(tc, test_migration_from_version_35);
    suite_add_tcase(s, tc);
}
