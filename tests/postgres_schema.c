/* postgres_schema.c — the PostgreSQL driver's schema: created and versioned
 * on open, refused when newer or broken, migrated once by concurrent openers,
 * separate per schema name; migrations from the version 3, 4, 5 and 6
 * layouts with their data; each of the driver's .sql files loaded on its own.
 * Part of tests/postgres_extra (tests/postgres.h). */
#include "postgres.h"
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------------ schema */

START_TEST(test_schema_created_and_versioned)
{
    convo_store *s = open_ok(schema_url("layout", NULL));
    convo_error err;
    ck_assert_int_eq(append1(s, "t", &err), 0);
    convo_close(s);
    PGconn *pg = admin();
    char sql[1024];
    snprintf(sql, sizeof sql, "SELECT string_agg(version::text, ',' ORDER BY version)"
             " FROM \"%s\".schema_version", schema_name("layout"));
    char *versions = query1(pg, sql);
    ck_assert_str_eq(versions, PG_SCHEMA_VERSIONS);
    free(versions);
    /* (v6) the thread table's primary key is the thread id; every other data
     * table's starts with the thread's numeric key */
    snprintf(sql, sizeof sql,
             "SELECT string_agg(c.relname || ':' || a.attname, ' ' ORDER BY c.relname)"
             " FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid"
             " JOIN pg_namespace n ON n.oid = c.relnamespace"
             " JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = i.indkey[0]"
             " WHERE n.nspname = '%s' AND i.indisprimary AND c.relname <> 'schema_version'",
             schema_name("layout"));
    char *keys = query1(pg, sql);
    ck_assert_str_eq(keys, "checkpoint_blobs:tid checkpoint_channel_sets:num checkpoint_names:num "
                           "checkpoint_segments:tid checkpoints:tid "
                           "idempotency_keys:tid indexed_keys:key messages:tid thread_extra:tid "
                           "threads:thread_id");
    free(keys);
    /* reopening changes nothing */
    s = open_ok(schema_url("layout", NULL));
    convo_close(s);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM \"%s\".schema_version",
             schema_name("layout"));
    ck_assert_int_eq(query_long(pg, sql), PG_SCHEMA_VERSION);
    PQfinish(pg);
    drop_schema("layout");
}
END_TEST

START_TEST(test_newer_schema_not_supported)
{
    convo_store *s = open_ok(schema_url("newer", NULL));
    convo_close(s);
    PGconn *pg = admin();
    char sql[256];
    snprintf(sql, sizeof sql, "INSERT INTO \"%s\".schema_version (version) VALUES (999)",
             schema_name("newer"));
    free(query1(pg, sql));
    PQfinish(pg);
    convo_error err;
    s = NULL;
    ck_assert_int_eq(convo_open(&s, schema_url("newer", NULL), &err), CONVO_ENOTSUP);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(err.message, "999") != NULL, "message: %s", err.message);
    drop_schema("newer");
}
END_TEST

/* A version table that records only a negative version is refused, not
 * migrated from "version -3". */
START_TEST(test_negative_schema_version_refused)
{
    PGconn *pg = admin();
    char sql[512];
    snprintf(sql, sizeof sql,
             "CREATE SCHEMA \"%s\"; CREATE TABLE \"%s\".schema_version (version integer PRIMARY"
             " KEY, applied_at timestamptz NOT NULL DEFAULT now());"
             " INSERT INTO \"%s\".schema_version (version) VALUES (-3)",
             schema_name("negative"), schema_name("negative"), schema_name("negative"));
    free(query1(pg, sql));
    PQfinish(pg);
    convo_error err;
    convo_store *s = NULL;
    ck_assert_int_eq(convo_open(&s, schema_url("negative", NULL), &err), CONVO_ECORRUPT);
    ck_assert_ptr_null(s);
    ck_assert_msg(strstr(err.message, "-3") != NULL, "message: %s", err.message);
    drop_schema("negative");
}
END_TEST

/* Openers racing on a new schema: one migrates, the others wait and find it done. */
START_TEST(test_concurrent_openers_migrate_once)
{
    enum { N = 6 };
    const char *url = schema_url("race", NULL);
    pid_t pids[N];
    for (int i = 0; i < N; i++) {
        pids[i] = fork();
        if (pids[i] == 0) {
            convo_store *s = NULL;
            int rc = convo_open(&s, url, NULL);
            if (rc == 0)
                rc = append1(s, "t", NULL);
            convo_close(s);
            _exit(rc == 0 ? 0 : 1);
        }
    }
    for (int i = 0; i < N; i++) {
        int status;
        waitpid(pids[i], &status, 0);
        ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "opener %d failed", i);
    }
    convo_store *s = open_ok(url);
    ck_assert_int_eq(length_of(s, "t"), N);
    convo_close(s);
    PGconn *pg = admin();
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM \"%s\".schema_version", schema_name("race"));
    ck_assert_int_eq(query_long(pg, sql), PG_SCHEMA_VERSION);
    PQfinish(pg);
    drop_schema("race");
}
END_TEST

/* Two stores on one database, in two schemas, do not see each other. */
START_TEST(test_schemas_are_separate)
{
    convo_store *a = open_ok(schema_url("sep_a", NULL));
    convo_store *b = open_ok(schema_url("sep_b", NULL));
    convo_error err;
    ck_assert_int_eq(append1(a, "t", &err), 0);
    convo_history *h = NULL;
    ck_assert_int_eq(convo_load(b, "t", NULL, &h, &err), CONVO_ENOTFOUND);
    convo_close(a);
    convo_close(b);
    drop_schema("sep_a");
    drop_schema("sep_b");
}
END_TEST

/* The version 3 layout: its tables and indexes exactly as the driver created them,
 * json_compact_size as it was, and the other functions with their exact
 * signatures but stand-in bodies (migration 4 only drops them). */
static const char v3_layout[] =
    "CREATE SCHEMA @S;\n"
    "CREATE TABLE @S.schema_version (version integer PRIMARY KEY,\n"
    "    applied_at timestamptz NOT NULL DEFAULT now());\n"
    "INSERT INTO @S.schema_version (version) VALUES (1), (2), (3);\n"
    "CREATE TABLE @S.threads (\n"
    "    thread_id  text COLLATE \"C\" NOT NULL,\n"
    "    length     bigint NOT NULL DEFAULT 0,\n"
    "    extra      jsonb NOT NULL DEFAULT '{}',\n"
    "    created_at timestamptz NOT NULL DEFAULT now(),\n"
    "    updated_at timestamptz NOT NULL DEFAULT now(),\n"
    "    PRIMARY KEY (thread_id));\n"
    "CREATE TABLE @S.messages (\n"
    "    thread_id  text COLLATE \"C\" NOT NULL,\n"
    "    seq        bigint NOT NULL,\n"
    "    role       text NOT NULL,\n"
    "    created_at timestamptz NOT NULL,\n"
    "    body       bytea NOT NULL,\n"
    "    PRIMARY KEY (thread_id, seq));\n"
    "CREATE TABLE @S.idempotency_keys (\n"
    "    thread_id  text COLLATE \"C\" NOT NULL,\n"
    "    key        text COLLATE \"C\" NOT NULL,\n"
    "    first_seq  bigint NOT NULL,\n"
    "    count      integer NOT NULL,\n"
    "    created_at timestamptz NOT NULL DEFAULT now(),\n"
    "    PRIMARY KEY (thread_id, key));\n"
    "CREATE FUNCTION @S.json_compact_size(j jsonb) RETURNS bigint\n"
    "LANGUAGE sql IMMUTABLE AS $fn$\n"
    "    SELECT octet_length(j::text) - coalesce(sum(CASE jsonb_typeof(v)\n"
    "        WHEN 'object' THEN greatest(2 * (SELECT count(*) FROM jsonb_object_keys(v)) - 1, 0)\n"
    "        WHEN 'array' THEN greatest(jsonb_array_length(v) - 1, 0)\n"
    "        ELSE 0 END), 0)\n"
    "    FROM jsonb_path_query(j, 'strict $.**') AS v\n"
    "$fn$;\n"
    "ALTER TABLE @S.threads ADD COLUMN checkpoint_seq bigint NOT NULL DEFAULT 0;\n"
    "CREATE TABLE @S.checkpoints (\n"
    "    thread_id     text COLLATE \"C\" NOT NULL,\n"
    "    checkpoint_ns text COLLATE \"C\" NOT NULL,\n"
    "    checkpoint_id text COLLATE \"C\" NOT NULL,\n"
    "    put_seq       bigint NOT NULL,\n"
    "    parent_id     text COLLATE \"C\",\n"
    "    metadata      jsonb NOT NULL,\n"
    "    body_type     text,\n"
    "    body          bytea,\n"
    "    log_length    bigint NOT NULL,\n"
    "    channels      text[] NOT NULL,\n"
    "    versions      text[] NOT NULL,\n"
    "    created_at    timestamptz NOT NULL,\n"
    "    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id));\n"
    "CREATE INDEX checkpoints_by_put ON @S.checkpoints (thread_id, put_seq DESC);\n"
    "CREATE INDEX checkpoints_by_ns_put ON @S.checkpoints (thread_id, checkpoint_ns, put_seq);\n"
    "CREATE TABLE @S.checkpoint_blobs (\n"
    "    thread_id     text COLLATE \"C\" NOT NULL,\n"
    "    checkpoint_ns text COLLATE \"C\" NOT NULL,\n"
    "    channel       text COLLATE \"C\" NOT NULL,\n"
    "    version       text COLLATE \"C\" NOT NULL,\n"
    "    type          text NOT NULL,\n"
    "    value         bytea NOT NULL,\n"
    "    PRIMARY KEY (thread_id, checkpoint_ns, channel, version));\n"
    "CREATE TABLE @S.checkpoint_writes (\n"
    "    thread_id     text COLLATE \"C\" NOT NULL,\n"
    "    checkpoint_ns text COLLATE \"C\" NOT NULL,\n"
    "    checkpoint_id text COLLATE \"C\" NOT NULL,\n"
    "    task_id       text COLLATE \"C\" NOT NULL,\n"
    "    idx           bigint NOT NULL,\n"
    "    task_path     text NOT NULL,\n"
    "    channel       text NOT NULL,\n"
    "    type          text NOT NULL,\n"
    "    value         bytea NOT NULL,\n"
    "    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx));\n"
    "CREATE FUNCTION @S.append(p_thread text, p_bodies bytea[], p_roles text[],\n"
    "    p_at timestamptz, p_key text, p_expected bigint,\n"
    "    OUT first_seq bigint, OUT count integer, OUT replayed boolean)\n"
    "LANGUAGE sql AS $$ SELECT 0::bigint, 0, false $$;\n"
    "CREATE FUNCTION @S.save_extra(p_thread text, p_patch jsonb, p_max bigint) RETURNS void\n"
    "LANGUAGE sql AS $$ $$;\n"
    "CREATE FUNCTION @S.thread_delete(p_thread text) RETURNS boolean\n"
    "LANGUAGE sql AS $$ SELECT false $$;\n"
    "CREATE FUNCTION @S.thread_fork(p_src text, p_dst text, p_upto bigint) RETURNS void\n"
    "LANGUAGE sql AS $$ $$;\n"
    "CREATE FUNCTION @S.checkpoint_put(p_thread text, p_ns text, p_id text, p_parent text,\n"
    "    p_metadata jsonb, p_body_type text, p_body bytea, p_log_length bigint,\n"
    "    p_channels text[], p_versions text[], p_types text[], p_values bytea[],\n"
    "    p_at timestamptz) RETURNS void\n"
    "LANGUAGE sql AS $$ $$;\n"
    "CREATE FUNCTION @S.checkpoint_put_writes(p_thread text, p_ns text, p_id text,\n"
    "    p_task text, p_path text, p_idx bigint[], p_channels text[], p_types text[],\n"
    "    p_values bytea[]) RETURNS void\n"
    "LANGUAGE sql AS $$ $$;\n"
    "CREATE FUNCTION @S.checkpoint_prune(p_thread text, p_keep bigint) RETURNS void\n"
    "LANGUAGE sql AS $$ $$;\n"
    "CREATE FUNCTION @S.thread_import(p_thread text, p_first bigint, p_bodies bytea[],\n"
    "    p_roles text[], p_at timestamptz[]) RETURNS boolean\n"
    "LANGUAGE sql AS $$ SELECT false $$;\n";

/* What a version 3 store held: "a" with three messages, an extra, an
 * idempotency key and a checkpoint; "b" with an extra only. */
static const char v3_data[] =
    "INSERT INTO @S.threads (thread_id, length, extra, checkpoint_seq)\n"
    "VALUES ('a', 3, '{\"k\": 1, \"s\": \"x\"}', 1), ('b', 0, '{\"z\": null}', 0);\n"
    "INSERT INTO @S.messages (thread_id, seq, role, created_at, body)\n"
    "SELECT 'a', i, 'user', '2024-01-02T03:04:05.123456Z',\n"
    "       convert_to('{\"role\":\"user\",\"n\":' || i || '}', 'UTF8')\n"
    "  FROM generate_series(0, 2) i;\n"
    "INSERT INTO @S.idempotency_keys (thread_id, key, first_seq, count)\n"
    "VALUES ('a', 'k1', 2, 1);\n"
    "INSERT INTO @S.checkpoints (thread_id, checkpoint_ns, checkpoint_id, put_seq, parent_id,\n"
    "    metadata, body_type, body, log_length, channels, versions, created_at)\n"
    "VALUES ('a', '', 'c1', 1, NULL, '{\"step\": 1}', 'json', '\\x7b7d', 3,\n"
    "        '{ch}', '{v1}', now());\n"
    "INSERT INTO @S.checkpoint_blobs VALUES ('a', '', 'ch', 'v1', 'json', '\\x31');\n";

/* A version 3 schema is migrated on open: extra moves to thread_extra, the
 * functions are replaced, and every call sees what was there. */
START_TEST(test_migration_from_version_3)
{
    PGconn *pg = admin();
    PQclear(PQexec(pg, "SET client_min_messages = warning"));
    exec_in_schema(pg, schema_name("v3"), v3_layout);
    exec_in_schema(pg, schema_name("v3"), v3_data);
    convo_store *s = open_ok(schema_url("v3", NULL));
    convo_error err;
    convo_history *h;
    convo_load_opts lo = CONVO_LOAD_OPTS_INIT;
    lo.with_extra = 1;
    ck_assert_int_eq(convo_load(s, "a", &lo, &h, &err), 0);
    ck_assert_int_eq(convo_history_count(h), 3);
    size_t len;
    ck_assert_str_eq(convo_history_message(h, 2, &len), "{\"role\":\"user\",\"n\":2}");
    ck_assert_str_eq(convo_history_extra(h), "{\"k\":1,\"s\":\"x\"}");
    convo_history_free(h);
    ck_assert_int_eq(convo_load(s, "b", &lo, &h, &err), 0);
    ck_assert_str_eq(convo_history_extra(h), "{\"z\":null}");
    ck_assert_int_eq(convo_history_length(h), 0);
    convo_history_free(h);
    /* the key still answers; the next message gets seq 3 */
    convo_append_opts o = CONVO_APPEND_OPTS_INIT;
    o.idempotency_key = "k1";
    convo_append_result res;
    /* the retry of the batch the key recorded (another batch under a used key
     * is CONVO_ECONFLICT) */
    const char *stored = "{\"role\":\"user\",\"n\":2}";
    ck_assert_int_eq(convo_append(s, "a", &stored, NULL, 1, &o, &res, &err), 0);
    ck_assert(res.replayed && res.first_seq == 2);
    ck_assert_int_eq(convo_append(s, "a", &msg1, NULL, 1, NULL, &res, &err), 0);
    ck_assert_int_eq(res.first_seq, 3);
    ck_assert_int_eq(convo_save_extra(s, "a", "{\"s\":\"y\"}", &err), 0);
    ck_assert_int_eq(convo_load(s, "a", &lo, &h, &err), 0);
    ck_assert_str_eq(convo_history_extra(h), "{\"k\":1,\"s\":\"y\"}");
    convo_history_free(h);
    convo_checkpoint *cp;
    ck_assert_int_eq(convo_checkpoint_get(s, "a", "", NULL, &cp, &err), 0);
    ck_assert_str_eq(convo_checkpoint_id(cp), "c1");
    ck_assert_int_eq(convo_checkpoint_log_length(cp), 3);
    convo_checkpoint_free(cp);
    convo_close(s);
    /* versions 4 and 5 recorded; the old extra column and the old functions are gone */
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT string_agg(version::text, ',' ORDER BY version)"
             " FROM \"%s\".schema_version", schema_name("v3"));
    char *v = query1(pg, sql);
    ck_assert_str_eq(v, PG_SCHEMA_VERSIONS);
    free(v);
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM information_schema.columns WHERE table_schema = '%s'"
             " AND table_name = 'threads' AND column_name = 'extra'", schema_name("v3"));
    ck_assert_int_eq(query_long(pg, sql), 0);
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM pg_proc WHERE pronamespace = '\"%s\"'::regnamespace"
             " AND pronargs = CASE proname WHEN 'append' THEN 8 WHEN 'save_extra' THEN 5"
             " WHEN 'thread_fork' THEN 6 WHEN 'checkpoint_put' THEN 14"
             " WHEN 'checkpoint_put_writes' THEN 10 WHEN 'checkpoint_prune' THEN 3"
             " WHEN 'thread_import' THEN 7 ELSE pronargs END", schema_name("v3"));
    long current = query_long(pg, sql);
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM pg_proc WHERE pronamespace = '\"%s\"'::regnamespace",
             schema_name("v3"));
    ck_assert_int_eq(query_long(pg, sql), current); /* no overload of an old signature left */
    PQfinish(pg);
    drop_schema("v3");
}
END_TEST

/* Checkpoints put by version 4's checkpoint_put, so put_seq counts per
 * thread: a1 1, a2 2; b1 1, b2 4 (2 and 3 deleted); thread c's counter is
 * at 6 with its checkpoints gone. The store-wide order must start at 7. */
static const char v4_data[] =
    "SELECT @S.checkpoint_put(t, '', id, NULL, '{\"v4\": true}', NULL, NULL, 0, '{}', '{}',\n"
    "    '{}', '{}', now(), NULL)\n"
    "  FROM (VALUES (1, 'a', 'a1'), (2, 'b', 'b1'), (3, 'a', 'a2'), (4, 'b', 'x2'),\n"
    "               (5, 'b', 'x3'), (6, 'b', 'b2'), (7, 'c', 'c1'), (8, 'c', 'c2'),\n"
    "               (9, 'c', 'c3'), (10, 'c', 'c4'), (11, 'c', 'c5'), (12, 'c', 'c6'))\n"
    "       AS p(o, t, id) ORDER BY o;\n"
    "DELETE FROM @S.checkpoints WHERE checkpoint_id LIKE 'x%' OR thread_id = 'c';\n";

/* The ids of a list, newest first, as "id id ...". */
static void list_ids(convo_store *s, const char *thread, const char *before_thread,
                     const char *before, char *out, size_t size)
{
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = thread;
    o.before_thread_id = before_thread;
    o.before = before;
    convo_checkpoint_set *set;
    convo_error err;
    int rc = convo_checkpoint_list(s, &o, &set, &err);
    ck_assert_msg(rc == 0, "list: %d %s", rc, err.message);
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < convo_checkpoint_set_count(set); i++)
        used += (size_t)snprintf(out + used, size - used, "%s%s", i ? " " : "",
                                 convo_checkpoint_id(convo_checkpoint_set_get(set, i)));
    convo_checkpoint_set_free(set);
}

static long put_seq_of(PGconn *pg, const char *name, const char *id)
{
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT put_seq FROM \"%s\".checkpoints WHERE checkpoint_id = '%s'",
             schema_name(name), id);
    return query_long(pg, sql);
}

/* A version 4 schema is migrated on open: the checkpoints it holds keep their
 * order within their thread and count as put before every later one, in any
 * thread; new puts take the store-wide order, put with messages works. */
START_TEST(test_migration_from_version_4)
{
    schema_at_version("v4", 4);
    PGconn *pg = admin();
    exec_in_schema(pg, schema_name("v4"), v4_data);
    ck_assert_int_eq(put_seq_of(pg, "v4", "b2"), 4);
    convo_store *s = open_ok(schema_url("v4", NULL));
    char sql[512], ids[256];
    snprintf(sql, sizeof sql, "SELECT string_agg(version::text, ',' ORDER BY version)"
             " FROM \"%s\".schema_version", schema_name("v4"));
    char *v = query1(pg, sql);
    ck_assert_str_eq(v, PG_SCHEMA_VERSIONS);
    free(v);
    list_ids(s, "a", NULL, NULL, ids, sizeof ids);
    ck_assert_str_eq(ids, "a2 a1");
    list_ids(s, "b", NULL, "b2", ids, sizeof ids);
    ck_assert_str_eq(ids, "b1");
    put_checkpoint(s, "a", "a3");
    put_checkpoint(s, "b", "b3");
    ck_assert_int_eq(put_seq_of(pg, "v4", "a3"), 7);
    ck_assert_int_eq(put_seq_of(pg, "v4", "b3"), 8);
    list_ids(s, "a", NULL, NULL, ids, sizeof ids);
    ck_assert_str_eq(ids, "a3 a2 a1");
    list_ids(s, "b", "a", "a3", ids, sizeof ids); /* every old one was put before a3 */
    ck_assert_str_eq(ids, "b2 b1");
    list_ids(s, "a", "b", "b3", ids, sizeof ids);
    ck_assert_str_eq(ids, "a3 a2 a1");
    list_ids(s, NULL, "b", "b3", ids, sizeof ids); /* threads in id order */
    ck_assert_str_eq(ids, "a3 a2 a1 b2 b1");
    /* put with messages on the migrated schema */
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = "a";
    cp.checkpoint_id = "a4";
    cp.messages = &msg1;
    cp.nmessages = 1;
    cp.expected_length = 0;
    cp.log_length = 1;
    convo_error err;
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put_log: %s", err.message);
    ck_assert_int_eq(length_of(s, "a"), 1);
    ck_assert_int_eq(put_seq_of(pg, "v4", "a4"), 9);
    convo_close(s);
    PQfinish(pg);
    drop_schema("v4");
}
END_TEST

/* ------------------------------------------------------------------ the SQL files */

/* The driver's SQL, one statement or migration per file in drivers/postgres,
 * embedded at build time. Each is loaded here on its own, from the source
 * folder, as a reader of the file would try it. */
typedef struct sql_file {
    char name[64];
    char *text; /* @S, @N and @T put in */
    int used;
} sql_file;

/* Replaces each @X placeholder with its value (see drivers/postgres/conn.c;
 * @C, @D, @R and @K of thread_list_*.sql as drivers/postgres/index.c fills
 * them for the activity order on a key "user_id"). */
static char *sql_fill(const char *text, const char *schema)
{
    char quoted[80];
    snprintf(quoted, sizeof quoted, "\"%s\"", schema);
    size_t n = strlen(text), cap = n * 2 + 256, o = 0;
    char *out = malloc(cap);
    ck_assert_ptr_nonnull(out);
    for (size_t i = 0; i < n; i++) {
        const char *with = NULL;
        if (text[i] == '@' && i + 1 < n)
            with = text[i + 1] == 'S' ? quoted : text[i + 1] == 'N' ? schema
                 : text[i + 1] == 'T' ? "\"bench_raw_sqlfiles\""
                 : text[i + 1] == 'C' ? "updated_at" : text[i + 1] == 'D' ? "DESC"
                 : text[i + 1] == 'R' ? "<" : text[i + 1] == 'K' ? "'user_id'" : NULL;
        size_t w = with ? strlen(with) : 1;
        if (o + w + 1 > cap) {
            cap = cap * 2 + w;
            out = realloc(out, cap);
            ck_assert_ptr_nonnull(out);
        }
        if (with) {
            memcpy(out + o, with, w);
            i++;
        } else {
            out[o] = text[i];
        }
        o += w;
    }
    out[o] = '\0';
    return out;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const sql_file *)a)->name, ((const sql_file *)b)->name);
}

/* Every *.sql of drivers/postgres, read and filled for schema; sorted by name. */
static size_t read_sql_files(sql_file *files, size_t max, const char *schema)
{
    DIR *dir = opendir(POSTGRES_SQL_DIR);
    ck_assert_msg(dir != NULL, "cannot open %s", POSTGRES_SQL_DIR);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(dir)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len < 5 || strcmp(e->d_name + len - 4, ".sql") != 0)
            continue;
        ck_assert_msg(n < max && len < sizeof files[n].name, "too many or long: %s", e->d_name);
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", POSTGRES_SQL_DIR, e->d_name);
        FILE *f = fopen(path, "rb");
        ck_assert_msg(f != NULL, "cannot read %s", path);
        char *text = calloc(1, 1 << 20);
        ck_assert_ptr_nonnull(text);
        size_t got = fread(text, 1, (1 << 20) - 1, f);
        fclose(f);
        ck_assert_msg(got > 0 && got < (1 << 20) - 1, "%s: %zu bytes", path, got);
        memcpy(files[n].name, e->d_name, len + 1); /* len checked above */
        files[n].text = sql_fill(text, schema);
        files[n].used = 0;
        free(text);
        n++;
    }
    closedir(dir);
    qsort(files, n, sizeof *files, by_name);
    return n;
}

static sql_file *sql_find(sql_file *files, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(files[i].name, name) == 0)
            return &files[i];
    return NULL;
}

/* The first word of a statement, past comment lines and blanks ("SELECT"...). */
static void first_word(const char *text, char *out, size_t size)
{
    const char *p = text;
    for (;;) {
        while (*p == ' ' || *p == '\n' || *p == '\t')
            p++;
        if (p[0] != '-' || p[1] != '-')
            break;
        p += strcspn(p, "\n");
    }
    size_t o = 0;
    while (o + 1 < size && ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z')))
        out[o++] = *p++;
    out[o] = '\0';
}

/* Runs a file's text (one or more statements) as the driver would, or fails the test. */
static void sql_exec(PGconn *pg, sql_file *f)
{
    PGresult *r = PQexec(pg, f->text);
    ExecStatusType st = PQresultStatus(r);
    ck_assert_msg(st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK, "%s: %s", f->name,
                  PQresultErrorMessage(r));
    PQclear(r);
    f->used++;
}

void schema_at_version(const char *name, int version)
{
    static sql_file files[128];
    drop_schema(name);
    size_t n = read_sql_files(files, 128, schema_name(name));
    sql_file *begin = sql_find(files, n, "migrate-begin.sql");
    sql_file *record = sql_find(files, n, "migrate-record.sql");
    ck_assert(begin && record);
    PGconn *pg = admin();
    PQclear(PQexec(pg, "SET client_min_messages = warning"));
    sql_exec(pg, begin);
    for (int v = 1; v <= version; v++) {
        char file[64], number[16];
        snprintf(file, sizeof file, "migrate-%d.sql", v);
        sql_file *m = sql_find(files, n, file);
        ck_assert_msg(m != NULL, "no %s", file);
        sql_exec(pg, m);
        snprintf(number, sizeof number, "%d", v);
        const char *values[1] = {number};
        PGresult *r = PQexecParams(pg, record->text, 1, NULL, values, NULL, NULL, 0);
        ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "record %d: %s", v,
                      PQresultErrorMessage(r));
        PQclear(r);
    }
    free(query1(pg, "COMMIT"));
    PQfinish(pg);
    for (size_t i = 0; i < n; i++)
        free(files[i].text);
}

/* What a version 5 store held, written by version 5's own functions: "a" with
 * three messages (two under an idempotency key), an extra, checkpoints in two
 * namespaces with channel values (one stored once for two checkpoints) and
 * pending writes; "b" with an extra only; "live" with a deadline an hour
 * ahead and a checkpoint; "dead" with messages, an extra and a checkpoint, its
 * deadline passed. */
const char v5_data[] =
    "SELECT @S.append('a', ARRAY[convert_to('{\"role\":\"user\",\"n\":0}', 'UTF8'),\n"
    "    convert_to('{\"role\":\"assistant\",\"n\":1}', 'UTF8')], ARRAY['user', 'assistant'],\n"
    "    '2026-01-02 03:04:05.123456+00', 'k1', -1, NULL);\n"
    "SELECT @S.append('a', ARRAY['\\x7b7d00ff'::bytea], ARRAY['tool'],\n"
    "    '2026-01-02 03:04:06.5+00', NULL, 2, NULL);\n"
    "SELECT @S.save_extra('a', '{\"k\": 1, \"s\": \"x\"}', 100000, NULL);\n"
    "SELECT @S.save_extra('b', '{\"z\": null}', 100000, NULL);\n"
    "SELECT @S.checkpoint_put('a', '', 'c1', NULL, '{\"step\": 1}', 'json',\n"
    "    convert_to('{\"body\":1}', 'UTF8'), 2, ARRAY['ch', 'x'], ARRAY['v1', 'v1'],\n"
    "    ARRAY['json', 'bytes'], ARRAY[convert_to('1', 'UTF8'), '\\x00ff'::bytea],\n"
    "    '2026-01-02 03:04:07+00', NULL);\n"
    "SELECT @S.checkpoint_put('a', '', 'c2', 'c1', '{\"step\": 2}', 'json',\n"
    "    convert_to('{\"body\":2}', 'UTF8'), 3, ARRAY['ch', 'x'], ARRAY['v2', 'v1'],\n"
    "    ARRAY['json', NULL], ARRAY[convert_to('2', 'UTF8'), NULL],\n"
    "    '2026-01-02 03:04:08+00', NULL);\n"
    "SELECT @S.checkpoint_put('a', 'sub', 'c3', NULL, '{}', NULL, NULL, 3, '{}', '{}', '{}',\n"
    "    '{}', '2026-01-02 03:04:09+00', NULL);\n"
    "SELECT @S.checkpoint_put_writes('a', '', 'c2', 'task1', 'p', ARRAY[0, 1],\n"
    "    ARRAY['ch', 'x'], ARRAY['json', 'json'],\n"
    "    ARRAY[convert_to('\"w0\"', 'UTF8'), convert_to('\"w1\"', 'UTF8')], NULL);\n"
    "SELECT @S.append('live', ARRAY[convert_to('{\"n\":0}', 'UTF8')], ARRAY['user'], now(),\n"
    "    'k2', -1, interval '1 hour');\n"
    "SELECT @S.checkpoint_put('live', '', 'l1', NULL, '{}', NULL, NULL, 1, '{}', '{}',\n"
    "    '{}', '{}', now(), interval '1 hour');\n"
    "SELECT @S.append('dead', ARRAY[convert_to('{\"n\":0}', 'UTF8')], ARRAY['user'], now(),\n"
    "    'k3', -1, interval '1 hour');\n"
    "SELECT @S.save_extra('dead', '{\"d\": 1}', 100000, interval '1 hour');\n"
    "SELECT @S.checkpoint_put('dead', '', 'd1', NULL, '{}', NULL, NULL, 1, ARRAY['ch'],\n"
    "    ARRAY['v1'], ARRAY['json'], ARRAY[convert_to('1', 'UTF8')], now(),\n"
    "    interval '1 hour');\n"
    "UPDATE @S.threads SET expires_at = now() - interval '1 s' WHERE thread_id = 'dead';\n";

/* Every row of every table as text, each table's rows sorted: the version 5
 * columns, read from the version 5 tables, from the version 6 ones (the
 * thread id through the numeric key, the pairs split back) and from the
 * version 7 ones (a body as given: its first byte 0, then the body; NULL
 * otherwise). */
static const char *const v5_rows[][6] = {
    {"SELECT thread_id, length, created_at, updated_at, expires_at FROM @S.threads",
     "SELECT thread_id, length, created_at, updated_at, expires_at FROM @S.threads",
     "SELECT thread_id, length, created_at, updated_at, expires_at FROM @S.threads",
     "SELECT thread_id, length, created_at, updated_at, expires_at FROM @S.threads",
     "SELECT thread_id, length, created_at, updated_at, expires_at FROM @S.threads",
     "SELECT thread_id, length, created_at, updated_at, expires_at FROM @S.threads"},
    {"SELECT thread_id, extra FROM @S.thread_extra",
     "SELECT t.thread_id, x.extra FROM @S.thread_extra x JOIN @S.threads t ON t.tid = x.tid",
     "SELECT t.thread_id, x.extra FROM @S.thread_extra x JOIN @S.threads t ON t.tid = x.tid",
     "SELECT t.thread_id, x.extra FROM @S.thread_extra x JOIN @S.threads t ON t.tid = x.tid",
     "SELECT t.thread_id, x.extra FROM @S.thread_extra x JOIN @S.threads t ON t.tid = x.tid",
     "SELECT t.thread_id, x.extra FROM @S.thread_extra x JOIN @S.threads t ON t.tid = x.tid"},
    {"SELECT thread_id, seq, role, created_at, body FROM @S.messages",
     "SELECT t.thread_id, m.seq, m.role, m.created_at, m.body FROM @S.messages m"
     " JOIN @S.threads t ON t.tid = m.tid",
     "SELECT t.thread_id, m.seq, m.role, m.created_at, m.body FROM @S.messages m"
     " JOIN @S.threads t ON t.tid = m.tid",
     "SELECT t.thread_id, m.seq, m.role, m.created_at, m.body FROM @S.messages m"
     " JOIN @S.threads t ON t.tid = m.tid",
     "SELECT t.thread_id, m.seq, m.role, m.created_at, m.body FROM @S.messages m"
     " JOIN @S.threads t ON t.tid = m.tid",
     "SELECT t.thread_id, m.seq, m.role, m.created_at, m.body FROM @S.messages m"
     " JOIN @S.threads t ON t.tid = m.tid"},
    {"SELECT thread_id, key, first_seq, count, created_at FROM @S.idempotency_keys",
     "SELECT t.thread_id, k.key, k.first_seq, k.count, k.created_at FROM @S.idempotency_keys k"
     " JOIN @S.threads t ON t.tid = k.tid",
     "SELECT t.thread_id, k.key, k.first_seq, k.count, k.created_at FROM @S.idempotency_keys k"
     " JOIN @S.threads t ON t.tid = k.tid",
     "SELECT t.thread_id, k.key, k.first_seq, k.count, k.created_at FROM @S.idempotency_keys k"
     " JOIN @S.threads t ON t.tid = k.tid",
     "SELECT t.thread_id, k.key, k.first_seq, k.count, k.created_at FROM @S.idempotency_keys k"
     " JOIN @S.threads t ON t.tid = k.tid",
     "SELECT t.thread_id, k.key, k.first_seq, k.count, k.created_at FROM @S.idempotency_keys k"
     " JOIN @S.threads t ON t.tid = k.tid"},
    {"SELECT thread_id, checkpoint_ns, checkpoint_id, put_seq, parent_id, metadata, body_type,"
     " body, log_length, channels, versions, created_at FROM @S.checkpoints",
     "SELECT t.thread_id, c.checkpoint_ns, c.checkpoint_id, c.put_seq, c.parent_id, c.metadata,"
     " c.body_type, c.body, c.log_length,"
     " ARRAY(SELECT u.ch FROM @S.channel_versions(c.channel_versions) u),"
     " ARRAY(SELECT u.ver FROM @S.channel_versions(c.channel_versions) u), c.created_at"
     " FROM @S.checkpoints c JOIN @S.threads t ON t.tid = c.tid",
     "SELECT t.thread_id, c.checkpoint_ns, c.checkpoint_id, c.put_seq, c.parent_id, c.metadata,"
     " c.body_type, CASE WHEN get_byte(c.body, 0) = 0"
     " THEN substring(c.body FROM 2) END, c.log_length,"
     " ARRAY(SELECT u.ch FROM @S.channel_versions(c.channel_versions) u),"
     " ARRAY(SELECT u.ver FROM @S.channel_versions(c.channel_versions) u), c.created_at"
     " FROM @S.checkpoints c JOIN @S.threads t ON t.tid = c.tid",
     "SELECT t.thread_id, c.checkpoint_ns, @S.id_text(c.checkpoint_id), c.put_seq,"
     " @S.id_text(c.parent_id), c.metadata, c.body_type, CASE WHEN get_byte(c.body, 0) = 0"
     " THEN substring(c.body FROM 2) END, c.log_length,"
     " ARRAY(SELECT u.ch FROM @S.channel_list(c.channel_set, c.versions) u),"
     " ARRAY(SELECT u.ver FROM @S.channel_list(c.channel_set, c.versions) u), c.created_at"
     " FROM @S.checkpoints c JOIN @S.threads t ON t.tid = c.tid",
     "SELECT t.thread_id, c.checkpoint_ns, @S.id_text(c.checkpoint_id), c.put_seq,"
     " @S.id_text(c.parent_id), c.metadata, (SELECT n.name FROM @S.checkpoint_names n"
     " WHERE n.num = c.body_type), CASE WHEN get_byte(c.body, 0) = 0"
     " THEN substring(c.body FROM 2) END, c.log_length,"
     " ARRAY(SELECT (SELECT n.name FROM @S.checkpoint_names n WHERE n.num = u.ch)"
     " FROM @S.channel_list(c.channel_set, c.versions) u),"
     " ARRAY(SELECT @S.ver_text(u.ver) FROM @S.channel_list(c.channel_set, c.versions) u),"
     " c.created_at FROM @S.checkpoints c JOIN @S.threads t ON t.tid = c.tid",
     "SELECT t.thread_id, c.checkpoint_ns, @S.id_text(c.checkpoint_id), c.put_seq,"
     " @S.id_text(c.parent_id), c.metadata, (SELECT n.name FROM @S.checkpoint_names n"
     " WHERE n.num = c.body_type), CASE WHEN get_byte(c.body, 0) = 0"
     " THEN substring(c.body FROM 2) END, c.log_length,"
     " ARRAY(SELECT (SELECT n.name FROM @S.checkpoint_names n WHERE n.num = u.ch)"
     " FROM @S.channel_list(c.channel_set, c.versions) u),"
     " ARRAY(SELECT @S.ver_text(u.ver) FROM @S.channel_list(c.channel_set, c.versions) u),"
     " c.created_at FROM @S.checkpoints c JOIN @S.threads t ON t.tid = c.tid"},
    {"SELECT thread_id, checkpoint_ns, channel, version, type, value FROM @S.checkpoint_blobs",
     "SELECT t.thread_id, b.checkpoint_ns, b.channel, b.version, b.type, b.value"
     " FROM @S.checkpoint_blobs b JOIN @S.threads t ON t.tid = b.tid",
     "SELECT t.thread_id, b.checkpoint_ns, b.channel, b.version, b.type, b.value"
     " FROM @S.checkpoint_blobs b JOIN @S.threads t ON t.tid = b.tid",
     "SELECT t.thread_id, b.checkpoint_ns, b.channel, b.version, b.type, b.value"
     " FROM @S.checkpoint_blobs b JOIN @S.threads t ON t.tid = b.tid",
     "SELECT t.thread_id, b.checkpoint_ns, c.name, @S.ver_text(b.version), y.name, b.value"
     " FROM @S.checkpoint_blobs b JOIN @S.threads t ON t.tid = b.tid"
     " JOIN @S.checkpoint_names c ON c.num = b.channel JOIN @S.checkpoint_names y"
     " ON y.num = b.type",
     "SELECT t.thread_id, b.checkpoint_ns, c.name, @S.ver_text(b.version), y.name, b.value"
     " FROM @S.checkpoint_blobs b JOIN @S.threads t ON t.tid = b.tid"
     " JOIN @S.checkpoint_names c ON c.num = b.channel JOIN @S.checkpoint_names y"
     " ON y.num = b.type"},
    {"SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, task_path, channel, type,"
     " value FROM @S.checkpoint_writes",
     "SELECT t.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx, w.task_path,"
     " w.channel, w.type, w.value FROM @S.checkpoint_writes w JOIN @S.threads t"
     " ON t.tid = w.tid",
     "SELECT t.thread_id, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.idx, w.task_path,"
     " w.channel, w.type, w.value FROM @S.checkpoint_writes w JOIN @S.threads t"
     " ON t.tid = w.tid",
     "SELECT t.thread_id, w.checkpoint_ns, @S.id_text(w.checkpoint_id), @S.id_text(w.task_id),"
     " w.idx, w.task_path, w.channel, w.type, w.value FROM @S.checkpoint_writes w"
     " JOIN @S.threads t ON t.tid = w.tid",
     "SELECT t.thread_id, w.checkpoint_ns, @S.id_text(w.checkpoint_id), @S.id_text(w.task_id),"
     " w.idx, p.name, c.name, y.name, w.value FROM @S.checkpoint_writes w"
     " JOIN @S.threads t ON t.tid = w.tid JOIN @S.checkpoint_names p ON p.num = w.task_path"
     " JOIN @S.checkpoint_names c ON c.num = w.channel"
     " JOIN @S.checkpoint_names y ON y.num = w.type",
     "SELECT t.thread_id, c.checkpoint_ns, @S.id_text(c.checkpoint_id), @S.id_text(w.task_id),"
     " w.idx, p.name, n.name, y.name, w.value FROM @S.checkpoints c"
     " CROSS JOIN LATERAL unnest(c.writes) AS e CROSS JOIN LATERAL @S.write_fields(e) AS w"
     " JOIN @S.threads t ON t.tid = c.tid"
     " JOIN @S.checkpoint_names p ON p.num = w.task_path"
     " JOIN @S.checkpoint_names n ON n.num = w.channel"
     " JOIN @S.checkpoint_names y ON y.num = w.type"}
};

/* The rows of v5_rows' column `layout` (0: version 5, 1: version 6, 2: version 7,
 * 3: version 18, 4: version 19, 5: version 24, the writes in their checkpoints; since
 * version 30 as packed elements),
 * one table a line. */
char *rows_as_text(PGconn *pg, const char *name, int layout)
{
    char *out = strdup("");
    for (size_t i = 0; i < sizeof v5_rows / sizeof *v5_rows; i++) {
        char sql[1024];
        snprintf(sql, sizeof sql, "SELECT count(*) || ': ' || coalesce(string_agg(r::text, ' '"
                 " ORDER BY r::text COLLATE \"C\"), '') FROM (%s) r", v5_rows[i][layout]);
        char *filled = malloc(strlen(sql) * 2 + 256), *o = filled;
        ck_assert_ptr_nonnull(filled);
        for (const char *p = sql; *p;)
            if (p[0] == '@' && p[1] == 'S') {
                o += sprintf(o, "\"%s\"", schema_name(name));
                p += 2;
            } else {
                *o++ = *p++;
            }
        *o = '\0';
        char *rows = query1(pg, filled);
        ck_assert_ptr_nonnull(rows);
        char *more = malloc(strlen(out) + strlen(rows) + 2);
        ck_assert_ptr_nonnull(more);
        sprintf(more, "%s%s\n", out, rows);
        free(out);
        free(rows);
        free(filled);
        out = more;
    }
    return out;
}

/* A version 5 schema with data is migrated on open (one transaction, in
 * place): every row comes back, the same, through the numeric key; the
 * driver reads it all; the expired thread stays expired, the live one keeps
 * its deadline; new writes work on every table. */
START_TEST(test_migration_from_version_5)
{
    schema_at_version("v5", 5);
    PGconn *pg = admin();
    exec_in_schema(pg, schema_name("v5"), v5_data);
    char *before = rows_as_text(pg, "v5", 0);
    ck_assert_msg(strstr(before, "3: ") != NULL, "v5 data: %s", before);
    convo_store *s = open_ok(schema_url("v5", NULL));
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT string_agg(version::text, ',' ORDER BY version)"
             " FROM \"%s\".schema_version", schema_name("v5"));
    char *v = query1(pg, sql);
    ck_assert_str_eq(v, PG_SCHEMA_VERSIONS);
    free(v);
    char *after = rows_as_text(pg, "v5", 5);
    ck_assert_str_eq(after, before);
    free(before);
    free(after);
    /* no text thread id left in a child table, the put index is gone (v6), the
     * log length one too (added in v9, dropped in v18) */
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM information_schema.columns WHERE table_schema = '%s'"
             " AND column_name = 'thread_id' AND table_name <> 'threads'", schema_name("v5"));
    ck_assert_int_eq(query_long(pg, sql), 0);
    snprintf(sql, sizeof sql, "SELECT string_agg(indexname, ' ' ORDER BY indexname)"
             " FROM pg_indexes WHERE schemaname = '%s' AND tablename = 'checkpoints'",
             schema_name("v5"));
    v = query1(pg, sql);
    ck_assert_str_eq(v, "checkpoints_by_ns_put checkpoints_pkey");
    free(v);
    /* messages, extra and key through the driver */
    convo_error err;
    convo_history *h;
    convo_load_opts lo = CONVO_LOAD_OPTS_INIT;
    lo.with_extra = 1;
    ck_assert_int_eq(convo_load(s, "a", &lo, &h, &err), 0);
    ck_assert_int_eq(convo_history_count(h), 3);
    size_t len;
    ck_assert_str_eq(convo_history_message(h, 1, &len), "{\"role\":\"assistant\",\"n\":1}");
    ck_assert_int_eq(len, 26);
    ck_assert_int_eq(convo_history_created_at(h, 0), 1767323045123456LL);
    const char *third = convo_history_message(h, 2, &len);
    ck_assert_int_eq(len, 4);
    ck_assert(memcmp(third, "{}\0\xff", 4) == 0);
    ck_assert_str_eq(convo_history_extra(h), "{\"k\":1,\"s\":\"x\"}");
    convo_history_free(h);
    ck_assert_int_eq(convo_load(s, "b", &lo, &h, &err), 0);
    ck_assert_int_eq(convo_history_length(h), 0);
    ck_assert_str_eq(convo_history_extra(h), "{\"z\":null}");
    convo_history_free(h);
    const char *batch[] = {"{\"role\":\"user\",\"n\":0}", "{\"role\":\"assistant\",\"n\":1}"};
    convo_append_opts o = CONVO_APPEND_OPTS_INIT;
    o.idempotency_key = "k1";
    convo_append_result res;
    ck_assert_int_eq(convo_append(s, "a", batch, NULL, 2, &o, &res, &err), 0);
    ck_assert(res.replayed && res.first_seq == 0 && res.count == 2);
    /* checkpoints: the latest, one by id, the list in put order */
    convo_checkpoint *cp;
    ck_assert_int_eq(convo_checkpoint_get(s, "a", "", NULL, &cp, &err), 0);
    ck_assert_str_eq(convo_checkpoint_id(cp), "c2");
    ck_assert_str_eq(convo_checkpoint_parent_id(cp), "c1");
    ck_assert_int_eq(convo_checkpoint_log_length(cp), 3);
    ck_assert_int_eq(convo_checkpoint_body(cp).len, 10);
    ck_assert_int_eq(convo_checkpoint_channel_count(cp), 2);
    for (size_t i = 0; i < 2; i++) {
        const char *version;
        convo_blob value;
        const char *ch = convo_checkpoint_channel(cp, i, &version, &value);
        if (strcmp(ch, "ch") == 0) {
            ck_assert_str_eq(version, "v2");
            ck_assert(value.len == 1 && memcmp(value.bytes, "2", 1) == 0);
        } else {
            ck_assert_str_eq(ch, "x");
            ck_assert_str_eq(version, "v1"); /* stored by c1, shared */
            ck_assert(value.len == 2 && memcmp(value.bytes, "\0\xff", 2) == 0);
        }
    }
    ck_assert_int_eq(convo_checkpoint_write_count(cp), 2);
    convo_checkpoint_free(cp);
    ck_assert_int_eq(convo_checkpoint_get(s, "a", "", "c1", &cp, &err), 0);
    ck_assert_str_eq(convo_checkpoint_metadata(cp), "{\"step\":1}");
    ck_assert_int_eq(convo_checkpoint_write_count(cp), 0);
    convo_checkpoint_free(cp);
    char ids[256];
    list_ids(s, "a", NULL, NULL, ids, sizeof ids);
    ck_assert_str_eq(ids, "c3 c2 c1");
    /* ttl: the live thread keeps its deadline, the dead one stays dead */
    ck_assert_int_eq(length_of(s, "live"), 1);
    list_ids(s, "live", NULL, NULL, ids, sizeof ids);
    ck_assert_str_eq(ids, "l1");
    snprintf(sql, sizeof sql, "SELECT count(*) FROM \"%s\".threads WHERE thread_id = 'live'"
             " AND expires_at > now() + interval '50 minutes'", schema_name("v5"));
    ck_assert_int_eq(query_long(pg, sql), 1);
    h = NULL;
    ck_assert_int_eq(convo_load(s, "dead", NULL, &h, &err), CONVO_ENOTFOUND);
    ck_assert_int_eq(convo_checkpoint_get(s, "dead", "", NULL, &cp, &err), CONVO_ENOTFOUND);
    ck_assert(list_has(s, "a") && list_has(s, "b") && list_has(s, "live") && !list_has(s, "dead"));
    /* writing to the dead thread starts it afresh: its old rows go */
    ck_assert_int_eq(append1(s, "dead", &err), 0);
    ck_assert_int_eq(length_of(s, "dead"), 1);
    ck_assert_int_eq(rows_of(pg, "v5", "dead"), 2); /* the thread and its message */
    /* new writes on the migrated schema */
    ck_assert_int_eq(append1(s, "a", &err), 0);
    ck_assert_int_eq(length_of(s, "a"), 4);
    put_checkpoint(s, "a", "c4");
    list_ids(s, "a", NULL, NULL, ids, sizeof ids);
    ck_assert_str_eq(ids, "c4 c3 c2 c1");
    ck_assert_int_eq(append1(s, "new", &err), 0);
    ck_assert_int_eq(convo_thread_fork(s, "a", "fork", 2, &err), 0);
    ck_assert_int_eq(length_of(s, "fork"), 2);
    ck_assert_int_eq(convo_checkpoint_prune(s, "a", 1, &err), 0);
    list_ids(s, "a", NULL, NULL, ids, sizeof ids);
    ck_assert_str_eq(ids, "c4 c3");
    ck_assert_int_eq(convo_thread_delete(s, "a", &err), 0);
    ck_assert_int_eq(rows_of(pg, "v5", "a"), 0);
    convo_close(s);
    PQfinish(pg);
    drop_schema("v5");
}
END_TEST

/* A version 6 schema with data is migrated on open: every body gets the byte
 * that says "as given" and nothing else changes; the driver reads the bodies
 * back; a body put now is deflated when that makes it smaller, and stored as
 * given when not. */
START_TEST(test_migration_from_version_6)
{
    schema_at_version("v6", 6);
    PGconn *pg = admin();
    exec_in_schema(pg, schema_name("v6"), v5_data);
    char *before = rows_as_text(pg, "v6", 1);
    ck_assert_msg(strstr(before, "7b22626f6479223a327d") != NULL, "v6 data: %s", before);
    convo_store *s = open_ok(schema_url("v6", NULL));
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT string_agg(version::text, ',' ORDER BY version)"
             " FROM \"%s\".schema_version", schema_name("v6"));
    char *v = query1(pg, sql);
    ck_assert_str_eq(v, PG_SCHEMA_VERSIONS);
    free(v);
    char *after = rows_as_text(pg, "v6", 5);
    ck_assert_str_eq(after, before);
    free(before);
    free(after);
    convo_error err;
    convo_checkpoint *cp;
    ck_assert_int_eq(convo_checkpoint_get(s, "a", "", "c2", &cp, &err), 0);
    ck_assert(convo_checkpoint_body(cp).len == 10 &&
              memcmp(convo_checkpoint_body(cp).bytes, "{\"body\":2}", 10) == 0);
    ck_assert_str_eq(convo_checkpoint_body(cp).type, "json");
    convo_checkpoint_free(cp);
    ck_assert_int_eq(convo_checkpoint_get(s, "a", "sub", "c3", &cp, &err), 0);
    ck_assert_ptr_null(convo_checkpoint_body(cp).type);
    convo_checkpoint_free(cp);
    /* new bodies: a repetitive one deflated, a short one and an empty one as given */
    char big[2000];
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = "{\"k\":\"0123456789\"},"[i % 19];
    const struct { const char *id; const char *bytes; size_t len; int kind; } bodies[] = {
        {"z1", big, sizeof big, 1}, {"z2", "{\"short\":1}", 11, 0}, {"z3", "", 0, 0},
    };
    for (size_t i = 0; i < 3; i++) {
        convo_checkpoint_in in = CONVO_CHECKPOINT_IN_INIT;
        in.thread_id = "z";
        in.checkpoint_id = bodies[i].id;
        in.body = (convo_blob){"json", bodies[i].bytes, bodies[i].len};
        ck_assert_msg(convo_checkpoint_put(s, &in, &err) == 0, "put: %s", err.message);
        snprintf(sql, sizeof sql, "SELECT get_byte(c.body, 0) * 100000 + octet_length(c.body)"
                 " FROM \"%s\".checkpoints c WHERE c.checkpoint_id = '%s'",
                 schema_name("v6"), bodies[i].id);
        long stored = query_long(pg, sql);
        ck_assert_int_eq(stored / 100000, bodies[i].kind);
        if (bodies[i].kind == 1)
            ck_assert_int_lt(stored % 100000, 200);
        else
            ck_assert_int_eq(stored % 100000, (long)bodies[i].len + 1);
        ck_assert_int_eq(convo_checkpoint_get(s, "z", "", bodies[i].id, &cp, &err), 0);
        ck_assert_int_eq(convo_checkpoint_body(cp).len, bodies[i].len);
        ck_assert(bodies[i].len == 0 ||
                  memcmp(convo_checkpoint_body(cp).bytes, bodies[i].bytes, bodies[i].len) == 0);
        convo_checkpoint_free(cp);
    }
    /* a stored body in neither form, or deflated wrong, is corrupt, not returned */
    static const char *const broken[] = {
        "'\\x02'::bytea || body",                   /* unknown first byte */
        "'\\x'::bytea",                             /* no first byte */
        "'\\x01000007d0'::bytea || substring(body FROM 6 FOR 20)", /* stream cut */
        "'\\x01000007d1'::bytea || substring(body FROM 6)",        /* length wrong */
        "'\\x01000000'::bytea",                     /* no length */
        "'\\x017fffffff'::bytea || substring(body FROM 6)",      /* length impossible */
    };
    for (size_t i = 0; i < sizeof broken / sizeof *broken; i++) {
        snprintf(sql, sizeof sql, "UPDATE \"%s\".checkpoints SET body = %s"
                 " WHERE checkpoint_id = 'z%zu'", schema_name("v6"), broken[i], i + 4);
        convo_checkpoint_in in = CONVO_CHECKPOINT_IN_INIT;
        char id[8];
        snprintf(id, sizeof id, "z%zu", i + 4);
        in.thread_id = "z";
        in.checkpoint_id = id;
        in.body = (convo_blob){"json", big, sizeof big};
        ck_assert_int_eq(convo_checkpoint_put(s, &in, &err), 0);
        free(query1(pg, sql));
        cp = NULL;
        ck_assert_msg(convo_checkpoint_get(s, "z", "", id, &cp, &err) == CONVO_ECORRUPT,
                      "broken body %zu read", i);
        ck_assert_ptr_null(cp);
    }
    convo_close(s);
    PQfinish(pg);
    drop_schema("v6");
}
END_TEST

/* Migrations from an empty schema, each in order on its own and recorded (as
 * the driver runs them: migrate-begin.sql, then each migrate-N.sql with
 * migrate-record.sql, then COMMIT); version.sql then says the last N. Then,
 * against that schema, files that create (CREATE, SET) run, every statement
 * (SELECT, WITH, INSERT, UPDATE, DELETE) is PREPAREd, files that DROP run last.
 * Every .sql file in the folder is loaded; the driver opens the result as
 * current (it would migrate further, or refuse, if its SQL differed). */
START_TEST(test_sql_files_load_on_their_own)
{
    static sql_file files[128];
    const char *schema = schema_name("sqlfiles");
    drop_schema("sqlfiles");
    size_t n = read_sql_files(files, 128, schema);
    ck_assert_msg(n > 10, "only %zu .sql files in %s", n, POSTGRES_SQL_DIR);
    PGconn *pg = admin();
    PQclear(PQexec(pg, "SET client_min_messages = warning"));
    sql_file *begin = sql_find(files, n, "migrate-begin.sql");
    sql_file *record = sql_find(files, n, "migrate-record.sql");
    sql_file *version = sql_find(files, n, "version.sql");
    ck_assert(begin && record && version);
    sql_exec(pg, begin);
    int last = 0;
    for (int v = 1;; v++) {
        char name[64];
        snprintf(name, sizeof name, "migrate-%d.sql", v);
        sql_file *m = sql_find(files, n, name);
        if (!m)
            break;
        sql_exec(pg, m);
        char number[16];
        snprintf(number, sizeof number, "%d", v);
        const char *values[1] = {number};
        PGresult *r = PQexecParams(pg, record->text, 1, NULL, values, NULL, NULL, 0);
        ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "%s after %s: %s", record->name,
                      name, PQresultErrorMessage(r));
        PQclear(r);
        last = v;
    }
    record->used++;
    sql_file *commit = sql_find(files, n, "migrate-commit.sql");
    sql_file *rollback = sql_find(files, n, "migrate-rollback.sql");
    sql_file *dealloc = sql_find(files, n, "bench_deallocate.sql");
    sql_file *unseal_begin = sql_find(files, n, "unseal_begin.sql");
    ck_assert(commit && rollback && dealloc && unseal_begin);
    sql_exec(pg, commit);
    /* the other transaction words: an unseal's begin (v42) opens a transaction
     * a rollback ends, the deallocation forgets a statement of that name */
    sql_exec(pg, unseal_begin);
    sql_exec(pg, rollback);
    PQclear(PQprepare(pg, "convo_bench_raw", "SELECT 1", 0, NULL));
    sql_exec(pg, dealloc);
    ck_assert_int_ge(last, 6);
    char *at = query1(pg, version->text);
    ck_assert_msg(at && atoi(at) == last, "version.sql says %s after migrate-%d.sql", at, last);
    free(at);
    version->used++;
    for (int pass = 0; pass < 3; pass++) {
        for (size_t i = 0; i < n; i++) {
            char word[16];
            first_word(files[i].text, word, sizeof word);
            /* run as they are: definitions, settings, DO blocks, a vacuum (no parameters) */
            int create = strcmp(word, "CREATE") == 0 || strcmp(word, "SET") == 0 ||
                         strcmp(word, "DO") == 0 || strcmp(word, "VACUUM") == 0;
            int drop = strcmp(word, "DROP") == 0;
            if (files[i].used || (pass == 0 && !create) || (pass == 1 && (create || drop)) ||
                (pass == 2 && !drop))
                continue;
            if (pass != 1) {
                sql_exec(pg, &files[i]);
                continue;
            }
            ck_assert_msg(strcmp(word, "SELECT") == 0 || strcmp(word, "WITH") == 0 ||
                              strcmp(word, "INSERT") == 0 || strcmp(word, "UPDATE") == 0 ||
                              strcmp(word, "DELETE") == 0,
                          "%s: does not start with a statement this test knows (%s)",
                          files[i].name, word);
            char name[80];
            snprintf(name, sizeof name, "sqlfiles_%zu", i);
            /* the thread list shapes' parameters are typed by the driver (a
             * shape uses some): text, timestamptz, int8, bool, bool, text, bool */
            static const Oid list_types[] = {25, 1184, 20, 16, 16, 25, 16};
            int list = strncmp(files[i].name, "thread_list_", 12) == 0;
            PGresult *r = PQprepare(pg, name, files[i].text, list ? 7 : 0,
                                    list ? list_types : NULL);
            ck_assert_msg(PQresultStatus(r) == PGRES_COMMAND_OK, "PREPARE %s: %s",
                          files[i].name, PQresultErrorMessage(r));
            PQclear(r);
            files[i].used++;
        }
    }
    for (size_t i = 0; i < n; i++) {
        ck_assert_msg(files[i].used == 1, "%s loaded %d times", files[i].name, files[i].used);
        free(files[i].text);
    }
    /* the driver finds the schema current and works on it */
    convo_store *s = open_ok(schema_url("sqlfiles", NULL));
    convo_error err;
    ck_assert_int_eq(append1(s, "t", &err), 0);
    ck_assert_int_eq(length_of(s, "t"), 1);
    convo_close(s);
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT max(version) FROM \"%s\".schema_version", schema);
    ck_assert_int_eq(query_long(pg, sql), last);
    PQfinish(pg);
    drop_schema("sqlfiles");
}
END_TEST

void postgres_add_schema_tests(Suite *s)
{
    TCase *tc = tcase_create("schema");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_schema_created_and_versioned);
    tcase_add_test(tc, test_newer_schema_not_supported);
    tcase_add_test(tc, test_negative_schema_version_refused);
    tcase_add_test(tc, test_concurrent_openers_migrate_once);
    tcase_add_test(tc, test_schemas_are_separate);
    tcase_add_test(tc, test_migration_from_version_3);
    tcase_add_test(tc, test_migration_from_version_4);
    tcase_add_test(tc, test_migration_from_version_5);
    tcase_add_test(tc, test_migration_from_version_6);
    tcase_add_test(tc, test_sql_files_load_on_their_own);
    suite_add_tcase(s, tc);
}
