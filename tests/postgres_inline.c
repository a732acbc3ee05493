/* postgres_inline.c — small channel values in the checkpoint's row (schema
 * version 29): values of at most 255 bytes read back from the row, larger ones
 * from checkpoint_blobs, a value the put does not bring copied from its parent
 * (or found in another checkpoint of the thread), every remaining checkpoint
 * readable after delete and prune, a swap applied to the row it names and to
 * the row being put, a corrupt vals value CONVO_ECORRUPT, and a version 28
 * schema migrated with its values still read from checkpoint_blobs. */
#include "postgres.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UUID_A "1f1e9eee-1758-6660-8003-f7e2ee72e9a1"
#define UUID_B "1f1e9eee-1758-6660-8003-f7e2ee72e9a2"
#define UUID_C "1f1e9eee-1758-6660-8003-f7e2ee72e9a3"
#define UUID_D "1f1e9eee-1758-6660-8003-f7e2ee72e9a4"
#define UUID_E "1f1e9eee-1758-6660-8003-f7e2ee72e9a5"

static char big[301]; /* a value over 255 bytes (v29: in checkpoint_blobs) */
static int big_expected = 1; /* whether values_are() wants c to be big */

/* A checkpoint of thread "t" with channels a (version va, value xa or none),
 * b (vb, xb) and c (version "c1", the big value or none). */
static void put_abc(convo_store *s, const char *id, const char *parent, const char *va,
                    const char *xa, const char *vb, const char *xb, int with_big)
{
    convo_blob a = {"json", xa, xa ? strlen(xa) : 0}, b = {"bytes", xb, xb ? strlen(xb) : 0};
    convo_blob c = {"json", big, sizeof big - 1};
    convo_channel_in ch[3] = {{"a", va, xa ? &a : NULL},
                              {"b", vb, xb ? &b : NULL},
                              {"c", "c1", with_big ? &c : NULL}};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = "t";
    cp.checkpoint_id = id;
    cp.parent_id = parent;
    cp.metadata_json = "{}";
    cp.channels = ch;
    cp.nchannels = 3;
    convo_error err;
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put %s: %s", id, err.message);
}

/* Checkpoint id reads back with a = xa, b = xb (NULL: no value) and c the big
 * value. */
static void values_are(convo_store *s, const char *id, const char *xa, const char *xb)
{
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_get(s, "t", "", id, &cp, &err) == 0, "get %s: %s", id,
                  err.message);
    ck_assert_uint_eq(convo_checkpoint_channel_count(cp), 3);
    for (size_t i = 0; i < 3; i++) {
        const char *ver = NULL;
        convo_blob v;
        const char *ch = convo_checkpoint_channel(cp, i, &ver, &v);
        const char *want = strcmp(ch, "a") == 0   ? xa
                           : strcmp(ch, "b") == 0 ? xb
                           : big_expected         ? big
                                                  : NULL;
        if (!want) {
            ck_assert_msg(v.type == NULL, "%s %s: a value", id, ch);
            continue;
        }
        ck_assert_msg(v.type != NULL, "%s %s: no value", id, ch);
        ck_assert_str_eq(v.type, strcmp(ch, "b") == 0 ? "bytes" : "json");
        ck_assert_msg(v.len == strlen(want) && memcmp(v.bytes, want, v.len) == 0,
                      "%s %s: %.*s", id, ch, (int)v.len, (const char *)v.bytes);
    }
    convo_checkpoint_free(cp);
}

static long count_in(PGconn *pg, const char *schema, const char *what)
{
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT %s", what);
    for (char *p = strstr(sql, "@S"); p; p = strstr(p, "@S")) {
        char rest[512];
        snprintf(rest, sizeof rest, "\"%s\"%s", schema, p + 2);
        snprintf(p, sizeof sql - (size_t)(p - sql), "%s", rest);
    }
    return query_long(pg, sql);
}

/* Small values in the row, the big one once in checkpoint_blobs; a child
 * that brings no value for a and c reads them (a copied from its parent's
 * row); deleting and pruning the checkpoints that first had them leaves the
 * rest readable. */
START_TEST(test_small_values_in_the_row)
{
    const char *name = "inl", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    put_abc(s, UUID_A, NULL, "1", "\"x\"", "1", "", 1); /* b: an empty value */
    put_abc(s, UUID_B, UUID_A, "1", NULL, "2", "yy", 0);
    put_abc(s, UUID_C, UUID_B, "1", NULL, "2", NULL, 0);
    values_are(s, UUID_A, "\"x\"", "");
    values_are(s, UUID_B, "\"x\"", "yy");
    values_are(s, UUID_C, "\"x\"", "yy");
    PGconn *pg = admin();
    ck_assert_int_eq(count_in(pg, schema, "count(*) FROM @S.checkpoint_blobs"), 1);
    ck_assert_int_eq(count_in(pg, schema, "count(*) FROM @S.checkpoints WHERE vals IS NULL"), 0);
    /* C's row: (v31) its form, 3 types, 3 lengths, "x" quoted and "yy" */
    ck_assert_int_eq(count_in(pg, schema, "octet_length(vals) FROM @S.checkpoints c"
                              " ORDER BY put_seq DESC LIMIT 1"), 1 + 12 + 6 + 3 + 2);
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = "t";
    o.before = UUID_B; /* A and B go; C stays readable */
    uint64_t removed = 0;
    convo_error err;
    ck_assert_msg(convo_checkpoint_delete(s, &o, &removed, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(removed, 1);
    o.before = UUID_C;
    ck_assert_msg(convo_checkpoint_delete(s, &o, &removed, &err) == 0, "%s", err.message);
    values_are(s, UUID_C, "\"x\"", "yy");
    put_abc(s, UUID_D, UUID_C, "2", "7", "2", NULL, 0);
    ck_assert_int_eq(convo_checkpoint_prune(s, "t", 1, &err), 0);
    values_are(s, UUID_D, "7", "yy");
    ck_assert_int_eq(count_in(pg, schema, "count(*) FROM @S.checkpoint_blobs"), 1);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* (v32) A version the put's parent does not list is found in
 * checkpoint_blobs (a value over 255 bytes another checkpoint copied there);
 * (v34) also in a row put after the parent, or in any row of the namespace
 * when there is no parent: B, a second root, finds c1's value in A's row (and,
 * over 255 bytes, shares it through checkpoint_blobs), so C, B's child, reads
 * it. A version held only by a row put before the parent that is not the
 * parent (A's a = "1" for C) still reads as no value (docs/postgres.md, schema
 * 34); a version nobody stored reads as no value. */
START_TEST(test_value_from_the_parent_or_blobs)
{
    const char *name = "inlo";
    convo_store *s = open_ok(schema_url(name, NULL));
    put_abc(s, UUID_A, NULL, "1", "\"x\"", "1", "b1", 1);
    put_abc(s, UUID_B, NULL, "2", "\"y\"", "2", "b2", 0);
    put_abc(s, UUID_C, UUID_B, "1", NULL, "9", NULL, 0);
    values_are(s, UUID_A, "\"x\"", "b1"); /* A keeps its own */
    values_are(s, UUID_C, NULL, NULL);
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = "t";
    o.before = UUID_B;
    uint64_t removed = 0;
    convo_error err;
    ck_assert_int_eq(convo_checkpoint_delete(s, &o, &removed, &err), 0);
    ck_assert_uint_eq(removed, 1);
    values_are(s, UUID_C, NULL, NULL);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* A swap of a channel value (checkpoint_put_refs) changes it in the row it
 * names and in the row being put, which copied the old value from that row,
 * and raises both rows' log_length. */
START_TEST(test_swap_reaches_the_copy)
{
    const char *name = "inls", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    put_abc(s, UUID_A, NULL, "1", "\"old\"", "1", "b", 1);
    PGconn *pg = admin();
    exec_in_schema(pg, schema,
                   "SELECT @S.checkpoint_put_refs('t', '', '" UUID_B "', '" UUID_A "', '{}',"
                   " NULL, NULL, 1, ARRAY['a', 'b', 'c'], ARRAY['1', '1', 'c1'],"
                   " ARRAY[NULL, NULL, NULL]::text[], ARRAY[NULL, NULL, NULL]::bytea[],"
                   " ARRAY['\\x6d'::bytea], ARRAY['user'], -1, -1, now(), NULL,"
                   " ARRAY['" UUID_A "'], ARRAY[NULL]::text[], ARRAY[0::int8], ARRAY['a'],"
                   " ARRAY['1'], ARRAY['json'], ARRAY['\\x226f6c6422'::bytea],"
                   " ARRAY['ref'], ARRAY['\\x2a'::bytea], ARRAY[1::int8])");
    for (int i = 0; i < 2; i++) {
        convo_checkpoint *cp = NULL;
        convo_error err;
        const char *id = i ? UUID_B : UUID_A;
        ck_assert_msg(convo_checkpoint_get(s, "t", "", id, &cp, &err) == 0, "%s", err.message);
        ck_assert_int_eq(convo_checkpoint_log_length(cp), 1);
        int seen = 0;
        for (size_t k = 0; k < convo_checkpoint_channel_count(cp); k++) {
            convo_blob v;
            if (strcmp(convo_checkpoint_channel(cp, k, NULL, &v), "a") != 0)
                continue;
            ck_assert_str_eq(v.type, "ref");
            ck_assert_uint_eq(v.len, 1);
            ck_assert_int_eq(((const char *)v.bytes)[0], '*');
            seen = 1;
        }
        ck_assert(seen);
        convo_checkpoint_free(cp);
    }
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* A vals value that does not fill itself exactly (a length one off, a byte
 * more or less, a length on a channel without a value, a negative type) is
 * CONVO_ECORRUPT on
 * get, latest and list. */
START_TEST(test_corrupt_vals_are_ecorrupt)
{
    const char *name = "inlc", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    put_abc(s, UUID_A, NULL, "1", "\"x\"", "1", "yy", 0);
    PGconn *pg = admin();
    /* good: types (json, bytes, 0), lengths 3, 2, 0, then "x" quoted and yy */
    const char *bad[] = {"'\\x'", "substring(vals FROM 1 FOR octet_length(vals) - 1)",
                         "vals || '\\x00'::bytea",
                         "overlay(vals PLACING '\\x0002'::bytea FROM 14 FOR 2)",
                         "overlay(vals PLACING '\\x0001'::bytea FROM 18 FOR 2)",
                         "overlay(vals PLACING '\\x80'::bytea FROM 1 FOR 1)"};
    char sql[320];
    snprintf(sql, sizeof sql, "SELECT encode(vals, 'hex') FROM \"%s\".checkpoints", schema);
    char *good = query1(pg, sql);
    ck_assert_uint_eq(strlen(good), 2 * (1 + 12 + 6 + 5));
    ck_assert_int_eq(strncmp(good, "02", 2), 0); /* (v31) its form */
    ck_assert_str_eq(good + 18, "00000000" "000300020000" "227822" "7979");
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(sql, sizeof sql, "UPDATE @S.checkpoints SET vals = '\\x%s'", good);
        exec_in_schema(pg, schema, sql); /* good again */
        snprintf(sql, sizeof sql, "UPDATE @S.checkpoints SET vals = %s", bad[i]);
        exec_in_schema(pg, schema, sql);
        convo_checkpoint *cp = NULL;
        convo_error err;
        int rc = convo_checkpoint_get(s, "t", "", UUID_A, &cp, &err);
        ck_assert_msg(rc == CONVO_ECORRUPT, "get with vals %s: %d %s", bad[i], rc, err.message);
        rc = convo_checkpoint_get(s, "t", "", NULL, &cp, &err);
        ck_assert_msg(rc == CONVO_ECORRUPT, "latest with vals %s: %d", bad[i], rc);
        convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
        o.thread_id = "t";
        convo_checkpoint_set *set = NULL;
        rc = convo_checkpoint_list(s, &o, &set, &err);
        ck_assert_msg(rc == CONVO_ECORRUPT, "list with vals %s: %d", bad[i], rc);
        /* one channel's listing (checkpoint_list_channel.sql) checks the row */
        for (char c = 'a'; c <= 'c'; c++) {
            const char only[2] = {c, 0};
            o.only_channel = only;
            rc = convo_checkpoint_list(s, &o, &set, &err);
            ck_assert_msg(rc == CONVO_ECORRUPT, "list of %s with vals %s: %d", only, bad[i], rc);
        }
    }
    /* good again: each channel's listing reads its value */
    snprintf(sql, sizeof sql, "UPDATE @S.checkpoints SET vals = '\\x%s'", good);
    exec_in_schema(pg, schema, sql);
    const char *want[3] = {"\"x\"", "yy", NULL};
    for (int k = 0; k < 3; k++) {
        const char only[2] = {(char)('a' + k), 0};
        convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
        o.thread_id = "t";
        o.only_channel = only;
        convo_checkpoint_set *set = NULL;
        convo_error err;
        ck_assert_msg(convo_checkpoint_list(s, &o, &set, &err) == 0, "%s", err.message);
        const convo_checkpoint *cp = convo_checkpoint_set_get(set, 0);
        ck_assert_uint_eq(convo_checkpoint_channel_count(cp), 1);
        const char *ver;
        convo_blob v;
        ck_assert_str_eq(convo_checkpoint_channel(cp, 0, &ver, &v), only);
        if (want[k])
            ck_assert_msg(v.type && v.len == strlen(want[k]) &&
                          memcmp(v.bytes, want[k], v.len) == 0, "%s: %.*s", only,
                          (int)v.len, (const char *)v.bytes);
        else
            ck_assert_ptr_null(v.type);
        convo_checkpoint_set_free(set);
    }
    free(good);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* A version 28 schema (every value in checkpoint_blobs) is migrated on open:
 * its checkpoints read the same, a child put after it reads the values its
 * parent keeps in checkpoint_blobs, and a new value goes in the row. */
START_TEST(test_migration_from_version_28)
{
    schema_at_version("d28", 28);
    PGconn *pg = admin();
    const char *schema = schema_name("d28");
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT @S.checkpoint_put('t', '', '" UUID_A "', NULL, '{}', NULL, NULL, 0,"
             " ARRAY['a', 'b', 'c'], ARRAY['1', '1', 'c1'], ARRAY['json', 'bytes', 'json'],"
             " ARRAY['\\x227822'::bytea, '\\x7979', '\\x%s'], now(), NULL)",
             "7a7a7a");
    exec_in_schema(pg, schema, sql);
    convo_store *s = open_ok(schema_url("d28", NULL));
    char *v = query1(pg, "SELECT 1"); /* the connection works after the migration */
    free(v);
    snprintf(sql, sizeof sql, "SELECT string_agg(version::text, ',' ORDER BY version)"
             " FROM \"%s\".schema_version", schema);
    v = query1(pg, sql);
    ck_assert_str_eq(v, PG_SCHEMA_VERSIONS);
    free(v);
    ck_assert_int_eq(count_in(pg, schema, "count(*) FROM @S.checkpoints WHERE vals IS NULL"), 1);
    ck_assert_int_eq(count_in(pg, schema, "count(*) FROM @S.checkpoint_blobs"), 3);
    memcpy(big, "zzz", 4); /* the v28 row's c value */
    values_are(s, UUID_A, "\"x\"", "yy");
    put_abc(s, UUID_B, UUID_A, "1", NULL, "2", "new", 0);
    values_are(s, UUID_B, "\"x\"", "new");
    ck_assert_int_eq(count_in(pg, schema, "count(*) FROM @S.checkpoint_blobs"), 3);
    memset(big, 'v', sizeof big - 1);
    PQfinish(pg);
    convo_close(s);
    drop_schema("d28");
}
END_TEST

/* (v31) A value the put brings stays in its row up to 1,024 bytes: an input
 * of 300 bytes swapped for a reference by the child's put (the swap before
 * the put) leaves nothing in checkpoint_blobs, and the child copies the
 * reference; a copy over 255 bytes goes to checkpoint_blobs once, and the
 * rows after read it there. */
START_TEST(test_input_inline_until_swapped)
{
    const char *name = "inli", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    char input[301];
    memset(input, 'i', sizeof input - 1);
    input[300] = '\0';
    put_abc(s, UUID_A, NULL, "1", input, "1", "b", 1);
    PGconn *pg = admin();
    ck_assert_int_eq(count_in(pg, schema, "count(*) FROM @S.checkpoint_blobs"), 0);
    values_are(s, UUID_A, input, "b");
    char sql[2048];
    snprintf(sql, sizeof sql,
             "SELECT @S.checkpoint_put_refs('t', '', '" UUID_B "', '" UUID_A "', '{}',"
             " NULL, NULL, 1, ARRAY['a', 'b'], ARRAY['1', '1'], ARRAY[NULL, NULL]::text[],"
             " ARRAY[NULL, NULL]::bytea[], ARRAY['\\x6d'::bytea], ARRAY['user'], -1, -1,"
             " now(), NULL, ARRAY['" UUID_A "'], ARRAY[NULL]::text[], ARRAY[0::int8],"
             " ARRAY['a'], ARRAY['1'], ARRAY['json'], ARRAY[convert_to('%s', 'UTF8')],"
             " ARRAY['ref'], ARRAY['\\x2a'::bytea], ARRAY[1::int8])", input);
    exec_in_schema(pg, schema, sql);
    ck_assert_int_eq(count_in(pg, schema, "count(*) FROM @S.checkpoint_blobs"), 0);
    for (int i = 0; i < 2; i++) {
        convo_checkpoint *cp = NULL;
        convo_error err;
        ck_assert_int_eq(convo_checkpoint_get(s, "t", "", i ? UUID_B : UUID_A, &cp, &err), 0);
        convo_blob v;
        ck_assert_str_eq(convo_checkpoint_channel(cp, 0, NULL, &v), "a");
        ck_assert_str_eq(v.type, "ref");
        ck_assert_uint_eq(v.len, 1);
        convo_checkpoint_free(cp);
    }
    /* D copies its parent C's two values of 300 bytes: into the blobs */
    put_abc(s, UUID_C, NULL, "2", input, "2", "b", 1);
    ck_assert_int_eq(count_in(pg, schema, "count(*) FROM @S.checkpoint_blobs"), 0);
    put_abc(s, UUID_D, UUID_C, "2", NULL, "2", NULL, 0);
    ck_assert_int_eq(count_in(pg, schema, "count(*) FROM @S.checkpoint_blobs"), 2);
    values_are(s, UUID_C, input, "b");
    values_are(s, UUID_D, input, "b");
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* (v34) A checkpoint put again as LangGraph's updateState(..., '__copy__')
 * puts it: the saved one's versions without values, the saved one's parent
 * as parent. The values its sibling holds in its row read back (schemas
 * 29-33 gave none: they looked beyond the parent in checkpoint_blobs only);
 * so do those of a copy without a parent; a version no checkpoint stored a
 * value for stays without one. */
START_TEST(test_copy_finds_the_siblings_value)
{
    const char *name = "inlcopy";
    convo_store *s = open_ok(schema_url(name, NULL));
    put_abc(s, UUID_A, NULL, "1", "\"x\"", "1", "", 1);
    put_abc(s, UUID_B, UUID_A, "2", "\"y\"", "2", "zz", 0);
    put_abc(s, UUID_C, UUID_A, "2", NULL, "2", NULL, 0); /* B copied */
    values_are(s, UUID_C, "\"y\"", "zz");
    values_are(s, UUID_B, "\"y\"", "zz");
    put_abc(s, UUID_D, NULL, "2", NULL, "1", NULL, 0); /* no parent */
    values_are(s, UUID_D, "\"y\"", "");
    put_abc(s, UUID_E, UUID_D, "3", NULL, "1", NULL, 0); /* a: a version never stored */
    values_are(s, UUID_E, NULL, "");
    convo_close(s);
    drop_schema(name);
}
END_TEST

void postgres_add_inline_tests(Suite *s)
{
    memset(big, 'v', sizeof big - 1);
    TCase *tc = tcase_create("inline");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_small_values_in_the_row);
    tcase_add_test(tc, test_value_from_the_parent_or_blobs);
    tcase_add_test(tc, test_swap_reaches_the_copy);
    tcase_add_test(tc, test_corrupt_vals_are_ecorrupt);
    tcase_add_test(tc, test_migration_from_version_28);
    tcase_add_test(tc, test_input_inline_until_swapped);
    tcase_add_test(tc, test_copy_finds_the_siblings_value);
    suite_add_tcase(s, tc);
}
