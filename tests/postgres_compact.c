/* postgres_compact.c — a checkpoint row's versions as one bytea and its
 * metadata as the json text put (schema version 23), its pending writes in
 * the row (24, 25): versions of every length back exactly (one over 255 bytes
 * takes 4-byte lengths), the metadata stored as its compact text and filtered
 * by containment, writes merged and kept under concurrency, the reads planned
 * under the JIT threshold, and a version 22 schema migrated with every row the
 * same. */
#include "postgres.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define UUID_A "1f1e9eee-1758-6660-8003-f7e2ee72e981"
#define UUID_B "1f1e9eee-1758-6660-8003-f7e2ee72e982"
#define VER_JS "0000000000000599.k27lp6lcw6"
#define META "{\"source\":\"loop\",\"step\":3,\"writes\":{\"model\":{\"n\":[1,2]}},\"z\":null}"

static char long_version[301];

static void put3(convo_store *s, const char *id, const char *v1, const char *v2,
                 const char *v3, const char *metadata)
{
    convo_blob value = {"json", "null", 4};
    convo_channel_in ch[3] = {{"messages", v1, &value},
                              {"branch:to:model", v2, &value},
                              {"__start__", v3, &value}};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = "t";
    cp.checkpoint_id = id;
    cp.metadata_json = metadata;
    cp.channels = ch;
    cp.nchannels = 3;
    convo_error err;
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put %s: %s", id, err.message);
}

static void versions_are(convo_store *s, const char *id, const char *v1, const char *v2,
                         const char *v3)
{
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_get(s, "t", "", id, &cp, &err) == 0, "get %s: %s", id,
                  err.message);
    ck_assert_uint_eq(convo_checkpoint_channel_count(cp), 3);
    const char *want[3] = {v1, v2, v3};
    const char *names[3] = {"messages", "branch:to:model", "__start__"};
    for (size_t i = 0; i < 3; i++) {
        const char *ver = NULL;
        convo_blob value;
        const char *ch = convo_checkpoint_channel(cp, i, &ver, &value);
        size_t k = 0;
        while (k < 3 && strcmp(names[k], ch) != 0)
            k++;
        ck_assert_msg(k < 3, "channel %s", ch);
        ck_assert_str_eq(ver, want[k]);
        ck_assert(value.type && strcmp(value.type, "json") == 0 && value.len == 4);
    }
    convo_checkpoint_free(cp);
}

static char *stored(PGconn *pg, const char *schema, const char *what, const char *id_hex)
{
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT %s FROM \"%s\".checkpoints c"
             " WHERE c.checkpoint_id = '\\x%s'", what, schema, id_hex);
    return query1(pg, sql);
}

/* Versions of 1, 2, 9, 27 and 300 bytes back exactly; the stored value is the
 * width of a length, the lengths and the versions, nothing more. */
START_TEST(test_versions_joined)
{
    const char *name = "vjoin", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    put3(s, UUID_A, VER_JS, "7", "v-\xc3\xa9t\xc3\xa9-7", "{}");
    put3(s, UUID_B, long_version, VER_JS, "!x", "{}");
    versions_are(s, UUID_A, VER_JS, "7", "v-\xc3\xa9t\xc3\xa9-7");
    versions_are(s, UUID_B, long_version, VER_JS, "!x");
    convo_close(s);
    PGconn *pg = admin();
    /* 1 + 3 lengths + 16 (JS packed) + 1 + 9 */
    char *v = stored(pg, schema, "encode(substring(c.versions FOR 4), 'hex') || ' ' ||"
                     " octet_length(c.versions)", "1f1e9eee175866608003f7e2ee72e981");
    ck_assert_str_eq(v, "01100109 30");
    free(v);
    /* 1 + 3 four-byte lengths + 300 + 16 + 2 */
    v = stored(pg, schema, "encode(substring(c.versions FOR 5), 'hex') || ' ' ||"
               " octet_length(c.versions)", "1f1e9eee175866608003f7e2ee72e982");
    ck_assert_str_eq(v, "040000012c 331");
    free(v);
    PQfinish(pg);
    drop_schema(name);
}
END_TEST

/* A versions value that does not decode (lengths past its end, no width, a
 * width past its end, empty) is CONVO_ECORRUPT on get, latest and list, not
 * the server's "index out of valid range" as a bad argument (CONVO_EINVAL);
 * so is one that reads as other versions (schema 28: a length one short, a
 * byte left over, a width of 0 or 3; since schema 37 a first byte 2 is the
 * form without repeats, tests/postgres_repeats.c). */
START_TEST(test_corrupt_versions_are_ecorrupt)
{
    const char *name = "vcorrupt", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    put3(s, UUID_A, VER_JS, "7", "!x", "{}");
    PGconn *pg = admin();
    const char *bad[] = {"'\\x'", "'\\x01'", "'\\x0105'", "'\\x01ff0161'",
                         "'\\x020000000100'", "'\\x01100109'", NULL, NULL, NULL, NULL};
    /* the stored value: width 1, lengths 16, 1, 2, the versions (VER_JS
     * packed, "7", "!x"); with one length short, a byte more, width 0 or 3 */
    PGconn *pg0 = admin();
    char *good = stored(pg0, schema, "encode(c.versions, 'hex')",
                        "1f1e9eee175866608003f7e2ee72e981");
    PQfinish(pg0);
    ck_assert_int_eq(strncmp(good, "01100102", 8), 0);
    char variants[4][160];
    snprintf(variants[0], sizeof variants[0], "'\\x010f%s'", good + 4);
    snprintf(variants[1], sizeof variants[1], "'\\x%s00'", good);
    snprintf(variants[2], sizeof variants[2], "'\\x00%s'", good + 2);
    snprintf(variants[3], sizeof variants[3], "'\\x03%s'", good + 2); /* v37: 2 is a form */
    free(good);
    for (int i = 0; i < 4; i++)
        bad[6 + i] = variants[i];
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        char sql[320];
        snprintf(sql, sizeof sql, "UPDATE @S.checkpoints SET versions = %s::bytea", bad[i]);
        exec_in_schema(pg, schema, sql);
        convo_checkpoint *cp = NULL;
        convo_error err;
        int rc = convo_checkpoint_get(s, "t", "", UUID_A, &cp, &err);
        ck_assert_msg(rc == CONVO_ECORRUPT, "get with versions %s: %d %s", bad[i], rc,
                      err.message);
        ck_assert_ptr_null(cp);
        rc = convo_checkpoint_get(s, "t", "", NULL, &cp, &err);
        ck_assert_msg(rc == CONVO_ECORRUPT, "latest with versions %s: %d %s", bad[i], rc,
                      err.message);
        convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
        o.thread_id = "t";
        convo_checkpoint_set *set = NULL;
        rc = convo_checkpoint_list(s, &o, &set, &err);
        ck_assert_msg(rc == CONVO_ECORRUPT, "list with versions %s: %d %s", bad[i], rc,
                      err.message);
        ck_assert_ptr_null(set);
    }
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* A pending write whose channel number has no name, or whose task id,
 * channel or idx is NULL in the row's pending_write[] (a type without
 * constraints), is CONVO_ECORRUPT on get and list, not a write named "";
 * (v30) an element shorter than its header or task id also on put_writes,
 * whose merge reads the stored elements (not CONVO_EINVAL); (v33) a NULL
 * element too, which that merge dropped without a word. */
static void write1(convo_store *s, const char *id, const char *task, int64_t idx,
                   const char *value, int want);

START_TEST(test_corrupt_writes_are_ecorrupt)
{
    const char *name = "wcorrupt", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    PGconn *pg = admin();
    /* (v30) packed elements: an unnamed channel number, a NULL element, one
     * shorter than its header, one shorter than its task id's length */
    /* (v39) the short form: a channel number no name has, NULL, cut inside
     * the task id, a task id's length past the element, an unknown form */
    const char *set[] = {"writes[1] = overlay(writes[1] PLACING '\\xffff' FROM 6 FOR 2)",
                         "writes[1] = NULL",
                         "writes[1] = substring(writes[1] FROM 1 FOR 20)",
                         "writes[1] = overlay(writes[1] PLACING '\\xc8' FROM 10 FOR 1)",
                         "writes[1] = overlay(writes[1] PLACING '\\x07' FROM 1 FOR 1)"};
    for (size_t i = 0; i < sizeof set / sizeof *set; i++) {
        exec_in_schema(pg, schema, "DELETE FROM @S.checkpoints");
        put3(s, UUID_A, VER_JS, "7", "!x", "{}");
        write1(s, UUID_A, UUID_B, 0, "1", 0);
        convo_checkpoint *cp = NULL;
        convo_error err;
        ck_assert_int_eq(convo_checkpoint_get(s, "t", "", UUID_A, &cp, &err), 0);
        ck_assert_uint_eq(convo_checkpoint_write_count(cp), 1);
        convo_checkpoint_free(cp);
        cp = NULL;
        char sql[160];
        snprintf(sql, sizeof sql, "UPDATE @S.checkpoints SET %s", set[i]);
        exec_in_schema(pg, schema, sql);
        int rc = convo_checkpoint_get(s, "t", "", UUID_A, &cp, &err);
        ck_assert_msg(rc == CONVO_ECORRUPT, "get after %s: %d %s", set[i], rc, err.message);
        ck_assert_ptr_null(cp);
        convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
        o.thread_id = "t";
        convo_checkpoint_set *cs = NULL;
        rc = convo_checkpoint_list(s, &o, &cs, &err);
        ck_assert_msg(rc == CONVO_ECORRUPT, "list after %s: %d %s", set[i], rc, err.message);
        ck_assert_ptr_null(cs);
        if (i < 1) /* the elements that do not decode: a write merged in reads them */
            continue;
        convo_write_in w = {1, "messages", {"json", "2", 1}};
        rc = convo_checkpoint_put_writes(s, "t", "", UUID_A, UUID_B, "~p", &w, 1, &err);
        ck_assert_msg(rc == CONVO_ECORRUPT, "put_writes after %s: %d %s", set[i], rc,
                      err.message);
        ck_assert_int_eq(convo_checkpoint_put_writes(s, "t", "", UUID_A, UUID_B, "~p", &w, 1,
                                                     NULL),
                         CONVO_ECORRUPT);
        /* a value type that is not UTF-8 is still the caller's */
        convo_write_in bad = {2, "messages", {"\xff", "2", 1}};
        ck_assert_int_eq(convo_checkpoint_put_writes(s, "t", "", UUID_A, UUID_B, "~p", &bad, 1,
                                                     NULL),
                         CONVO_EINVAL);
        /* (v33) nothing was merged: the element is still there, still corrupt */
        ck_assert_int_eq(convo_checkpoint_get(s, "t", "", UUID_A, &cp, &err), CONVO_ECORRUPT);
    }
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* The metadata is kept as the compact text the library passes (smaller than
 * jsonb), read back as the same object, and a list filters it by containment. */
START_TEST(test_metadata_as_text)
{
    const char *name = "meta", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    put3(s, UUID_A, "1", "1", "1", META);
    put3(s, UUID_B, "2", "2", "2", "{\"source\":\"input\",\"step\":4}");
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", UUID_A, &cp, &err), 0);
    ck_assert_str_eq(convo_checkpoint_metadata(cp), META);
    convo_checkpoint_free(cp);
    const char *filters[4] = {"{\"writes\":{\"model\":{\"n\":[2]}}}", "{\"step\":4}",
                              "{\"writes\":{\"model\":{\"n\":[3]}}}", "{\"z\":null}"};
    const char *found[4] = {UUID_A, UUID_B, NULL, UUID_A};
    for (int i = 0; i < 4; i++) {
        convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
        o.thread_id = "t";
        o.filter_json = filters[i];
        convo_checkpoint_set *set = NULL;
        ck_assert_msg(convo_checkpoint_list(s, &o, &set, &err) == 0, "%s", err.message);
        ck_assert_uint_eq(convo_checkpoint_set_count(set), found[i] ? 1 : 0);
        if (found[i])
            ck_assert_str_eq(convo_checkpoint_id(convo_checkpoint_set_get(set, 0)), found[i]);
        convo_checkpoint_set_free(set);
    }
    convo_close(s);
    PGconn *pg = admin();
    /* (v36) packed by meta_pack(): read back by meta_text(), smaller still */
    char what[256];
    snprintf(what, sizeof what, "\"%s\".meta_text(c.metadata) || ' ' ||"
             " (pg_column_size(c.metadata) < pg_column_size(\"%s\".meta_text(c.metadata)::json))"
             " || ' ' || (pg_column_size(c.metadata) < pg_column_size(\"%s\".meta_text("
             "c.metadata)::jsonb))", schema, schema, schema);
    char *v = stored(pg, schema, what, "1f1e9eee175866608003f7e2ee72e981");
    ck_assert_str_eq(v, META " true true");
    free(v);
    PQfinish(pg);
    drop_schema(name);
}
END_TEST

static void write1(convo_store *s, const char *id, const char *task, int64_t idx,
                   const char *value, int want)
{
    convo_write_in w = {idx, "messages", {"json", value, strlen(value)}};
    convo_error err;
    ck_assert_msg(convo_checkpoint_put_writes(s, "t", "", id, task, "~p", &w, 1, &err) == want,
                  "write %s %lld: %s", task, (long long)idx, err.message);
}

/* (v24) The pending writes are an array in their checkpoint's row (v25: in
 * the order written; the library sorts them): idx >= 0 idempotent, idx < 0
 * replaced, a put again of the checkpoint keeps them, none for a checkpoint
 * that is not there, and no writes table. */
START_TEST(test_writes_in_the_row)
{
    const char *name = "wrow", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    put3(s, UUID_A, "1", "1", "1", "{}");
    write1(s, UUID_A, UUID_B, 1, "11", 0);
    write1(s, UUID_A, UUID_B, 0, "10", 0);
    write1(s, UUID_A, UUID_B, 0, "99", 0);  /* kept as first written */
    write1(s, UUID_A, UUID_B, -1, "98", 0);
    write1(s, UUID_A, UUID_B, -1, "-1", 0); /* replaced */
    write1(s, UUID_A, "task-a", 0, "20", 0);
    write1(s, UUID_B, UUID_B, 0, "30", CONVO_ENOTFOUND);
    put3(s, UUID_A, "2", "2", "2", "{}");   /* the same checkpoint again */
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", UUID_A, &cp, &err), 0);
    ck_assert_uint_eq(convo_checkpoint_write_count(cp), 4);
    const char *want[4][3] = {{UUID_B, "-1", "-1"}, {UUID_B, "0", "10"}, {UUID_B, "1", "11"},
                              {"task-a", "0", "20"}};
    for (size_t i = 0; i < 4; i++) {
        const char *path = NULL, *channel = NULL;
        int64_t idx = 0;
        convo_blob value;
        ck_assert_str_eq(convo_checkpoint_write(cp, i, &path, &idx, &channel, &value),
                         want[i][0]);
        ck_assert_int_eq(idx, atoi(want[i][1]));
        ck_assert_str_eq(path, "~p");
        ck_assert(value.len == strlen(want[i][2]) &&
                  memcmp(value.bytes, want[i][2], value.len) == 0);
    }
    convo_checkpoint_free(cp);
    convo_close(s);
    PGconn *pg = admin();
    char what[256];
    snprintf(what, sizeof what, "cardinality(c.writes) || ' ' ||"
             " (to_regclass('\"%s\".checkpoint_writes') IS NULL)", schema);
    char *v = stored(pg, schema, what, "1f1e9eee175866608003f7e2ee72e981");
    ck_assert_str_eq(v, "4 true");
    free(v);
    PQfinish(pg);
    drop_schema(name);
}
END_TEST

typedef struct {
    convo_store *s;
    const char *task;
    int rc;
} writer;

static void *write_task(void *arg)
{
    writer *w = arg;
    convo_write_in in = {0, "messages", {"json", "1", 1}};
    convo_error err;
    w->rc = convo_checkpoint_put_writes(w->s, "t", "", UUID_A, w->task, "~p", &in, 1, &err);
    return NULL;
}

/* (v24) Two tasks' writes to one checkpoint at once: both update its row, the
 * second waits for the first's lock and merges into what it wrote (READ
 * COMMITTED re-reads the row), so neither is lost. The row is held locked
 * until both wait for it. */
START_TEST(test_concurrent_writes_both_kept)
{
    const char *name = "wboth", *schema = schema_name(name);
    char app[64], more[128];
    snprintf(app, sizeof app, "pgx_wboth_%08x", run_id);
    snprintf(more, sizeof more, "application_name=%s&pool=1", app);
    convo_store *s = open_ok(schema_url(name, NULL));
    put3(s, UUID_A, "1", "1", "1", "{}");
    writer w[2] = {{open_ok(schema_url(name, more)), UUID_B, -1},
                   {open_ok(schema_url(name, more)), "task-a", -1}};
    PGconn *holder = admin(), *pg = admin();
    char sql[512];
    snprintf(sql, sizeof sql, "BEGIN; SELECT 1 FROM \"%s\".checkpoints FOR UPDATE", schema);
    free(query1(holder, sql));
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, write_task, &w[i]);
    snprintf(sql, sizeof sql, "SELECT count(*) FROM pg_stat_activity WHERE"
             " application_name = '%s' AND wait_event_type = 'Lock'", app);
    for (int i = 0; i < 200 && query_long(pg, sql) < 2; i++)
        usleep(50 * 1000);
    ck_assert_int_eq(query_long(pg, sql), 2);
    free(query1(holder, "COMMIT"));
    for (int i = 0; i < 2; i++) {
        pthread_join(th[i], NULL);
        ck_assert_int_eq(w[i].rc, 0);
        convo_close(w[i].s);
    }
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", UUID_A, &cp, &err), 0);
    ck_assert_uint_eq(convo_checkpoint_write_count(cp), 2);
    convo_checkpoint_free(cp);
    convo_close(s);
    PQfinish(holder);
    PQfinish(pg);
    drop_schema(name);
}
END_TEST

/* (v27) In a table never analyzed, a write finds its checkpoint through the
 * primary key: 200 checkpoints each with a write read nothing of
 * checkpoints_by_ns_put (the plan on it filtered checkpoint_id over the
 * thread: about 20,000 entries for these 200 writes). */
START_TEST(test_writes_use_the_primary_key_unanalyzed)
{
    const char *name = "wpkey", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    for (int i = 1; i <= 200; i++) {
        char id[64];
        snprintf(id, sizeof id, "1f1e9eee-1758-6660-8003-%012d", i);
        convo_blob value = {"json", "null", 4};
        convo_channel_in ch[1] = {{"messages", "1", &value}};
        convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
        cp.thread_id = "t";
        cp.checkpoint_id = id;
        cp.channels = ch;
        cp.nchannels = 1;
        convo_error err;
        ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put: %s", err.message);
        write1(s, id, UUID_B, 0, "1", 0);
    }
    convo_close(s); /* its session ends: its counts reach the statistics */
    PGconn *pg = admin();
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT reltuples < 0 FROM pg_class WHERE oid ="
             " '\"%s\".checkpoints'::regclass", schema);
    char *never = query1(pg, sql);
    snprintf(sql, sizeof sql, "SELECT sum(idx_tup_read) FILTER (WHERE indexrelname ="
             " 'checkpoints_by_ns_put') * 1000000 + sum(idx_scan) FILTER (WHERE indexrelname"
             " = 'checkpoints_pkey') FROM pg_stat_user_indexes WHERE schemaname = '%s'", schema);
    long counts = 0;
    for (int i = 0; i < 100 && (counts = query_long(pg, sql)) % 1000000 == 0; i++)
        usleep(50000);
    printf("postgres_compact: never analyzed %s, by_ns_put entries read %ld, pkey scans %ld\n",
           never, counts / 1000000, counts % 1000000);
    ck_assert_msg(counts / 1000000 < 1000, "checkpoints_by_ns_put read %ld entries",
                  counts / 1000000);
    ck_assert_int_ge(counts % 1000000, 200);
    free(never);
    PQfinish(pg);
    drop_schema(name);
}
END_TEST

/* Reads by id in a new store: a handle analyzes a checkpoints table the server
 * never analyzed after its 128th put (checkpoint_analyze.sql), so a get by id
 * and a list before an id are planned on checkpoints_pkey. Without it each of
 * these 200 gets read the thread's checkpoints through checkpoints_by_ns_put
 * with the id as a filter: 44,040 entries for the gets and lists below. */
START_TEST(test_reads_by_id_in_a_new_store)
{
    const char *name = "rpkey", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    char ids[200][64];
    for (int i = 0; i < 200; i++) {
        snprintf(ids[i], sizeof ids[i], "1f1e9eee-1758-6660-8003-%012d", i + 1);
        convo_blob value = {"json", "null", 4};
        convo_channel_in ch[1] = {{"messages", "1", &value}};
        convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
        cp.thread_id = "t";
        cp.checkpoint_id = ids[i];
        cp.channels = ch;
        cp.nchannels = 1;
        convo_error err;
        ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put: %s", err.message);
    }
    for (int i = 0; i < 200; i++) {
        convo_error err;
        convo_checkpoint *cp = NULL;
        ck_assert_msg(convo_checkpoint_get(s, "t", "", ids[i], &cp, &err) == 0,
                      "get %s: %s", ids[i], err.message);
        ck_assert_str_eq(convo_checkpoint_id(cp), ids[i]);
        convo_checkpoint_free(cp);
        if (i % 10 == 9) {
            convo_checkpoint_list_opts lo = CONVO_CHECKPOINT_LIST_OPTS_INIT;
            lo.thread_id = "t";
            lo.checkpoint_ns = "";
            lo.before = ids[i];
            lo.limit = 2;
            convo_checkpoint_set *set = NULL;
            ck_assert_msg(convo_checkpoint_list(s, &lo, &set, &err) == 0, "list: %s",
                          err.message);
            ck_assert_uint_eq(convo_checkpoint_set_count(set), 2);
            convo_checkpoint_set_free(set);
        }
    }
    convo_close(s); /* its session ends: its counts reach the statistics */
    PGconn *pg = admin();
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT reltuples >= 0 FROM pg_class WHERE oid ="
             " '\"%s\".checkpoints'::regclass", schema);
    char *analyzed = query1(pg, sql);
    /* by_ns_put entries read + 1,000,000 x pkey scans; the 20 lists' pages read
     * 2-3 entries each on by_ns_put, a get none */
    snprintf(sql, sizeof sql, "SELECT sum(idx_tup_read) FILTER (WHERE indexrelname ="
             " 'checkpoints_by_ns_put') + 1000000 * sum(idx_scan) FILTER (WHERE indexrelname"
             " = 'checkpoints_pkey') FROM pg_stat_user_indexes WHERE schemaname = '%s'", schema);
    long counts = 0;
    for (int i = 0; i < 100 && (counts = query_long(pg, sql)) / 1000000 < 200; i++)
        usleep(50000);
    printf("postgres_compact: analyzed %s; 200 puts, 200 gets and 20 lists read %ld"
           " by_ns_put entries, %ld pkey scans\n", analyzed, counts % 1000000, counts / 1000000);
    ck_assert_str_eq(analyzed, "t");
    ck_assert_msg(counts % 1000000 < 1000, "checkpoints_by_ns_put read %ld entries",
                  counts % 1000000);
    free(analyzed);
    PQfinish(pg);
    drop_schema(name);
}
END_TEST

/* The planner's total cost of EXECUTE stmt on pg (generic plan). */
static double plan_cost(PGconn *pg, const char *execute)
{
    char sql[512];
    snprintf(sql, sizeof sql, "EXPLAIN (FORMAT JSON) %s", execute);
    char *plan = query1(pg, sql);
    ck_assert_ptr_nonnull(plan);
    const char *at = strstr(plan, "\"Total Cost\": ");
    ck_assert_ptr_nonnull(at);
    double cost = atof(at + strlen("\"Total Cost\": "));
    free(plan);
    return cost;
}

/* The shared buffers EXECUTE stmt reads (EXPLAIN ANALYZE, the plan's total). */
static long plan_buffers(PGconn *pg, const char *execute)
{
    char sql[512];
    snprintf(sql, sizeof sql, "EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) %s", execute);
    char *plan = query1(pg, sql);
    ck_assert_ptr_nonnull(plan);
    const char *at = strstr(plan, "\"Shared Hit Blocks\": ");
    ck_assert_ptr_nonnull(at);
    long hits = atol(at + strlen("\"Shared Hit Blocks\": "));
    at = strstr(plan, "\"Shared Read Blocks\": ");
    ck_assert_ptr_nonnull(at);
    hits += atol(at + strlen("\"Shared Read Blocks\": "));
    free(plan);
    return hits;
}

/* The get, latest and page statements are planned under jit_above_cost
 * (100,000) at 3,001 checkpoints: version 23's channel_list counted its
 * generate_series() as 1,000 rows a checkpoint, which costed a page of 10 at
 * 250,000 and JIT-compiled it on every run (about 250 ms). And a page with
 * `before` deep in the thread reads no more than the first page. */
START_TEST(test_reads_planned_cheap)
{
    const char *name = "cheap", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    put3(s, UUID_A, VER_JS, "7", "8", "{\"source\":\"loop\"}");
    write1(s, UUID_A, UUID_B, 0, "1", 0);
    convo_close(s);
    PGconn *pg = admin();
    exec_in_schema(pg, schema,
                   "INSERT INTO @S.checkpoints (tid, put_seq, log_length, created_at, checkpoint_ns,"
                   " checkpoint_id, parent_id, body_type, metadata, channel_set, versions, body,"
                   " writes) SELECT c.tid, c.put_seq + g, 0, c.created_at, '',"
                   " @S.id_pack('c' || g), NULL, c.body_type, c.metadata, c.channel_set,"
                   " c.versions, c.body, c.writes FROM @S.checkpoints c,"
                   " generate_series(1, 3000) g; ANALYZE @S.checkpoints");
    exec_in_schema(pg, schema, "SET plan_cache_mode = force_generic_plan");
    static const char *const files[3][3] = {
        {"checkpoint_list.sql", "page (text, text, text, text, int8, text, text, text)",
         "EXECUTE page('t', '', NULL, NULL, 10, NULL, NULL, NULL)"},
        {"checkpoint_latest.sql", "latest (text, text)", "EXECUTE latest('t', '')"},
        {"checkpoint_get.sql", "one (text, text, text)", "EXECUTE one('t', '', 'c7')"}};
    for (int i = 0; i < 3; i++) {
        char *text = statement_text(files[i][0]);
        char *prepare = malloc(strlen(text) + 128);
        ck_assert_ptr_nonnull(prepare);
        sprintf(prepare, "PREPARE %s AS %s", files[i][1], text);
        exec_in_schema(pg, schema, prepare);
        double cost = plan_cost(pg, files[i][2]);
        ck_assert_msg(cost < 100000, "%s: cost %.0f", files[i][0], cost);
        free(prepare);
        free(text);
    }
    /* a page before the 1,500th checkpoint reads what a first page reads: the
     * position of `before` is an index condition (it was a filter, every
     * newer checkpoint read, while the statement allowed `before` NULL) */
    long first = plan_buffers(pg, "EXECUTE page('t', '', NULL, NULL, 10, NULL, NULL, NULL)");
    long before = plan_buffers(pg, "EXECUTE page('t', '', 'c1500', NULL, 10, 't', '', NULL)");
    printf("postgres_compact: a first page %ld buffers, a page before c1500 %ld\n", first, before);
    ck_assert_msg(before < first + 30, "a page before c1500 read %ld buffers, a first page %ld",
                  before, first);
    PQfinish(pg);
    drop_schema(name);
}
END_TEST

/* What a version 22 schema held, written by its own functions: versions as
 * an array, metadata as jsonb, a long version among them. */
static char *v22_data(void)
{
    static char sql[4096];
    snprintf(sql, sizeof sql,
             "SELECT @S.checkpoint_put('t', '', '" UUID_A "', NULL, '" META "', 'json',"
             " '\\x007b7d', 0, ARRAY['messages', 'branch:to:model', '__start__'],"
             " ARRAY['" VER_JS "', '', '%s'], ARRAY['json', 'json', 'json'],"
             " ARRAY['\\x6e756c6c'::bytea, '\\x6e756c6c', '\\x6e756c6c'], now(), NULL);"
             "SELECT @S.checkpoint_put('t', '', '" UUID_B "', '" UUID_A "', '{}', NULL,"
             " NULL, 0, ARRAY['messages', 'branch:to:model', '__start__'],"
             " ARRAY['v2', '', '%s'], ARRAY['json', NULL, NULL],"
             " ARRAY['\\x6e756c6c'::bytea, NULL, NULL], now(), NULL);"
             "SELECT @S.checkpoint_put_writes('t', '', '" UUID_B "', '" UUID_A "', 'p',"
             " ARRAY[0::int8], ARRAY['messages'], ARRAY['json'], ARRAY['\\x31'::bytea], NULL)",
             long_version, long_version);
    return sql;
}

/* A version 22 schema is migrated on open: every row reads the same (the
 * metadata keeps jsonb's text), the versions are one value, and the driver
 * reads and extends it. */
START_TEST(test_migration_from_version_22)
{
    schema_at_version("d22", 22);
    PGconn *pg = admin();
    const char *schema = schema_name("d22");
    exec_in_schema(pg, schema, v22_data());
    char *before = rows_as_text(pg, "d22", 4);
    ck_assert_msg(strstr(before, "k27lp6lcw6") != NULL, "v22 data: %s", before);
    convo_store *s = open_ok(schema_url("d22", NULL));
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT string_agg(version::text, ',' ORDER BY version)"
             " FROM \"%s\".schema_version", schema);
    char *v = query1(pg, sql);
    ck_assert_str_eq(v, PG_SCHEMA_VERSIONS);
    free(v);
    char *after = rows_as_text(pg, "d22", 5);
    ck_assert_str_eq(after, before);
    free(before);
    free(after);
    snprintf(sql, sizeof sql, "SELECT string_agg(a.attname || ' ' || format_type(a.atttypid,"
             " a.atttypmod), ', ' ORDER BY a.attname) FROM pg_attribute a"
             " WHERE a.attrelid = '\"%s\".checkpoints'::regclass"
             " AND a.attname IN ('versions', 'metadata')", schema);
    v = query1(pg, sql);
    ck_assert_str_eq(v, "metadata text, versions bytea"); /* (v36) meta_pack() text */
    free(v);
    convo_checkpoint *cp = NULL;
    convo_error err;
    versions_are(s, UUID_A, VER_JS, "", long_version);
    versions_are(s, UUID_B, "v2", "", long_version);
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", UUID_B, &cp, &err), 0);
    ck_assert_uint_eq(convo_checkpoint_write_count(cp), 1); /* (v24) from its table */
    convo_checkpoint_free(cp);
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", UUID_A, &cp, &err), 0);
    /* as jsonb gave it (keys by length, then bytes) */
    ck_assert_str_eq(convo_checkpoint_metadata(cp), "{\"z\":null,\"step\":3,\"source\":"
                     "\"loop\",\"writes\":{\"model\":{\"n\":[1,2]}}}");
    convo_checkpoint_free(cp);
    put3(s, "1f1e9eee-1758-6660-8003-f7e2ee72e983", "v3", VER_JS, long_version, META);
    versions_are(s, "1f1e9eee-1758-6660-8003-f7e2ee72e983", "v3", VER_JS, long_version);
    convo_close(s);
    PQfinish(pg);
    drop_schema("d22");
}
END_TEST

void postgres_add_compact_tests(Suite *s)
{
    memset(long_version, 'x', sizeof long_version - 1);
    memcpy(long_version, "77.", 3); /* no zero-padded count: kept as its bytes */
    TCase *tc = tcase_create("compact");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_versions_joined);
    tcase_add_test(tc, test_corrupt_versions_are_ecorrupt);
    tcase_add_test(tc, test_corrupt_writes_are_ecorrupt);
    tcase_add_test(tc, test_metadata_as_text);
    tcase_add_test(tc, test_writes_in_the_row);
    tcase_add_test(tc, test_concurrent_writes_both_kept);
    tcase_add_test(tc, test_writes_use_the_primary_key_unanalyzed);
    tcase_add_test(tc, test_reads_by_id_in_a_new_store);
    tcase_add_test(tc, test_reads_planned_cheap);
    tcase_add_test(tc, test_migration_from_version_22);
    suite_add_tcase(s, tc);
}
