/* postgres_writes_short.c — a pending write's element with short fields
 * (schema version 39): a LangGraph-shaped write is a 10-byte header, the task
 * id and the value; a write whose fields do not fit (an idx beyond +-32,767, a
 * task id over 255 bytes) takes the long form; both read back exactly, beside
 * version 30's elements; an element of an unknown form or too short is
 * CONVO_ECORRUPT; a version 38 schema migrated (its rare elements whose
 * first byte is neither 0 nor 255 rewritten to the long form). */
#include "postgres.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UUID_A "1f1e9eee-1758-6660-8003-f7e2ee72e9c1"
#define TASK "6b0e2d6c-26f4-5a3e-9d3c-0c1b2a394857"

static char long_task[301]; /* a task id over 255 bytes (kept as text) */

static void put_one(convo_store *s)
{
    convo_blob value = {"json", "1", 1};
    convo_channel_in ch = {"messages", "1", &value};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = "t";
    cp.checkpoint_id = UUID_A;
    cp.metadata_json = "{}";
    cp.channels = &ch;
    cp.nchannels = 1;
    convo_error err;
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put: %s", err.message);
}

static void write1(convo_store *s, const char *task, int64_t idx, const char *value)
{
    convo_write_in w = {idx, "messages", {"json", value, strlen(value)}};
    convo_error err;
    ck_assert_msg(convo_checkpoint_put_writes(s, "t", "", UUID_A, task, "~p", &w, 1, &err) == 0,
                  "%s", err.message);
}

/* The writes of UUID_A as "task-length idx value;" in the library's order;
 * rc of the get (the text is empty when it fails). With only, read by a
 * listing of the channel (list opts v5 only_channel:
 * checkpoint_list_channel.sql reads the elements itself). */
static int writes_read(convo_store *s, char *out, size_t size, int only)
{
    convo_checkpoint *cp = NULL;
    convo_checkpoint_set *set = NULL;
    convo_error err;
    out[0] = '\0';
    int rc;
    if (only) {
        convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
        o.thread_id = "t";
        o.only_channel = "messages";
        rc = convo_checkpoint_list(s, &o, &set, &err);
        if (rc == 0)
            ck_assert_uint_eq(convo_checkpoint_set_count(set), 1);
    } else {
        rc = convo_checkpoint_get(s, "t", "", UUID_A, &cp, &err);
    }
    if (rc != 0)
        return rc;
    const convo_checkpoint *c = only ? convo_checkpoint_set_get(set, 0) : cp;
    for (size_t i = 0; i < convo_checkpoint_write_count(c); i++) {
        const char *path = NULL, *channel = NULL;
        int64_t idx = 0;
        convo_blob v;
        const char *task = convo_checkpoint_write(c, i, &path, &idx, &channel, &v);
        ck_assert_str_eq(path, "~p");
        ck_assert_str_eq(channel, "messages");
        size_t at = strlen(out);
        snprintf(out + at, size - at, "%zu %lld %.*s;", strlen(task), (long long)idx, (int)v.len,
                 (const char *)v.bytes);
    }
    convo_checkpoint_free(cp);
    convo_checkpoint_set_free(set);
    return 0;
}

/* The same text by a get and by the channel's listing (rc of both). */
static int writes_of(convo_store *s, char *out, size_t size)
{
    char *listed = malloc(size);
    ck_assert_ptr_nonnull(listed);
    int rc = writes_read(s, out, size, 0), lrc = writes_read(s, listed, size, 1);
    ck_assert_msg(lrc == rc, "get %d, listing of the channel %d", rc, lrc);
    ck_assert_str_eq(listed, out);
    free(listed);
    return rc;
}

/* The first byte and length of each element of UUID_A's writes, "b:len,...". */
static char *forms_of(PGconn *pg, const char *schema)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT string_agg(get_byte(e, 0) || ':' || octet_length(e), ',' ORDER BY o)"
             " FROM \"%s\".checkpoints c, unnest(c.writes) WITH ORDINALITY AS x(e, o)", schema);
    return query1(pg, sql);
}

/* Short and long forms side by side, each read back exactly. */
START_TEST(test_short_and_long_forms)
{
    const char *name = "wsh1", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    put_one(s);
    write1(s, TASK, 0, "\"a\"");                   /* short: 10 + 16 + 3 */
    write1(s, "6b0e2d6c-26f4-5a3e-9d3c-0c1b2a394858", -4, "\"b\""); /* short, negative */
    write1(s, "6b0e2d6c-26f4-5a3e-9d3c-0c1b2a394859", 32767, "1");  /* short, the largest */
    write1(s, "6b0e2d6c-26f4-5a3e-9d3c-0c1b2a39485a", -32768, "2"); /* short, the smallest */
    write1(s, "6b0e2d6c-26f4-5a3e-9d3c-0c1b2a39485b", 32768, "3");  /* long */
    write1(s, "6b0e2d6c-26f4-5a3e-9d3c-0c1b2a39485c", INT64_C(-5000000000), "4"); /* long */
    write1(s, long_task, 7, "5");                  /* long: the task id over 255 bytes */
    PGconn *pg = admin();
    char *f = forms_of(pg, schema);
    ck_assert_str_eq(f, "1:29,1:29,1:27,1:27,2:42,2:42,2:326");
    free(f);
    char got[1024];
    ck_assert_int_eq(writes_of(s, got, sizeof got), 0);
    ck_assert_str_eq(got, "36 0 \"a\";36 -4 \"b\";36 32767 1;36 -32768 2;36 32768 3;"
                          "36 -5000000000 4;300 7 5;");
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* Elements of version 30's form (first byte 0 or 255), put by hand beside a
 * short one, read back; an element of another first byte, or too short for
 * its header or its task id, is CONVO_ECORRUPT. */
START_TEST(test_old_form_and_corrupt_elements)
{
    const char *name = "wsh2", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    put_one(s);
    write1(s, TASK, 1, "\"a\"");
    PGconn *pg = admin();
    exec_in_schema(pg, schema,
                   "UPDATE @S.checkpoints SET writes = writes"
                   " || (int8send(2) || int4send(writes_path) || int4send(writes_ch)"
                   " || int4send(writes_type) || int4send(3) || '\\x616263'::bytea"
                   " || '\\x31'::bytea)"
                   " || (int8send(-2) || int4send(writes_path) || int4send(writes_ch)"
                   " || int4send(writes_type) || int4send(3) || '\\x616264'::bytea"
                   " || '\\x32'::bytea)"
                   " FROM (SELECT w.task_path AS writes_path, w.channel AS writes_ch,"
                   " w.type AS writes_type FROM @S.checkpoints c, unnest(c.writes) e,"
                   " @S.write_fields(e) w) x");
    char *f = forms_of(pg, schema);
    ck_assert_str_eq(f, "1:29,0:28,255:28");
    free(f);
    char got[1024];
    ck_assert_int_eq(writes_of(s, got, sizeof got), 0);
    ck_assert_str_eq(got, "36 1 \"a\";3 2 1;3 -2 2;");
    /* each damage on its own, then the original back */
    static const char *const damage[] = {
        "set_byte(writes[1], 0, 3)",                       /* an unknown form */
        "ARRAY[substring(writes[1] FROM 1 FOR 9)]",        /* short of its header */
        "ARRAY[set_byte(writes[1], 9, 200)]",              /* a task id beyond the element */
        "ARRAY['\\x02'::bytea || substring(writes[2] FROM 1 FOR 20)]", /* long, too short */
        "ARRAY[''::bytea]",                                /* empty */
    };
    exec_in_schema(pg, schema, "CREATE TABLE @S.keep AS SELECT writes FROM @S.checkpoints");
    for (size_t i = 0; i < sizeof damage / sizeof *damage; i++) {
        char sql[512];
        snprintf(sql, sizeof sql, "UPDATE @S.checkpoints SET writes = %s", damage[i]);
        if (strncmp(damage[i], "set_byte", 8) == 0)
            snprintf(sql, sizeof sql, "UPDATE @S.checkpoints SET writes[1] = %s", damage[i]);
        exec_in_schema(pg, schema, sql);
        ck_assert_msg(writes_of(s, got, sizeof got) == CONVO_ECORRUPT, "damage %zu: %s", i, got);
        exec_in_schema(pg, schema,
                       "UPDATE @S.checkpoints SET writes = (SELECT writes FROM @S.keep)");
    }
    ck_assert_int_eq(writes_of(s, got, sizeof got), 0);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* A version 38 schema: its elements (version 30's form) read back after the
 * migration, the one whose idx puts a byte other than 0 or 255 first
 * rewritten to the long form; a new write takes the short one. */
START_TEST(test_migration_from_version_38)
{
    const char *name = "wsh3", *schema = schema_name(name);
    schema_at_version(name, 38);
    PGconn *pg = admin();
    exec_in_schema(pg, schema,
                   "SELECT @S.checkpoint_put('t', '', '" UUID_A "', NULL, '{}', NULL, NULL, 0,"
                   " ARRAY['messages'], ARRAY['1'], ARRAY['json'], ARRAY['\\x31'::bytea],"
                   " now(), NULL);"
                   "SELECT @S.checkpoint_put_writes('t', '', '" UUID_A "', '" TASK "', '~p',"
                   " ARRAY[0, 72057594037927936]::int8[], ARRAY['messages', 'messages'],"
                   " ARRAY['json', 'json'], ARRAY['\\x226d22'::bytea, '\\x33'], NULL)");
    char *f = forms_of(pg, schema);
    ck_assert_str_eq(f, "0:43,1:41");
    free(f);
    convo_store *s = open_ok(schema_url(name, NULL));
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT string_agg(version::text, ',' ORDER BY version)"
             " FROM \"%s\".schema_version", schema);
    char *v = query1(pg, sql);
    ck_assert_str_eq(v, PG_SCHEMA_VERSIONS);
    free(v);
    f = forms_of(pg, schema);
    ck_assert_str_eq(f, "0:43,2:42");
    free(f);
    write1(s, "6b0e2d6c-26f4-5a3e-9d3c-0c1b2a394858", 5, "9");
    f = forms_of(pg, schema);
    ck_assert_str_eq(f, "0:43,2:42,1:27");
    free(f);
    char got[512];
    ck_assert_int_eq(writes_of(s, got, sizeof got), 0);
    ck_assert_str_eq(got, "36 0 \"m\";36 72057594037927936 3;36 5 9;");
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

void postgres_add_writes_short_tests(Suite *s)
{
    memset(long_task, 't', sizeof long_task - 1);
    TCase *tc = tcase_create("writes_short");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_short_and_long_forms);
    tcase_add_test(tc, test_old_form_and_corrupt_elements);
    tcase_add_test(tc, test_migration_from_version_38);
    suite_add_tcase(s, tc);
}
