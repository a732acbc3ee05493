/* postgres_segments.c — sealed checkpoint segments (schema 42): a thread's
 * older checkpoints packed 16 a row after its puts; every read (get, latest,
 * list with before, limit and filter, one channel's listing, pending writes,
 * values in checkpoint_blobs) across the sealed / unsealed boundary; every
 * operation (prune, delete by run, put_writes to a sealed checkpoint, a copy
 * with checkpoints, a tail rewrite, export and import, delete) keeps every
 * remaining checkpoint; a seal that meets a changed row does nothing;
 * concurrent putters; a corrupt segment refused; rows of schema 41 sealed
 * after the migration. Part of tests/postgres_extra (postgres.h). */
#include "postgres.h"
#include "dumpbuf.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char big[1200]; /* a value over 1,024 bytes: in checkpoint_blobs */

static void id_of(char *out, size_t n, int i)
{
    snprintf(out, n, "ck-%05d", i);
}

/* Checkpoint i of thread: channels "a" (a new value each time), "big" (the
 * large value, version 1), metadata {"step": i, "run_id": "r<i % 3>"},
 * parent i - 1, log length i / 4. */
static void put_ip(convo_store *s, const char *thread, int i, int with_parent)
{
    char id[32], parent[32], meta[64], ver[16], val[32];
    id_of(id, sizeof id, i);
    id_of(parent, sizeof parent, i - 1);
    snprintf(meta, sizeof meta, "{\"step\":%d,\"run_id\":\"r%d\"}", i, i % 3);
    snprintf(ver, sizeof ver, "%d", i);
    snprintf(val, sizeof val, "\"value %d\"", i);
    convo_blob va = {"json", val, strlen(val)}, vb = {"json", big, sizeof big - 1};
    convo_channel_in ch[2] = {{"a", ver, &va}, {"big", "1", i == 1 ? &vb : NULL}};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = thread;
    cp.checkpoint_id = id;
    cp.parent_id = i > 1 && with_parent ? parent : NULL;
    cp.metadata_json = meta;
    cp.channels = ch;
    cp.nchannels = 2;
    cp.log_length = i / 4;
    convo_error err;
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put %d: %s", i, err.message);
}

static void put_i(convo_store *s, const char *thread, int i)
{
    put_ip(s, thread, i, 1);
}

static void write_to(convo_store *s, const char *thread, int i, const char *task, int *rc)
{
    char id[32];
    id_of(id, sizeof id, i);
    convo_write_in w = {0, "a", {"json", "\"w\"", 3}};
    convo_writes_in in = CONVO_WRITES_IN_INIT;
    in.thread_id = thread;
    in.checkpoint_id = id;
    in.task_id = task;
    in.task_path = "p";
    in.writes = &w;
    in.n = 1;
    convo_error err;
    *rc = convo_checkpoint_put_writes_ex(s, &in, &err);
}

/* Checkpoint i read back whole: ids, parent, metadata, both values, writes. */
static void check_cp(const convo_checkpoint *cp, int i, size_t writes)
{
    char id[32], val[32], meta[64];
    id_of(id, sizeof id, i);
    snprintf(val, sizeof val, "\"value %d\"", i);
    snprintf(meta, sizeof meta, "{\"step\":%d,\"run_id\":\"r%d\"}", i, i % 3);
    ck_assert_str_eq(convo_checkpoint_id(cp), id);
    ck_assert_str_eq(convo_checkpoint_metadata(cp), meta);
    if (i > 1 && convo_checkpoint_parent_id(cp)) {
        char parent[32];
        id_of(parent, sizeof parent, i - 1);
        ck_assert_str_eq(convo_checkpoint_parent_id(cp), parent);
    }
    ck_assert_int_eq(convo_checkpoint_log_length(cp), i / 4);
    ck_assert_uint_eq(convo_checkpoint_channel_count(cp), 2);
    const char *ver;
    convo_blob v;
    ck_assert_str_eq(convo_checkpoint_channel(cp, 0, &ver, &v), "a");
    ck_assert_uint_eq(v.len, strlen(val));
    ck_assert_int_eq(memcmp(v.bytes, val, v.len), 0);
    ck_assert_str_eq(convo_checkpoint_channel(cp, 1, &ver, &v), "big");
    ck_assert_uint_eq(v.len, sizeof big - 1);
    ck_assert_int_eq(memcmp(v.bytes, big, v.len), 0);
    ck_assert_uint_eq(convo_checkpoint_write_count(cp), writes);
}

static long segments_of(PGconn *pg, const char *schema)
{
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM \"%s\".checkpoint_segments", schema);
    return query_long(pg, sql);
}

static long rows_in(PGconn *pg, const char *schema)
{
    char sql[256];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM \"%s\".checkpoints", schema);
    return query_long(pg, sql);
}

/* The ids a listing gives, newest first, as the numbers i; how many. */
static size_t list_ids(convo_store *s, const convo_checkpoint_list_opts *o, int *out,
                       size_t cap, int *rc)
{
    convo_checkpoint_set *set = NULL;
    convo_error err;
    *rc = convo_checkpoint_list(s, o, &set, &err);
    if (*rc != 0)
        return 0;
    size_t n = convo_checkpoint_set_count(set);
    for (size_t k = 0; k < n && k < cap; k++)
        out[k] = atoi(convo_checkpoint_id(convo_checkpoint_set_get(set, k)) + 3);
    convo_checkpoint_set_free(set);
    return n;
}

/* 40 puts: two segments of 16 (sealed after the 20th and the 36th put, each
 * leaving the 4 newest rows), 8 rows. */
static convo_store *store_with_40(const char *name, const char *thread)
{
    memset(big, 'x', sizeof big - 1);
    convo_store *s = open_ok(schema_url(name, NULL));
    for (int i = 1; i <= 40; i++) {
        put_i(s, thread, i);
        if (i == 5) { /* a write while it is a row: sealed with it */
            int rc;
            write_to(s, thread, 5, "task-5", &rc);
            ck_assert_int_eq(rc, 0);
        }
    }
    PGconn *pg = admin();
    ck_assert_int_eq(segments_of(pg, schema_name(name)), 2);
    ck_assert_int_eq(rows_in(pg, schema_name(name)), 8);
    PQfinish(pg);
    return s;
}

START_TEST(test_reads_across_the_boundary)
{
    const char *name = "seg1";
    convo_store *s = store_with_40(name, "t");
    convo_error err;
    convo_checkpoint *cp = NULL;
    for (int i = 1; i <= 40; i++) {
        char id[32];
        id_of(id, sizeof id, i);
        ck_assert_msg(convo_checkpoint_get(s, "t", "", id, &cp, &err) == 0, "%d: %s", i,
                      err.message);
        check_cp(cp, i, i == 5);
        convo_checkpoint_free(cp);
    }
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", NULL, &cp, &err), 0);
    check_cp(cp, 40, 0);
    convo_checkpoint_free(cp);
    /* an id inside the segment's range that is not in it */
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", "ck-00005x", &cp, &err), CONVO_ENOTFOUND);
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", "ck-00000", &cp, &err), CONVO_ENOTFOUND);

    int got[64], rc;
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = "t";
    size_t n = list_ids(s, &o, got, 64, &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(n, 40);
    for (size_t k = 0; k < n; k++)
        ck_assert_int_eq(got[k], 40 - (int)k);
    o.limit = 30; /* the page runs into the segment */
    n = list_ids(s, &o, got, 64, &rc);
    ck_assert_uint_eq(n, 30);
    ck_assert_int_eq(got[29], 11);
    o.limit = 5;
    o.before = "ck-00020"; /* before a sealed checkpoint */
    o.before_thread_id = "t";
    n = list_ids(s, &o, got, 64, &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(n, 5);
    ck_assert_int_eq(got[0], 19);
    ck_assert_int_eq(got[4], 15);
    o.before = "ck-00036"; /* a row before, the page across both segments */
    o.limit = 20;
    n = list_ids(s, &o, got, 64, &rc);
    ck_assert_uint_eq(n, 20);
    ck_assert_int_eq(got[0], 35);
    ck_assert_int_eq(got[19], 16);
    o.before = "ck-00005x"; /* in the segment's range, not in it */
    list_ids(s, &o, got, 64, &rc);
    ck_assert_int_eq(rc, CONVO_ENOTFOUND);
    o.before = NULL;
    o.limit = 0;
    o.filter_json = "{\"step\":3}"; /* only sealed */
    n = list_ids(s, &o, got, 64, &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(n, 1);
    ck_assert_int_eq(got[0], 3);
    o.filter_json = "{\"run_id\":\"r1\"}"; /* both */
    n = list_ids(s, &o, got, 64, &rc);
    ck_assert_uint_eq(n, 14);
    ck_assert_int_eq(got[0], 40);
    ck_assert_int_eq(got[13], 1);
    o.filter_json = NULL;
    o.only_channel = "a";
    convo_checkpoint_set *set = NULL;
    ck_assert_int_eq(convo_checkpoint_list(s, &o, &set, &err), 0);
    ck_assert_uint_eq(convo_checkpoint_set_count(set), 40);
    const convo_checkpoint *last = convo_checkpoint_set_get(set, 39);
    ck_assert_str_eq(convo_checkpoint_id(last), "ck-00001");
    ck_assert_str_eq(convo_checkpoint_metadata(last), "{}");
    ck_assert_uint_eq(convo_checkpoint_channel_count(last), 1);
    convo_checkpoint_set_free(set);
    /* a store-wide listing with a filter (delete by run's) */
    convo_checkpoint_list_opts all = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    all.filter_json = "{\"run_id\":\"r2\"}";
    n = list_ids(s, &all, got, 64, &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(n, 13);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* The count of checkpoints thread lists, each read back by get, and their
 * ids in listing order: descending (up 1, ids put in ascending order) or
 * ascending (up 0). */
static size_t readable_in_order(convo_store *s, const char *thread, int up)
{
    int got[256], rc;
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = thread;
    size_t n = list_ids(s, &o, got, 256, &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_le(n, 256);
    for (size_t k = 0; k < n; k++) {
        char id[32];
        id_of(id, sizeof id, got[k]);
        convo_checkpoint *cp = NULL;
        convo_error err;
        ck_assert_msg(convo_checkpoint_get(s, thread, "", id, &cp, &err) == 0, "%s: %s", id,
                      err.message);
        convo_checkpoint_free(cp);
        if (k > 0)
            ck_assert(up ? got[k] < got[k - 1] : got[k] > got[k - 1]);
    }
    return n;
}

static size_t all_readable(convo_store *s, const char *thread)
{
    return readable_in_order(s, thread, 1);
}

START_TEST(test_operations_keep_every_checkpoint)
{
    const char *name = "seg2";
    char schema[128]; /* schema_name()'s buffers are reused */
    snprintf(schema, sizeof schema, "%s", schema_name(name));
    convo_store *s = store_with_40(name, "t");
    PGconn *pg = admin();
    convo_error err;
    /* a write to a sealed checkpoint: unsealed, stored */
    int rc;
    write_to(s, "t", 3, "task-3", &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_int_eq(segments_of(pg, schema), 0);
    convo_checkpoint *cp = NULL;
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", "ck-00003", &cp, &err), 0);
    check_cp(cp, 3, 1);
    convo_checkpoint_free(cp);
    write_to(s, "t", 99, "task-x", &rc); /* still: no such checkpoint */
    ck_assert_int_eq(rc, CONVO_ENOTFOUND);
    /* sealed again by the next puts */
    for (int i = 41; i <= 56; i++)
        put_i(s, "t", i);
    ck_assert_int_ge(segments_of(pg, schema), 1);
    ck_assert_uint_eq(all_readable(s, "t"), 56);
    /* a sealed checkpoint put again: replaced, not a second copy */
    put_i(s, "t", 7);
    ck_assert_uint_eq(all_readable(s, "t"), 56);
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", "ck-00007", &cp, &err), 0);
    check_cp(cp, 7, 0);
    convo_checkpoint_free(cp);
    for (int i = 57; i <= 72; i++) /* sealed again */
        put_i(s, "t", i);
    ck_assert_int_ge(segments_of(pg, schema), 1);
    /* a copy with checkpoints */
    for (int i = 0; i < 60; i++)
        ck_assert_int_eq(append1(s, "t", &err), 0);
    convo_fork_opts fo = CONVO_FORK_OPTS_INIT;
    fo.with_checkpoints = 1;
    ck_assert_msg(convo_thread_fork_ex(s, "t", "t2", -1, &fo, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(all_readable(s, "t2"), 72);
    ck_assert_int_eq(convo_checkpoint_get(s, "t2", "", "ck-00003", &cp, &err), 0);
    check_cp(cp, 3, 1);
    convo_checkpoint_free(cp);
    /* delete by run (a filter over every thread); the fork unsealed t: 72 rows,
     * sealed again at the 84th (4 newest + 80) */
    for (int i = 73; i <= 84; i++)
        put_i(s, "t", i);
    ck_assert_int_ge(segments_of(pg, schema), 1);
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = "t";
    o.filter_json = "{\"run_id\":\"r0\"}";
    uint64_t removed = 0;
    ck_assert_msg(convo_checkpoint_delete(s, &o, &removed, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(removed, 28);
    ck_assert_uint_eq(all_readable(s, "t"), 84 - 28);
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", "ck-00001", &cp, &err), 0);
    check_cp(cp, 1, 0); /* its value in checkpoint_blobs kept */
    convo_checkpoint_free(cp);
    /* a tail rewrite that would drop a sealed checkpoint's messages */
    for (int i = 85; i <= 120; i++)
        put_i(s, "t", i);
    ck_assert_int_ge(segments_of(pg, schema), 1);
    convo_rewrite_opts ro = CONVO_REWRITE_OPTS_INIT;
    convo_rewrite_result res;
    ck_assert_int_eq(convo_replace_tail(s, "t", 10, NULL, NULL, 0, &ro, &res, &err),
                     CONVO_ECONFLICT);
    ck_assert_int_ge(segments_of(pg, schema), 1); /* rolled back with the rest */
    /* prune */
    ck_assert_int_eq(convo_checkpoint_prune(s, "t", 20, &err), 0);
    ck_assert_uint_eq(all_readable(s, "t"), 20);
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", NULL, &cp, &err), 0);
    check_cp(cp, 120, 0);
    convo_checkpoint_free(cp);
    /* export and import of one thread */
    for (int i = 121; i <= 160; i++)
        put_i(s, "t", i);
    ck_assert_int_ge(segments_of(pg, schema), 1);
    membuf dump = {0};
    const char *one[] = {"t"};
    ck_assert_msg(convo_export(s, one, 1, mem_write, &dump, NULL, NULL, &err) == 0, "%s",
                  err.message);
    const char *name2 = "seg2b";
    convo_store *d = open_ok(schema_url(name2, NULL));
    ck_assert_msg(convo_import(d, mem_read, &dump, NULL, NULL, &err) == 0, "%s", err.message);
    ck_assert_uint_eq(all_readable(d, "t"), 60);
    ck_assert_int_eq(convo_checkpoint_get(d, "t", "", "ck-00125", &cp, &err), 0);
    check_cp(cp, 125, 0);
    convo_checkpoint_free(cp);
    free(dump.data);
    convo_close(d);
    drop_schema(name2);
    /* delete: the segments go with the thread, and nothing comes back */
    ck_assert_int_eq(convo_thread_delete(s, "t", &err), 0);
    char sql[512];
    snprintf(sql, sizeof sql,
             "SELECT count(*) FROM \"%s\".checkpoint_segments s WHERE NOT EXISTS ("
             " SELECT 1 FROM \"%s\".threads t WHERE t.tid = s.tid)", schema, schema);
    ck_assert_int_eq(query_long(pg, sql), 0);
    put_i(s, "t", 200);
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", "ck-00003", &cp, &err), CONVO_ENOTFOUND);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* checkpoint_seal() deletes rows only while they are as read: a row changed
 * (its xmin) or gone is CV043 and nothing is sealed. */
START_TEST(test_seal_meets_a_changed_row)
{
    const char *name = "seg3", *schema = schema_name(name);
    convo_store *s = open_ok(schema_url(name, NULL));
    memset(big, 'x', sizeof big - 1);
    for (int i = 1; i <= 3; i++)
        put_i(s, "t", i);
    PGconn *pg = admin();
    char sql[1024];
    snprintf(sql, sizeof sql,
             "SELECT \"%s\".checkpoint_seal(t.tid, '', ARRAY[c.checkpoint_id], ARRAY['1'],"
             " ARRAY[1::int8], ARRAY[1::int8], ARRAY[1::int8], ARRAY[c.checkpoint_id],"
             " ARRAY[c.checkpoint_id], ARRAY['\\x00'::bytea])"
             " FROM \"%s\".threads t JOIN \"%s\".checkpoints c ON c.tid = t.tid LIMIT 1",
             schema, schema, schema);
    PGresult *r = PQexec(pg, sql);
    ck_assert_str_eq(PQresultErrorField(r, PG_DIAG_SQLSTATE), "CV043");
    PQclear(r);
    ck_assert_int_eq(segments_of(pg, schema), 0);
    ck_assert_int_eq(rows_in(pg, schema), 3);
    /* with the xmin it has, the same call seals: the check is what refused it */
    snprintf(sql, sizeof sql,
             "SELECT \"%s\".checkpoint_seal(t.tid, '', ARRAY[c.checkpoint_id],"
             " ARRAY[c.xmin::text], ARRAY[1::int8], ARRAY[1::int8], ARRAY[1::int8],"
             " ARRAY[c.checkpoint_id], ARRAY[c.checkpoint_id], ARRAY['\\x00'::bytea])"
             " FROM \"%s\".threads t JOIN \"%s\".checkpoints c ON c.tid = t.tid"
             " ORDER BY c.put_seq LIMIT 1",
             schema, schema, schema);
    ck_assert_int_eq(query_long(pg, sql), 1);
    ck_assert_int_eq(segments_of(pg, schema), 1);
    /* and that segment, not one lib/segment wrote, is refused by the reads */
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", "ck-00001", &cp, &err), CONVO_ECORRUPT);
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", NULL, &cp, &err), 0);
    convo_checkpoint_free(cp);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

START_TEST(test_corrupt_segment_refused)
{
    const char *name = "seg4", *schema = schema_name(name);
    convo_store *s = store_with_40(name, "t");
    PGconn *pg = admin();
    static const char *const damage[] = {
        "UPDATE @S.checkpoint_segments SET data = '\\x0102030405'",
        "UPDATE @S.checkpoint_segments SET data = substring(data FROM 1 FOR length(data) - 9)",
    };
    for (size_t d = 0; d < 2; d++) {
        exec_in_schema(pg, schema, "CREATE TABLE IF NOT EXISTS @S.keep AS"
                                   " SELECT first_id, data FROM @S.checkpoint_segments");
        exec_in_schema(pg, schema, damage[d]);
        convo_checkpoint *cp = NULL;
        convo_error err;
        ck_assert_int_eq(convo_checkpoint_get(s, "t", "", "ck-00003", &cp, &err), CONVO_ECORRUPT);
        ck_assert_ptr_nonnull(strstr(err.message, "segment"));
        convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
        o.thread_id = "t";
        convo_checkpoint_set *set = NULL;
        ck_assert_int_eq(convo_checkpoint_list(s, &o, &set, &err), CONVO_ECORRUPT);
        o.limit = 3; /* a page of rows does not read it */
        ck_assert_int_eq(convo_checkpoint_list(s, &o, &set, &err), 0);
        convo_checkpoint_set_free(set);
        ck_assert_int_eq(convo_checkpoint_prune(s, "t", 3, &err), CONVO_ECORRUPT);
        exec_in_schema(pg, schema, "UPDATE @S.checkpoint_segments s SET data = k.data"
                                   " FROM @S.keep k WHERE k.first_id = s.first_id");
        ck_assert_int_eq(convo_checkpoint_get(s, "t", "", "ck-00003", &cp, &err), 0);
        convo_checkpoint_free(cp);
    }
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

typedef struct putter {
    const char *url;
    int first;
} putter;

static void *put_many(void *arg)
{
    putter *p = arg;
    convo_store *s = open_ok(p->url);
    for (int i = p->first; i < p->first + 200; i += 2)
        put_ip(s, "t", i, 0); /* a parent the other store may not have put yet */
    convo_close(s);
    return NULL;
}

/* Two stores put to one thread at once (odd and even ids, so ids arrive out
 * of put order now and then, so puts land in sealed ranges and unseal them):
 * each seals when its count says so, racing the other's puts, seals and
 * unseals; every checkpoint is listed once and read back. */
START_TEST(test_concurrent_putters_lose_nothing)
{
    const char *name = "seg5";
    memset(big, 'x', sizeof big - 1);
    convo_store *s = open_ok(schema_url(name, NULL));
    putter a = {schema_url(name, NULL), 1}, b = {schema_url(name, NULL), 2};
    pthread_t ta, tb;
    pthread_create(&ta, NULL, put_many, &a);
    pthread_create(&tb, NULL, put_many, &b);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    int got[256], rc;
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = "t";
    size_t n = list_ids(s, &o, got, 256, &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(n, 200);
    char seen[201] = {0};
    for (size_t k = 0; k < n; k++) {
        ck_assert(got[k] >= 1 && got[k] <= 200 && !seen[got[k]]);
        seen[got[k]] = 1;
        char id[32];
        id_of(id, sizeof id, got[k]);
        convo_checkpoint *cp = NULL;
        convo_error err;
        ck_assert_msg(convo_checkpoint_get(s, "t", "", id, &cp, &err) == 0, "%s", err.message);
        check_cp(cp, got[k], 0);
        convo_checkpoint_free(cp);
    }
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* A schema at 41 with 30 checkpoints (its own functions): opened, they stay
 * rows and read; the next puts seal them. */
START_TEST(test_rows_of_41_sealed_after_migration)
{
    const char *name = "seg6", *schema = schema_name(name);
    schema_at_version(name, 41);
    PGconn *pg = admin();
    exec_in_schema(pg, schema,
                   "SELECT @S.checkpoint_put('t', '', 'ck-' || lpad(i::text, 5, '0'), NULL,"
                   " ('{\"step\":' || i || ',\"run_id\":\"r' || i % 3 || '\"}')::json, NULL,"
                   " NULL, i, ARRAY['a'], ARRAY[i::text], ARRAY['json'],"
                   " ARRAY[convert_to('\"value ' || i || '\"', 'UTF8')], now(), NULL)"
                   " FROM generate_series(1, 30) AS i");
    convo_store *s = open_ok(schema_url(name, NULL));
    ck_assert_int_eq(query_long(pg, "SELECT 1"), 1);
    ck_assert_int_eq(segments_of(pg, schema), 0);
    int got[64], rc;
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = "t";
    ck_assert_uint_eq(list_ids(s, &o, got, 64, &rc), 30);
    for (int i = 31; i <= 46; i++) {
        char id[32], ver[16], val[32];
        id_of(id, sizeof id, i);
        snprintf(ver, sizeof ver, "%d", i);
        snprintf(val, sizeof val, "\"value %d\"", i);
        convo_blob va = {"json", val, strlen(val)};
        convo_channel_in ch = {"a", ver, &va};
        convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
        cp.thread_id = "t";
        cp.checkpoint_id = id;
        cp.channels = &ch;
        cp.nchannels = 1;
        convo_error err;
        ck_assert_int_eq(convo_checkpoint_put(s, &cp, &err), 0);
    }
    ck_assert_int_eq(segments_of(pg, schema), 2);
    ck_assert_int_eq(rows_in(pg, schema), 46 - 32);
    ck_assert_uint_eq(list_ids(s, &o, got, 64, &rc), 46);
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", "ck-00007", &cp, &err), 0);
    ck_assert_str_eq(convo_checkpoint_metadata(cp), "{\"step\":7,\"run_id\":\"r1\"}");
    convo_checkpoint_free(cp);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* Two namespaces put in turn (odd ids in "", even in "sub"), each sealed: a
 * listing over both `before` a sealed checkpoint, and pages of 7 walked with
 * `before` as an export does, give each checkpoint once, in put order. */
START_TEST(test_before_sealed_across_namespaces)
{
    const char *name = "seg7";
    convo_store *s = open_ok(schema_url(name, NULL));
    for (int i = 1; i <= 80; i++) {
        char id[32];
        id_of(id, sizeof id, i);
        convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
        cp.thread_id = "t";
        cp.checkpoint_ns = i % 2 ? "" : "sub";
        cp.checkpoint_id = id;
        convo_error err;
        ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "%s", err.message);
    }
    PGconn *pg = admin();
    ck_assert_int_eq(segments_of(pg, schema_name(name)), 4); /* two a namespace */
    PQfinish(pg);
    int got[64], rc;
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = "t";
    o.before = "ck-00031"; /* sealed, in "" */
    o.before_thread_id = "t";
    o.before_ns = "";
    o.limit = 5;
    size_t n = list_ids(s, &o, got, 64, &rc);
    ck_assert_int_eq(rc, 0);
    ck_assert_uint_eq(n, 5);
    for (size_t k = 0; k < n; k++)
        ck_assert_int_eq(got[k], 30 - (int)k);
    char before[32] = "", ns[8] = "";
    int expect = 80;
    for (;;) {
        o.before = before[0] ? before : NULL;
        o.before_ns = ns;
        o.limit = 7;
        n = list_ids(s, &o, got, 64, &rc);
        ck_assert_int_eq(rc, 0);
        for (size_t k = 0; k < n; k++)
            ck_assert_int_eq(got[k], expect--);
        if (n < 7)
            break;
        id_of(before, sizeof before, got[n - 1]);
        snprintf(ns, sizeof ns, "%s", got[n - 1] % 2 ? "" : "sub");
    }
    ck_assert_int_eq(expect, 0);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* Ids in descending put order: the first 16 make a segment (a range, in any
 * order inside), then none is above the ones sealed, so the rest stay rows;
 * each reads back. A sweep of the thread once its
 * deadline has passed takes a sealed thread's segments with it. */
START_TEST(test_ids_out_of_order_stay_rows_and_sweep)
{
    const char *name = "seg8";
    char schema[128];
    snprintf(schema, sizeof schema, "%s", schema_name(name));
    memset(big, 'x', sizeof big - 1);
    convo_store *s = open_ok(schema_url(name, "ttl=3600"));
    for (int i = 80; i >= 1; i--) /* four seals due */
        put_ip(s, "down", i, 0);
    PGconn *pg = admin();
    ck_assert_int_eq(segments_of(pg, schema), 1);
    ck_assert_int_eq(rows_in(pg, schema), 80 - 16);
    ck_assert_uint_eq(readable_in_order(s, "down", 0), 80);
    for (int i = 1; i <= 40; i++)
        put_i(s, "up", i);
    ck_assert_int_eq(segments_of(pg, schema), 3);
    char sql[512];
    snprintf(sql, sizeof sql,
             "UPDATE \"%s\".threads SET expires_at = now() - interval '1 second'"
             " WHERE thread_id = 'up'", schema);
    PQclear(PQexec(pg, sql));
    uint64_t removed = 0;
    convo_error err;
    ck_assert_int_eq(convo_sweep(s, &removed, &err), 0);
    ck_assert_uint_eq(removed, 1);
    ck_assert_int_eq(segments_of(pg, schema), 1);
    put_i(s, "up", 100); /* a new life: nothing of the old one comes back */
    convo_checkpoint *cp = NULL;
    ck_assert_int_eq(convo_checkpoint_get(s, "up", "", "ck-00003", &cp, &err), CONVO_ENOTFOUND);
    ck_assert_uint_eq(all_readable(s, "up"), 1);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

/* A store opened for each put (a web request's, a CLI call's): the seal is
 * due by the rows stored, not by one handle's puts, so 52 puts leave three
 * segments and the 4 newest rows, as one handle's would; all read back. */
START_TEST(test_a_handle_a_put_seals)
{
    const char *name = "seg9";
    char schema[128];
    snprintf(schema, sizeof schema, "%s", schema_name(name));
    memset(big, 'x', sizeof big - 1);
    for (int i = 1; i <= 52; i++) {
        convo_store *one = open_ok(schema_url(name, NULL));
        put_i(one, "t", i);
        convo_close(one);
    }
    PGconn *pg = admin();
    ck_assert_int_eq(segments_of(pg, schema), 3);
    ck_assert_int_eq(rows_in(pg, schema), 4);
    PQfinish(pg);
    convo_store *s = open_ok(schema_url(name, NULL));
    ck_assert_uint_eq(all_readable(s, "t"), 52);
    convo_close(s);
    drop_schema(name);
}
END_TEST

typedef struct sealed_reader {
    convo_store *s;
    int rc;
    convo_checkpoint *cp;
} sealed_reader;

/* The put statements count a namespace's rows up to PG_SEAL_COUNT_MAX (100), so a
 * put's cost does not grow with rows a seal cannot take; past it a seal is tried
 * after one put in 16 chosen by the id's hash: a thread of 120 rows from before
 * schema 42 is sealed within the puts below (with these ids, deterministically),
 * and every checkpoint stays readable. */
START_TEST(test_past_the_count_sealed_by_hash)
{
    const char *name = "seg11", *schema = schema_name(name);
    schema_at_version(name, 41);
    PGconn *pg = admin();
    exec_in_schema(pg, schema,
                   "SELECT @S.checkpoint_put('t', '', 'ck-' || lpad(i::text, 5, '0'), NULL,"
                   " '{}'::json, NULL, NULL, i, ARRAY['a'], ARRAY[i::text], ARRAY['json'],"
                   " ARRAY[convert_to('\"value ' || i || '\"', 'UTF8')], now(), NULL)"
                   " FROM generate_series(1, 120) AS i");
    memset(big, 'x', sizeof big - 1);
    convo_store *s = open_ok(schema_url(name, NULL));
    for (int i = 121; i <= 180; i++)
        put_i(s, "t", i);
    ck_assert_int_ge(segments_of(pg, schema), 7);
    ck_assert_int_le(rows_in(pg, schema), 4 + 16 + 15);
    ck_assert_uint_eq(all_readable(s, "t"), 180);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

static void *read_sealed_3(void *arg)
{
    sealed_reader *r = arg;
    r->rc = convo_checkpoint_get(r->s, "t", "", "ck-00003", &r->cp, NULL);
    return NULL;
}

/* A sealed checkpoint's value over 255 bytes is read by a second statement
 * (checkpoint_blobs_get.sql). When its segment goes between the two (here the
 * segment and the values go, as an unseal and a prune of those checkpoints
 * would leave them; checkpoint_blobs locked so that the read waits there),
 * the read starts again and finds no checkpoint: not ck-00003 with channel
 * "big" and no value (what it gave before the segment's xmin was checked). */
START_TEST(test_sealed_read_racing_a_removal_is_read_again)
{
    const char *name = "seg10";
    char schema[128];
    snprintf(schema, sizeof schema, "%s", schema_name(name));
    convo_close(store_with_40(name, "t"));
    convo_store *s = open_ok(schema_url(name, "application_name=seg10reader&pool=1"));
    PGconn *pg = admin();
    exec_in_schema(pg, schema, "BEGIN; LOCK TABLE @S.checkpoint_blobs IN ACCESS EXCLUSIVE MODE");
    sealed_reader r = {s, 0, NULL};
    pthread_t th;
    ck_assert_int_eq(pthread_create(&th, NULL, read_sealed_3, &r), 0);
    wait_for_lock_wait("seg10reader");
    exec_in_schema(pg, schema,
                   "DELETE FROM @S.checkpoint_segments WHERE first_id <= @S.id_pack('ck-00003');"
                   " DELETE FROM @S.checkpoint_blobs; COMMIT");
    pthread_join(th, NULL);
    ck_assert_int_eq(r.rc, CONVO_ENOTFOUND);
    ck_assert_ptr_null(r.cp);
    PQfinish(pg);
    convo_close(s);
    drop_schema(name);
}
END_TEST

void postgres_add_segments_tests(Suite *s)
{
    TCase *tc = tcase_create("segments");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_reads_across_the_boundary);
    tcase_add_test(tc, test_operations_keep_every_checkpoint);
    tcase_add_test(tc, test_seal_meets_a_changed_row);
    tcase_add_test(tc, test_corrupt_segment_refused);
    tcase_add_test(tc, test_concurrent_putters_lose_nothing);
    tcase_add_test(tc, test_rows_of_41_sealed_after_migration);
    tcase_add_test(tc, test_before_sealed_across_namespaces);
    tcase_add_test(tc, test_ids_out_of_order_stay_rows_and_sweep);
    tcase_add_test(tc, test_a_handle_a_put_seals);
    tcase_add_test(tc, test_sealed_read_racing_a_removal_is_read_again);
    tcase_add_test(tc, test_past_the_count_sealed_by_hash);
    suite_add_tcase(s, tc);
}
