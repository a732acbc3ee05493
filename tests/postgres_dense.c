/* postgres_dense.c — checkpoints stored densely (schema versions 18, 19, 21):
 * ids, names and versions in their stored forms and back exactly as put (a
 * canonical UUID in 16 bytes, an upper-case one and a 16-byte text id as
 * text; LangGraph JS's versions packed; names once), and a version 17 schema
 * holding such ids and versions migrated with every row the same; the values'
 * key filling its pages. */
#include "postgres.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UUID_A "1f1e9eee-1758-6660-8003-f7e2ee72e981"
#define UUID_B "1F1E9EEE-1758-6660-8003-F7E2EE72E982" /* upper case: kept as text */
#define ID_16 "abcdefghijklmnop"                     /* 16 bytes, not a UUID */
#define TASK "6b0e2d6c-26f4-5a3e-9d3c-0c1b2a394857"
#define VER_JS "0000000000000599.k27lp6lcw6"
#define VER_PY "00000000000000000000000000000005.0.8372618274892734"

static void put(convo_store *s, const char *id, const char *parent, const char *version)
{
    convo_blob value = {"json", "null", 4}, body = {"json", "{\"v\":1}", 7};
    convo_channel_in ch[3] = {{"messages", version, &value},
                              {"branch:to:model", version, &value},
                              {"__convo_body__", UUID_A, NULL}};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = "t";
    cp.checkpoint_id = id;
    cp.parent_id = parent;
    cp.metadata_json = "{\"step\":1}";
    cp.body = body;
    cp.channels = ch;
    cp.nchannels = 3;
    convo_error err;
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put %s: %s", id, err.message);
    convo_blob w = {"json", "1", 1};
    convo_write_in write = {0, "messages", w};
    ck_assert_msg(convo_checkpoint_put_writes(s, "t", "", id, TASK, "~__pregel_pull, model",
                                              &write, 1, &err) == 0, "%s", err.message);
}

static void get_is(convo_store *s, const char *id, const char *parent, const char *version)
{
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_get(s, "t", "", id, &cp, &err) == 0, "get %s: %s", id,
                  err.message);
    ck_assert_str_eq(convo_checkpoint_id(cp), id);
    if (parent)
        ck_assert_str_eq(convo_checkpoint_parent_id(cp), parent);
    else
        ck_assert_ptr_null(convo_checkpoint_parent_id(cp));
    ck_assert_uint_eq(convo_checkpoint_channel_count(cp), 3);
    for (size_t i = 0; i < 3; i++) {
        const char *ver = NULL;
        convo_blob value;
        const char *ch = convo_checkpoint_channel(cp, i, &ver, &value);
        int body = strcmp(ch, "__convo_body__") == 0;
        ck_assert_msg(body || strcmp(ch, "messages") == 0 || strcmp(ch, "branch:to:model") == 0,
                      "channel %s", ch);
        ck_assert_str_eq(ver, body ? UUID_A : version);
        if (!body)
            ck_assert(value.type && strcmp(value.type, "json") == 0 && value.len == 4);
    }
    ck_assert_str_eq(convo_checkpoint_body(cp).type, "json");
    ck_assert_uint_eq(convo_checkpoint_write_count(cp), 1);
    const char *path = NULL, *channel = NULL;
    int64_t idx = -1;
    convo_blob value;
    ck_assert_str_eq(convo_checkpoint_write(cp, 0, &path, &idx, &channel, &value), TASK);
    ck_assert_str_eq(path, "~__pregel_pull, model");
    ck_assert_str_eq(channel, "messages");
    ck_assert(idx == 0 && strcmp(value.type, "json") == 0 && value.len == 1);
    convo_checkpoint_free(cp);
}

START_TEST(test_dense_forms)
{
    const char *name = "dense", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    put(s, UUID_A, NULL, VER_JS);
    put(s, UUID_B, UUID_A, VER_PY);
    put(s, ID_16, UUID_B, "v1");
    get_is(s, UUID_A, NULL, VER_JS);
    get_is(s, UUID_B, UUID_A, VER_PY);
    get_is(s, ID_16, UUID_B, "v1");
    convo_close(s);
    PGconn *pg = admin();
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT string_agg(octet_length(checkpoint_id)::text || '/' ||"
             " coalesce(octet_length(parent_id)::text, '-'), ' ' ORDER BY put_seq)"
             " FROM \"%s\".checkpoints", schema);
    char *v = query1(pg, sql);
    ck_assert_str_eq(v, "16/- 36/16 17/36"); /* a UUID, an upper-case one, 0 + 16 bytes */
    free(v);
    /* (v23) one bytea: the width of a length, the lengths, the versions (v37: form 2) */
    snprintf(sql, sizeof sql, "SELECT encode(substring(c.versions FOR 4), 'hex') || ' ' ||"
             " octet_length(c.versions) || ' ' || (SELECT string_agg(octet_length(u.ver)::text,"
             " ' ' ORDER BY o) FROM \"%s\".channel_list(c.channel_set, c.versions)"
             " WITH ORDINALITY AS u(ch, ver, o)) FROM \"%s\".checkpoints c"
             " WHERE c.checkpoint_id = '\\x1f1e9eee175866608003f7e2ee72e981'", schema, schema);
    v = query1(pg, sql);
    /* as put: JS twice, then the UUID; (v37) the second JS as "the one before" */
    ck_assert_str_eq(v, "0210ff11 37 16 16 17");
    free(v);
    /* the stored forms exactly (v22 computes them without a regular expression,
     * and must give the bytes versions 19-21 stored) */
    snprintf(sql, sizeof sql, "SELECT string_agg(encode(\"%s\".ver_pack(x), 'hex') || '/' ||"
             " encode(\"%s\".id_pack(x), 'hex'), ' ' ORDER BY o) FROM unnest(ARRAY['" VER_JS
             "', '" UUID_A "', '000000.', '12345.x', '', 'v1']) WITH ORDINALITY AS u(x, o)",
             schema, schema);
    v = query1(pg, sql);
    ck_assert_str_eq(v, "0110000002576b32376c70366c637736/"
                        "303030303030303030303030303539392e6b32376c70366c637736 "
                        "021f1e9eee175866608003f7e2ee72e981/1f1e9eee175866608003f7e2ee72e981 "
                        "010600000000/3030303030302e 31323334352e78/31323334352e78 00/ "
                        "7631/7631");
    free(v);
    snprintf(sql, sizeof sql, "SELECT string_agg(octet_length(w.task_id)::text, ' ')"
             " FROM \"%s\".checkpoints c, unnest(c.writes) AS e,"
             " \"%s\".write_fields(e) AS w", schema, schema);
    v = query1(pg, sql);
    ck_assert_str_eq(v, "16 16 16");
    free(v);
    snprintf(sql, sizeof sql, "SELECT string_agg(name, ',' ORDER BY name)"
             " FROM \"%s\".checkpoint_names", schema);
    v = query1(pg, sql);
    ck_assert_str_eq(v, "__convo_body__,branch:to:model,json,messages,~__pregel_pull, model");
    free(v);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM \"%s\".checkpoint_channel_sets", schema);
    ck_assert_int_eq(query_long(pg, sql), 1);
    PQfinish(pg);
    drop_schema(name);
}
END_TEST

/* What a version 17 schema held: the checkpoints above, written by its own
 * functions (a body as stored: 0, then the body). */
static const char v17_data[] =
    "SELECT @S.checkpoint_put('t', '', '" UUID_A "', NULL, '{\"step\":1}', 'json',"
    " '\\x007b2276223a317d', 0, ARRAY['messages', 'branch:to:model', '__convo_body__'],"
    " ARRAY['" VER_JS "', '" VER_JS "', '" UUID_A "'], ARRAY['json', 'json', NULL],"
    " ARRAY['\\x6e756c6c'::bytea, '\\x6e756c6c', NULL], now(), NULL);"
    "SELECT @S.checkpoint_put('t', '', '" UUID_B "', '" UUID_A "', '{\"step\":1}', 'json',"
    " '\\x007b2276223a317d', 0, ARRAY['messages', 'branch:to:model', '__convo_body__'],"
    " ARRAY['" VER_PY "', '" VER_PY "', '" UUID_A "'], ARRAY['json', 'json', NULL],"
    " ARRAY['\\x6e756c6c'::bytea, '\\x6e756c6c', NULL], now(), NULL);"
    "SELECT @S.checkpoint_put('t', '', '" ID_16 "', '" UUID_B "', '{\"step\":1}', 'json',"
    " '\\x007b2276223a317d', 0, ARRAY['messages', 'branch:to:model', '__convo_body__'],"
    " ARRAY['v1', 'v1', '" UUID_A "'], ARRAY['json', 'json', NULL],"
    " ARRAY['\\x6e756c6c'::bytea, '\\x6e756c6c', NULL], now(), NULL);"
    "SELECT @S.checkpoint_put_writes('t', '', x, '" TASK "', '~__pregel_pull, model',"
    " ARRAY[0::int8], ARRAY['messages'], ARRAY['json'], ARRAY['\\x31'::bytea], NULL)"
    " FROM unnest(ARRAY['" UUID_A "', '" UUID_B "', '" ID_16 "']) x";

/* A version 17 schema with UUID ids and JS and Python versions is migrated
 * on open (18, then 19): every row reads back the same, and through the
 * driver every checkpoint as put. */
START_TEST(test_migration_from_version_17)
{
    schema_at_version("d17", 17);
    PGconn *pg = admin();
    exec_in_schema(pg, schema_name("d17"), v17_data);
    char *before = rows_as_text(pg, "d17", 2);
    ck_assert_msg(strstr(before, UUID_B) != NULL, "v17 data: %s", before);
    convo_store *s = open_ok(schema_url("d17", NULL));
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT string_agg(version::text, ',' ORDER BY version)"
             " FROM \"%s\".schema_version", schema_name("d17"));
    char *v = query1(pg, sql);
    ck_assert_str_eq(v, PG_SCHEMA_VERSIONS);
    free(v);
    char *after = rows_as_text(pg, "d17", 5);
    ck_assert_str_eq(after, before);
    free(before);
    free(after);
    get_is(s, UUID_A, NULL, VER_JS);
    get_is(s, UUID_B, UUID_A, VER_PY);
    get_is(s, ID_16, UUID_B, "v1");
    /* and it takes new checkpoints of the same shape */
    put(s, "1f1e9eee-1758-6660-8003-f7e2ee72e983", ID_16, VER_JS);
    get_is(s, "1f1e9eee-1758-6660-8003-f7e2ee72e983", ID_16, VER_JS);
    convo_close(s);
    PQfinish(pg);
    drop_schema("d17");
}
END_TEST

/* (v21) The values' key in the order they arrive: a thread's versions grow
 * with its puts, so each new entry goes at the right end of the thread's range
 * (pages split 90/10). 400 checkpoints of 3 new values each: 1,200 entries in
 * 10 pages; by channel first (v19) each channel's range grew inside the index
 * and split in half: 13 (both measured, PostgreSQL 15). */
START_TEST(test_values_key_fills_its_pages)
{
    const char *name = "vkey", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    static char big[1025]; /* (v31) over 1,024 bytes: a row of checkpoint_blobs */
    memset(big, ' ', sizeof big);
    convo_blob value = {"json", big, sizeof big};
    for (int i = 1; i <= 400; i++) {
        char id[64], version[32];
        snprintf(id, sizeof id, "1f1e9eee-1758-6660-8003-%012d", i);
        snprintf(version, sizeof version, "%016d.k27lp6lcw6", i);
        convo_channel_in ch[3] = {{"__start__", version, &value},
                                  {"branch:to:model", version, &value},
                                  {"messages", version, &value}};
        convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
        cp.thread_id = "t";
        cp.checkpoint_id = id;
        cp.channels = ch;
        cp.nchannels = 3;
        convo_error err;
        ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put: %s", err.message);
    }
    convo_close(s);
    PGconn *pg = admin();
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT indexdef FROM pg_indexes WHERE schemaname = '%s'"
             " AND indexname = 'checkpoint_blobs_pkey'", schema);
    char *v = query1(pg, sql);
    ck_assert_ptr_nonnull(strstr(v, "(tid, version, checkpoint_ns, channel)"));
    free(v);
    snprintf(sql, sizeof sql, "SELECT count(*) * 1000 + pg_relation_size("
             "'\"%s\".checkpoint_blobs_pkey') / 8192 FROM \"%s\".checkpoint_blobs",
             schema, schema);
    long rows_pages = query_long(pg, sql);
    ck_assert_int_eq(rows_pages / 1000, 1200);
    ck_assert_msg(rows_pages % 1000 <= 11, "%ld pages for 1,200 entries", rows_pages % 1000);
    PQfinish(pg);
    drop_schema(name);
}
END_TEST

void postgres_add_dense_tests(Suite *s)
{
    TCase *tc = tcase_create("dense");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_dense_forms);
    tcase_add_test(tc, test_migration_from_version_17);
    tcase_add_test(tc, test_values_key_fills_its_pages);
    suite_add_tcase(s, tc);
}
