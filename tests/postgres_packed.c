/* postgres_packed.c — a checkpoint's pending writes as packed elements
 * (schema version 30): each element is write_pack()'s 24-byte header, the
 * task id and the value, and reads back exactly (a negative idx, a task id
 * kept as text, an empty value); a version 29 schema's pending_write[] is
 * converted on open with every write the same. */
#include "postgres.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UUID_A "1f1e9eee-1758-6660-8003-f7e2ee72e9b1"
#define TASK "6b0e2d6c-26f4-5a3e-9d3c-0c1b2a394857"
#define TASK_TEXT "a task id that is no UUID"

static void put_one(convo_store *s, const char *id)
{
    convo_blob value = {"json", "1", 1};
    convo_channel_in ch = {"messages", "1", &value};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = "t";
    cp.checkpoint_id = id;
    cp.metadata_json = "{}";
    cp.channels = &ch;
    cp.nchannels = 1;
    convo_error err;
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put %s: %s", id, err.message);
}

/* The writes of checkpoint UUID_A as "task idx channel type value;" in the
 * order the library gives them. */
static char *writes_of(convo_store *s)
{
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_get(s, "t", "", UUID_A, &cp, &err) == 0, "%s", err.message);
    static char out[1024];
    out[0] = '\0';
    for (size_t i = 0; i < convo_checkpoint_write_count(cp); i++) {
        const char *path = NULL, *channel = NULL;
        int64_t idx = 0;
        convo_blob v;
        const char *task = convo_checkpoint_write(cp, i, &path, &idx, &channel, &v);
        ck_assert_str_eq(path, "~p");
        size_t at = strlen(out);
        snprintf(out + at, sizeof out - at, "%s %lld %s %s %.*s;", task, (long long)idx, channel,
                 v.type, (int)v.len, (const char *)v.bytes);
    }
    convo_checkpoint_free(cp);
    return out;
}

static void write_two(convo_store *s, const char *task, int64_t idx)
{
    convo_write_in w[2] = {{idx, "messages", {"json", "\"m\"", 3}},
                           {idx < 0 ? idx - 1 : idx + 1, "branch:to:model", {"bytes", "", 0}}};
    convo_error err;
    ck_assert_msg(convo_checkpoint_put_writes(s, "t", "", UUID_A, task, "~p", w, 2, &err) == 0,
                  "%s", err.message);
}

#define WANT TASK " 0 messages json \"m\";" TASK " 1 branch:to:model bytes ;" \
    TASK_TEXT " -4 branch:to:model bytes ;" TASK_TEXT " -3 messages json \"m\";"

/* Each element is its header (24 bytes in version 30; since version 39 the
 * short form's 10: tests/postgres_writes_short.c), the task id and the value;
 * the writes read back exactly. */
START_TEST(test_writes_packed)
{
    const char *name = "wpack", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    put_one(s, UUID_A);
    write_two(s, TASK, 0);
    write_two(s, TASK_TEXT, -3);
    ck_assert_str_eq(writes_of(s), WANT);
    PGconn *pg = admin();
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT string_agg(octet_length(e)::text, ',' ORDER BY o)"
             " FROM \"%s\".checkpoints c, unnest(c.writes) WITH ORDINALITY AS x(e, o)", schema);
    char *v = query1(pg, sql);
    /* 10 + 16 + 3, 10 + 16 + 0, then the text id (25 bytes, as given) */
    ck_assert_str_eq(v, "29,26,38,35");
    free(v);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* A version 29 schema's writes (pending_write[], written by its own
 * functions) are converted on open: the same writes back, the type gone, and
 * a new write merged in. */
START_TEST(test_migration_from_version_29)
{
    schema_at_version("w29", 29);
    PGconn *pg = admin();
    const char *schema = schema_name("w29");
    exec_in_schema(pg, schema,
                   "SELECT @S.checkpoint_put('t', '', '" UUID_A "', NULL, '{}', NULL, NULL, 0,"
                   " ARRAY['messages'], ARRAY['1'], ARRAY['json'], ARRAY['\\x31'::bytea],"
                   " now(), NULL);"
                   "SELECT @S.checkpoint_put_writes('t', '', '" UUID_A "', '" TASK "', '~p',"
                   " ARRAY[0, 1]::int8[], ARRAY['messages', 'branch:to:model'],"
                   " ARRAY['json', 'bytes'], ARRAY['\\x226d22'::bytea, '\\x'], NULL);"
                   "SELECT @S.checkpoint_put_writes('t', '', '" UUID_A "', '" TASK_TEXT "',"
                   " '~p', ARRAY[-3, -4]::int8[], ARRAY['messages', 'branch:to:model'],"
                   " ARRAY['json', 'bytes'], ARRAY['\\x226d22'::bytea, '\\x'], NULL)");
    convo_store *s = open_ok(schema_url("w29", NULL));
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT string_agg(version::text, ',' ORDER BY version)"
             " FROM \"%s\".schema_version", schema);
    char *v = query1(pg, sql);
    ck_assert_str_eq(v, PG_SCHEMA_VERSIONS);
    free(v);
    snprintf(sql, sizeof sql, "SELECT format_type(a.atttypid, a.atttypmod) FROM pg_attribute a"
             " WHERE a.attrelid = '\"%s\".checkpoints'::regclass AND a.attname = 'writes'",
             schema);
    v = query1(pg, sql);
    ck_assert_str_eq(v, "bytea[]");
    free(v);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM pg_type t JOIN pg_namespace n"
             " ON n.oid = t.typnamespace WHERE n.nspname = '%s' AND t.typname = 'pending_write'",
             schema);
    ck_assert_int_eq(query_long(pg, sql), 0);
    ck_assert_str_eq(writes_of(s), WANT);
    /* a retry of the first task's writes replaces nothing it should not */
    write_two(s, TASK, 0);
    ck_assert_str_eq(writes_of(s), WANT);
    convo_close(s);
    PQfinish(pg);
    drop_schema("w29");
}
END_TEST

void postgres_add_packed_tests(Suite *s)
{
    TCase *tc = tcase_create("packed");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_writes_packed);
    tcase_add_test(tc, test_migration_from_version_29);
    suite_add_tcase(s, tc);
}
