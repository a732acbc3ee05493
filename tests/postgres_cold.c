/* postgres_cold.c — the readings of a row's packed versions and vals:
 * channel_vals_proc() (schema version 41, PL/pgSQL) and, since the driver
 * reads rows raw, the driver's C decoder (drivers/postgres/unpack.c): the same
 * channels as channel_vals() for every form a row is stored in, corrupt bytes
 * refused by all three (SQLSTATE 2202E; the driver's CONVO_ECORRUPT on get,
 * latest and list), and a store of version 40 migrated. */
#include "postgres.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UUID_A "1f1e9eee-1758-6660-8003-f7e2ee72e9c1"

/* A put of thread t by the schema's own function: channels, versions, types
 * and values as SQL array literals. */
static void put_sql(PGconn *pg, const char *schema, const char *id, const char *channels,
                    const char *versions, const char *types, const char *values)
{
    char sql[2048];
    snprintf(sql, sizeof sql,
             "SELECT @S.checkpoint_put('t', '', '%s', NULL, '{}', NULL, NULL, 0, %s, %s, %s, %s,"
             " now(), NULL)",
             id, channels, versions, types, values);
    exec_in_schema(pg, schema, sql);
}

/* How many stored checkpoints channel_vals() and channel_vals_proc() read
 * differently (rows, in order, as text). */
static char *differing(PGconn *pg, const char *schema)
{
    char sql[640];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FILTER (WHERE"
             " ARRAY(SELECT u::text FROM \"%s\".channel_vals(k.channel_set, k.versions, k.vals) u)"
             " IS DISTINCT FROM"
             " ARRAY(SELECT u::text FROM \"%s\".channel_vals_proc(k.channel_set, k.versions,"
             " k.vals) u)) || '/' || count(*) FROM \"%s\".checkpoints k",
             schema, schema, schema);
    return query1(pg, sql);
}

/* The channels of checkpoint `id` as channel_vals() and the blobs read them
 * (what checkpoint_get.sql selected before the driver decoded rows itself),
 * one "name=version:type:hex" each, in name order. */
static char *sql_channels(PGconn *pg, const char *schema, const char *id)
{
    char sql[1536];
    snprintf(sql, sizeof sql,
             "SELECT coalesce(string_agg(n.name || '=' || \"%s\".ver_text(u.ver) || ':' ||"
             " coalesce(y.name, '') || ':' || coalesce(encode(CASE WHEN u.type IS NULL"
             " THEN v.value ELSE u.value END, 'hex'), ''), ';' ORDER BY n.name COLLATE \"C\"), '')"
             " FROM \"%s\".checkpoints k"
             " CROSS JOIN LATERAL \"%s\".channel_vals(k.channel_set, k.versions, k.vals) u"
             " JOIN \"%s\".checkpoint_names n ON n.num = u.ch"
             " LEFT JOIN \"%s\".checkpoint_blobs v ON u.type IS NULL AND v.tid = k.tid"
             " AND v.checkpoint_ns = k.checkpoint_ns AND v.channel = u.ch AND v.version = u.ver"
             " LEFT JOIN \"%s\".checkpoint_names y ON y.num = coalesce(u.type, v.type)"
             " WHERE k.checkpoint_id = \"%s\".id_pack('%s')",
             schema, schema, schema, schema, schema, schema, schema, id);
    return query1(pg, sql);
}

/* The same from the driver's checkpoint. */
static char *driver_channels(const convo_checkpoint *cp)
{
    size_t cap = 64;
    for (size_t i = 0; i < convo_checkpoint_channel_count(cp); i++) {
        const char *ver;
        convo_blob v;
        cap += strlen(convo_checkpoint_channel(cp, i, &ver, &v)) + strlen(ver) + 2 * v.len +
               (v.type ? strlen(v.type) : 0) + 8;
    }
    char *out = malloc(cap);
    size_t o = 0;
    out[0] = '\0';
    for (size_t i = 0; i < convo_checkpoint_channel_count(cp); i++) {
        const char *ver;
        convo_blob v;
        const char *name = convo_checkpoint_channel(cp, i, &ver, &v);
        o += (size_t)sprintf(out + o, "%s%s=%s:%s:", i ? ";" : "", name, ver,
                             v.type ? v.type : "");
        for (size_t k = 0; v.type && k < v.len; k++)
            o += (size_t)sprintf(out + o, "%02x", ((const unsigned char *)v.bytes)[k]);
    }
    return out;
}

/* The driver's get of thread t's checkpoint id reads what channel_vals() reads. */
static void driver_reads_alike(convo_store *s, PGconn *pg, const char *schema, const char *id)
{
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_get(s, "t", "", id, &cp, &err) == 0, "%s", err.message);
    char *want = sql_channels(pg, schema, id), *got = driver_channels(cp);
    ck_assert_msg(strcmp(want, got) == 0, "%s: SQL %s, driver %s", id, want, got);
    free(want);
    free(got);
    convo_checkpoint_free(cp);
}

/* Rows as puts store them: versions of form 1 (lengths in a byte), 2 (a
 * version equal to the one before it marked 255) and 4 (a version over 255
 * bytes); vals of form 2 with values inline (of 300 bytes too) and a channel
 * without a value. Both functions give the same rows for each, and the forms
 * were there to read. */
START_TEST(test_proc_reads_what_channel_vals_reads)
{
    const char *name = "cold1", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    PGconn *pg = admin();
    const char *ids[] = {"1f1e9eee-1758-6660-8003-f7e2ee72e9c1",
                         "1f1e9eee-1758-6660-8003-f7e2ee72e9c2",
                         "1f1e9eee-1758-6660-8003-f7e2ee72e9c3",
                         "1f1e9eee-1758-6660-8003-f7e2ee72e9c4"};
    put_sql(pg, schema, ids[0], "ARRAY['a','b','c']", "ARRAY['1','2','3']",
            "ARRAY['json','bytes',NULL]", "ARRAY['\\x31'::bytea,'\\x7979',NULL]");
    put_sql(pg, schema, ids[1], "ARRAY['a','b','c']", "ARRAY['7','7','7']",
            "ARRAY['json','json','json']", "ARRAY['\\x31'::bytea,'\\x32','\\x33']");
    put_sql(pg, schema, ids[2], "ARRAY['a','b']", "ARRAY[repeat('v', 300),'2']",
            "ARRAY['json','json']", "ARRAY[convert_to(repeat('x', 300), 'UTF8'),'\\x32']");
    put_sql(pg, schema, ids[3], "ARRAY['a','b','c','d']", "ARRAY['4','4','5','5']",
            "ARRAY['json','json','json','json']",
            "ARRAY[convert_to(repeat('y', 200), 'UTF8'),convert_to(repeat('z', 200), 'UTF8'),"
            "'\\x33','\\x34']");
    char sql[256];
    snprintf(sql, sizeof sql,
             "SELECT string_agg(DISTINCT get_byte(versions, 0)::text, ',') || ';' ||"
             " string_agg(DISTINCT get_byte(vals, 0)::text, ',') FROM \"%s\".checkpoints",
             schema);
    char *forms = query1(pg, sql);
    /* versions of forms 1, 2 and 4; vals of form 2 (form 1: the next test) */
    ck_assert_msg(strcmp(forms, "1,2,4;2") == 0, "forms %s", forms);
    free(forms);
    char *d = differing(pg, schema);
    ck_assert_str_eq(d, "0/4");
    free(d);
    for (int i = 0; i < 4; i++)
        driver_reads_alike(s, pg, schema, ids[i]);
    /* and what the driver reads back through it */
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_get(s, "t", "", ids[2], &cp, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(convo_checkpoint_channel_count(cp), 2);
    convo_checkpoint_free(cp);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* One function's reading of the stored row's (set, versions, vals), from the
 * row as the statements read it (given as constants, channel_vals()'s inlined
 * expressions are folded at planning, the branches not taken too): its rows as
 * text (every column: the checks ride on them), or "error " and the SQLSTATE. */
static char *state_of(PGconn *pg, const char *schema, const char *fn)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT 'rows ' || coalesce(string_agg(u::text, ';'), '') FROM \"%s\".checkpoints k,"
             " \"%s\".%s(k.channel_set, k.versions, k.vals) u",
             schema, schema, fn);
    PGresult *r = PQexec(pg, sql);
    char st[1024];
    if (PQresultStatus(r) == PGRES_TUPLES_OK)
        snprintf(st, sizeof st, "%s", PQgetvalue(r, 0, 0));
    else
        snprintf(st, sizeof st, "error %s", PQresultErrorField(r, PG_DIAG_SQLSTATE));
    char *out = strdup(st);
    PQclear(r);
    return out;
}

/* The driver's get, latest and list of the row: CONVO_ECORRUPT when corrupt,
 * else the channels channel_vals() reads. */
static void driver_on_case(convo_store *s, PGconn *pg, const char *schema, size_t i,
                           int corrupt)
{
    convo_checkpoint *cp = NULL;
    convo_checkpoint_set *set = NULL;
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = "t";
    convo_error err;
    if (!corrupt) {
        driver_reads_alike(s, pg, schema, UUID_A);
        return;
    }
    int rc = convo_checkpoint_get(s, "t", "", UUID_A, &cp, &err);
    ck_assert_msg(rc == CONVO_ECORRUPT, "case %zu: get %d %s", i, rc, err.message);
    ck_assert_msg(strstr(err.message, "corrupt") != NULL, "case %zu: %s", i, err.message);
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", NULL, &cp, NULL), CONVO_ECORRUPT);
    ck_assert_int_eq(convo_checkpoint_list(s, &o, &set, NULL), CONVO_ECORRUPT);
    o.only_channel = "b";
    ck_assert_int_eq(convo_checkpoint_list(s, &o, &set, NULL), CONVO_ECORRUPT);
    ck_assert_ptr_null(cp);
    ck_assert_ptr_null(set);
}

/* Good bytes of each form read the same rows in both functions and the driver
 * (vals of form 1 too, which puts no longer write); corrupt ones raise in both
 * with the same SQLSTATE (2202E) and are CONVO_ECORRUPT in the driver. */
START_TEST(test_corrupt_bytes_raise_alike)
{
    const char *name = "cold2", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    PGconn *pg = admin();
    put_sql(pg, schema, UUID_A, "ARRAY['a','b','c']", "ARRAY['1','22','1']",
            "ARRAY['json','bytes',NULL]", "ARRAY['\\x31'::bytea,'\\x7979',NULL]");
    /* (versions, vals): good ones, then lengths short or long, a byte more, an
     * unknown width, a first channel marked 255, empty, a negative type, a
     * length on a channel without a value, a type with no room */
    const char *cases[][2] = {
        {"'\\x0101020131323231'", "'\\x000000010000000200000000010200317979'"},
        {"'\\x0101020131323231'", "NULL"},
        {"'\\x0101020131323231'", "'\\x02000000010000000200000000000100020000317979'"},
        {"'\\x01010201313232'", "NULL"},
        {"'\\x010102013132323131'", "NULL"},
        {"'\\x0301020131323231'", "NULL"},
        {"'\\x02ff020131323231'", "NULL"},
        {"'\\x02010201313232'", "NULL"},
        {"'\\x'", "NULL"},
        {"'\\x04000000010000000200000001313232'", "NULL"},
        {"'\\x0101020131323231'", "'\\x00000001000000020000000001020031797900'"},
        {"'\\x0101020131323231'", "'\\x0000000100000002000000000102003179'"},
        {"'\\x0101020131323231'", "'\\x800000010000000200000000010200317979'"},
        {"'\\x0101020131323231'", "'\\x000000010000000200000000010201317979'"},
        {"'\\x0101020131323231'", "'\\x0000000100'"},
        {"'\\x0101020131323231'", "'\\x'"},
    };
    int raised = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char sql[256];
        snprintf(sql, sizeof sql, "UPDATE @S.checkpoints SET versions = %s::bytea, vals = %s::bytea",
                 cases[i][0], cases[i][1]);
        exec_in_schema(pg, schema, sql);
        char *a = state_of(pg, schema, "channel_vals");
        char *b = state_of(pg, schema, "channel_vals_proc");
        ck_assert_msg(strcmp(a, b) == 0, "case %zu (%s, %s): channel_vals %s, proc %s", i,
                      cases[i][0], cases[i][1], a, b);
        if (i < 3)
            ck_assert_msg(strncmp(a, "rows (", 6) == 0, "case %zu: %s", i, a);
        raised += strncmp(a, "error 2202E", 11) == 0;
        driver_on_case(s, pg, schema, i, strncmp(a, "error", 5) == 0);
        free(a);
        free(b);
    }
    ck_assert_int_eq(raised, 13); /* the 13 corrupt cases raise */
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* A version 40 schema with a checkpoint: migrated, the function made, the
 * checkpoint read back by get and latest. */
START_TEST(test_migration_from_version_40)
{
    const char *name = "cold3", *schema = schema_name(name);
    schema_at_version(name, 40);
    PGconn *pg = admin();
    put_sql(pg, schema, UUID_A, "ARRAY['messages']", "ARRAY['1']", "ARRAY['json']",
            "ARRAY['\\x31'::bytea]");
    convo_store *s = open_ok(schema_url(name, NULL));
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT string_agg(version::text, ',' ORDER BY version)"
             " FROM \"%s\".schema_version", schema);
    char *v = query1(pg, sql);
    ck_assert_str_eq(v, PG_SCHEMA_VERSIONS);
    free(v);
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_get(s, "t", "", UUID_A, &cp, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(convo_checkpoint_channel_count(cp), 1);
    convo_checkpoint_free(cp);
    ck_assert_msg(convo_checkpoint_get(s, "t", "", NULL, &cp, &err) == 0, "%s", err.message);
    convo_checkpoint_free(cp);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

void postgres_add_cold_tests(Suite *s)
{
    TCase *tc = tcase_create("cold");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_proc_reads_what_channel_vals_reads);
    tcase_add_test(tc, test_corrupt_bytes_raise_alike);
    tcase_add_test(tc, test_migration_from_version_40);
    suite_add_tcase(s, tc);
}
