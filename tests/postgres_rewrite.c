/* postgres_rewrite.c — the PostgreSQL driver's tail rewrite and thread
 * generation (schema version 8), beyond the conformance cases: migration from
 * version 7, one transaction (a failure after the delete undoes it all), the
 * row lock against a fork and pending writes running beside it, ttl, the
 * generation in every append path, many writers and forks at once on one thread,
 * and what a rewrite costs next to an append. */
#include "postgres.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const THREE[] = {"{\"role\":\"user\",\"n\":0}",
                                    "{\"role\":\"assistant\",\"n\":1}",
                                    "{\"role\":\"user\",\"n\":2}"};
static const char *const AGAIN = "{\"role\":\"assistant\",\"n\":\"again\"}";

static int64_t generation_of(convo_store *s, const char *thread)
{
    convo_history *h;
    convo_error err;
    convo_load_opts lo = CONVO_LOAD_OPTS_INIT;
    lo.tail = 1;
    ck_assert_msg(convo_load(s, thread, &lo, &h, &err) == 0, "load %s: %s", thread,
                  err.message);
    int64_t g = convo_history_generation(h);
    convo_history_free(h);
    return g;
}

static void append3(convo_store *s, const char *thread)
{
    convo_error err;
    ck_assert_msg(convo_append(s, thread, THREE, NULL, 3, NULL, NULL, &err) == 0, "append: %s",
                  err.message);
}

/* The first value of sql (with @S the schema of `name`) as a number. */
static long schema_long(PGconn *pg, const char *name, const char *sql)
{
    char buf[1024], *o = buf;
    for (const char *p = sql; *p;)
        if (p[0] == '@' && p[1] == 'S') {
            o += snprintf(o, sizeof buf - (size_t)(o - buf), "\"%s\"", schema_name(name));
            p += 2;
        } else {
            *o++ = *p++;
        }
    *o = '\0';
    return query_long(pg, buf);
}

/* A version 7 schema with data (written by the functions it had) is migrated
 * on open (to 8, then 9): no row changes, every thread is at generation 0,
 * the checkpoints have their log length index; then a rewrite that drops
 * checkpoints removes them, their writes and the values only they referred
 * to, and keeps the rest. */
START_TEST(test_migration_from_version_7)
{
    schema_at_version("v7", 7);
    PGconn *pg = admin();
    exec_in_schema(pg, schema_name("v7"), v5_data);
    /* version 7 stores bodies behind a byte saying how: 0, as given */
    exec_in_schema(pg, schema_name("v7"),
                   "UPDATE @S.checkpoints SET body = '\\x00'::bytea || body WHERE body IS NOT NULL");
    char *before = rows_as_text(pg, "v7", 2);
    convo_store *s = open_ok(schema_url("v7", NULL));
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT string_agg(version::text, ',' ORDER BY version)"
             " FROM \"%s\".schema_version", schema_name("v7"));
    char *v = query1(pg, sql);
    ck_assert_str_eq(v, PG_SCHEMA_VERSIONS);
    free(v);
    char *after = rows_as_text(pg, "v7", 5);
    ck_assert_str_eq(after, before);
    free(before);
    free(after);
    snprintf(sql, sizeof sql, "SELECT string_agg(thread_id || '=' || generation, ' '"
             " ORDER BY thread_id) FROM \"%s\".threads", schema_name("v7"));
    v = query1(pg, sql);
    ck_assert_str_eq(v, "a=0 b=0 dead=0 live=0");
    free(v);
    ck_assert_int_eq(generation_of(s, "a"), 0);
    ck_assert_int_eq(generation_of(s, "b"), 0);
    /* (v18) no index of the log length: raising it stays a HOT update, and a
     * rewrite finds the checkpoints past keep among the thread's */
    snprintf(sql, sizeof sql, "SELECT count(*) FROM pg_indexes WHERE schemaname = '%s'"
             " AND indexdef LIKE '%%log_length%%'", schema_name("v7"));
    ck_assert_int_eq(query_long(pg, sql), 0);

    /* "a": c1 (log 2: ch v1, x v1), c2 (log 3: ch v2, x v1; two writes), sub/c3 (log 3) */
    convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
    convo_rewrite_result r;
    convo_error err;
    o.expected_generation = 0;
    ck_assert_int_eq(convo_replace_tail(s, "a", 2, &AGAIN, NULL, 1, &o, &r, &err),
                     CONVO_ECONFLICT);
    ck_assert_msg(strstr(err.message, "checkpoint c2 (namespace '')") != NULL, "%s",
                  err.message);
    o.drop_checkpoints = 1;
    ck_assert_msg(convo_replace_tail(s, "a", 2, &AGAIN, NULL, 1, &o, &r, &err) == 0,
                  "rewrite: %s", err.message);
    ck_assert(r.first_seq == 2 && r.count == 1 && r.removed == 1 && r.generation == 1);
    ck_assert_int_eq(schema_long(pg, "v7", "SELECT count(*) FROM @S.checkpoints c JOIN"
                                 " @S.threads t ON t.tid = c.tid WHERE t.thread_id = 'a'"), 1);
    ck_assert_int_eq(schema_long(pg, "v7", "SELECT coalesce(sum(cardinality(c.writes)), 0)"
                                 " FROM @S.checkpoints c JOIN @S.threads t ON t.tid = c.tid"
                                 " WHERE t.thread_id = 'a'"), 0);
    /* ch v2 was c2's alone; ch v1 and x v1 are c1's */
    const char *v7 = schema_name("v7");
    snprintf(sql, sizeof sql, "SELECT string_agg(n.name || '/' || \"%s\".ver_text(b.version),"
             " ' ' ORDER BY n.name) FROM \"%s\".checkpoint_blobs b JOIN \"%s\".threads t"
             " ON t.tid = b.tid JOIN \"%s\".checkpoint_names n ON n.num = b.channel"
             " WHERE t.thread_id = 'a'", v7, v7, v7, v7);
    v = query1(pg, sql);
    ck_assert_str_eq(v, "ch/v1 x/v1");
    free(v);
    convo_checkpoint *cp;
    ck_assert_int_eq(convo_checkpoint_get(s, "a", "", NULL, &cp, &err), 0);
    ck_assert_str_eq(convo_checkpoint_id(cp), "c1");
    for (size_t i = 0; i < convo_checkpoint_channel_count(cp); i++) {
        const char *version;
        convo_blob value;
        convo_checkpoint_channel(cp, i, &version, &value);
        ck_assert_ptr_nonnull(value.type);
    }
    convo_checkpoint_free(cp);
    /* the key of the append that stored seqs 0 and 1 still replays: they are kept */
    convo_append_opts ao = CONVO_APPEND_OPTS_INIT;
    ao.idempotency_key = "k1";
    convo_append_result ar;
    ck_assert_int_eq(convo_append(s, "a", THREE, NULL, 2, &ao, &ar, &err), 0);
    ck_assert(ar.replayed && ar.first_seq == 0);
    ck_assert_int_eq(length_of(s, "a"), 3);
    /* a fork carries the generation; the untouched threads stay at 0 */
    ck_assert_int_eq(convo_thread_fork(s, "a", "f", -1, &err), 0);
    ck_assert_int_eq(generation_of(s, "f"), 1);
    ck_assert_int_eq(generation_of(s, "live"), 0);
    convo_close(s);
    PQfinish(pg);
    drop_schema("v7");
}
END_TEST

/* The rewrite is one transaction: a failure after the old tail and the
 * checkpoints were deleted (a constraint added behind the driver's back
 * refuses the second new message) leaves all of it as it was. */
START_TEST(test_rewrite_one_transaction)
{
    convo_store *s = open_ok(schema_url("rwtx", NULL));
    PGconn *pg = admin();
    exec_in_schema(pg, schema_name("rwtx"),
                   "ALTER TABLE @S.messages ADD CONSTRAINT no_boom"
                   " CHECK (body <> convert_to('{\"role\":\"tool\",\"boom\":1}', 'UTF8'))");
    append3(s, "t");
    put_checkpoint(s, "t", "cp");
    convo_error err;
    convo_write_in w = {0, "ch", {"json", "1", 1}};
    ck_assert_int_eq(convo_checkpoint_put_writes(s, "t", "", "cp", "task", "", &w, 1, &err), 0);
    /* put_checkpoint stores log_length 0: make it refer to all three */
    exec_in_schema(pg, schema_name("rwtx"), "UPDATE @S.checkpoints SET log_length = 3");
    const char *fresh[] = {AGAIN, "{\"role\":\"tool\",\"boom\":1}"};
    convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
    o.drop_checkpoints = 1;
    o.idempotency_key = "rw";
    convo_rewrite_result r;
    int rc = convo_replace_tail(s, "t", 1, fresh, NULL, 2, &o, &r, &err);
    ck_assert_msg(rc != 0 && strcmp(err.backend_code, "23514") == 0, "rc %d %s %s", rc,
                  err.backend_code, err.message);
    convo_history *h;
    ck_assert_int_eq(convo_load(s, "t", NULL, &h, &err), 0);
    ck_assert_int_eq(convo_history_length(h), 3);
    ck_assert_int_eq(convo_history_generation(h), 0);
    for (size_t i = 0; i < 3; i++)
        ck_assert_str_eq(convo_history_message(h, i, NULL), THREE[i]);
    convo_history_free(h);
    convo_checkpoint *cp;
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", "cp", &cp, &err), 0);
    ck_assert_uint_eq(convo_checkpoint_write_count(cp), 1);
    convo_checkpoint_free(cp);
    ck_assert_int_eq(schema_long(pg, "rwtx", "SELECT count(*) FROM @S.idempotency_keys"), 0);
    /* without the refused message it goes through, under the same key */
    ck_assert_msg(convo_replace_tail(s, "t", 1, fresh, NULL, 1, &o, &r, &err) == 0, "%s",
                  err.message);
    ck_assert(r.generation == 1 && r.removed == 2 && !r.replayed);
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", "cp", &cp, &err), CONVO_ENOTFOUND);
    ck_assert_int_eq(schema_long(pg, "rwtx", "SELECT coalesce(sum(cardinality(writes)), 0)"
                                               " FROM @S.checkpoints"), 0);
    ck_assert_int_eq(schema_long(pg, "rwtx", "SELECT count(*) FROM @S.checkpoint_blobs"), 0);
    convo_close(s);
    PQfinish(pg);
    drop_schema("rwtx");
}
END_TEST

/* ---- the row lock: a rewrite held open in another session (its function
 * run in a transaction not yet committed), and calls that must wait for it */

typedef struct blocked {
    convo_store *s;
    int what; /* 0 fork, 1 put_writes, 2 rewrite */
    int rc;
    convo_error err;
} blocked;

static void *blocked_call(void *arg)
{
    blocked *c = arg;
    convo_fork_opts fo = CONVO_FORK_OPTS_INIT;
    convo_write_in w = {0, "ch", {"json", "2", 1}};
    if (c->what == 0)
        c->rc = convo_thread_fork_ex(c->s, "locked", "copy", -1, &fo, &c->err);
    else if (c->what == 1)
        c->rc = convo_checkpoint_put_writes(c->s, "locked", "", "cp", "late", "", &w, 1, &c->err);
    else
        c->rc = convo_replace_tail(c->s, "locked", 0, NULL, NULL, 0, NULL, NULL, &c->err);
    return NULL;
}

/* Opens a transaction on a new connection and runs sql (@S the schema) in it. */
static PGconn *hold(const char *name, const char *sql)
{
    PGconn *pg = admin();
    free(query1(pg, "BEGIN"));
    exec_in_schema(pg, schema_name(name), sql);
    return pg;
}

static const char held_rewrite[] =
    "SELECT * FROM @S.replace_tail('locked', 1, ARRAY[convert_to('{\"role\":\"assistant\","
    "\"n\":\"held\"}', 'UTF8')], ARRAY['assistant'], now(), NULL, -1, -1, true, NULL)";

/* A fork that comes while a rewrite is under way waits for it and copies the
 * new tail with the new generation; a rewrite that comes while a fork is
 * under way waits, and the copy is the old tail with the old generation.
 * Pending writes to a checkpoint the rewrite drops wait, then find it gone. */
START_TEST(test_rewrite_and_fork_never_mix)
{
    char app[64], more[128];
    snprintf(app, sizeof app, "pgx_rwlock_%08x", run_id);
    snprintf(more, sizeof more, "application_name=%s&pool=1", app);
    convo_store *s = open_ok(schema_url("rwlock", more));
    append3(s, "locked");
    convo_error err;
    pthread_t th;

    PGconn *holder = hold("rwlock", held_rewrite);
    blocked fork = {s, 0, 0, {0}};
    pthread_create(&th, NULL, blocked_call, &fork);
    wait_for_lock_wait(app);
    free(query1(holder, "COMMIT"));
    pthread_join(th, NULL);
    PQfinish(holder);
    ck_assert_msg(fork.rc == 0, "fork: %s", fork.err.message);
    convo_history *h;
    ck_assert_int_eq(convo_load(s, "copy", NULL, &h, &err), 0);
    ck_assert_int_eq(convo_history_length(h), 2);
    ck_assert_int_eq(convo_history_generation(h), 1);
    ck_assert_ptr_nonnull(strstr(convo_history_message(h, 1, NULL), "held"));
    convo_history_free(h);

    ck_assert_int_eq(convo_thread_delete(s, "copy", &err), 0);
    holder = hold("rwlock", "SELECT @S.thread_fork('locked', 'copy', -1, -1, now(), NULL)");
    blocked rewrite = {s, 2, 0, {0}};
    pthread_create(&th, NULL, blocked_call, &rewrite);
    wait_for_lock_wait(app);
    free(query1(holder, "COMMIT"));
    pthread_join(th, NULL);
    PQfinish(holder);
    ck_assert_msg(rewrite.rc == 0, "rewrite: %s", rewrite.err.message);
    ck_assert_int_eq(length_of(s, "locked"), 0);
    ck_assert_int_eq(generation_of(s, "locked"), 2);
    ck_assert_int_eq(length_of(s, "copy"), 2);
    ck_assert_int_eq(generation_of(s, "copy"), 1);

    append3(s, "locked");
    put_checkpoint(s, "locked", "cp");
    PGconn *pg = admin();
    exec_in_schema(pg, schema_name("rwlock"), "UPDATE @S.checkpoints SET log_length = 3");
    holder = hold("rwlock", held_rewrite);
    blocked writes = {s, 1, 0, {0}};
    pthread_create(&th, NULL, blocked_call, &writes);
    wait_for_lock_wait(app);
    free(query1(holder, "COMMIT"));
    pthread_join(th, NULL);
    PQfinish(holder);
    ck_assert_msg(writes.rc == CONVO_ENOTFOUND, "put_writes: %d %s", writes.rc,
                  writes.err.message);
    ck_assert_int_eq(schema_long(pg, "rwlock", "SELECT coalesce(sum(cardinality(writes)), 0)"
                                                 " FROM @S.checkpoints"), 0);
    ck_assert_int_eq(generation_of(s, "locked"), 3);

    /* a rewrite without a key (one statement) that waited for an append
     * works on what the append left: the appended message goes too */
    holder = hold("rwlock", "SELECT @S.append('locked', ARRAY[convert_to('{\"n\":3}', 'UTF8')],"
                            " ARRAY['user'], now(), NULL, -1, -1, NULL)");
    blocked pop = {s, 2, 0, {0}};
    pthread_create(&th, NULL, blocked_call, &pop);
    wait_for_lock_wait(app);
    free(query1(holder, "COMMIT"));
    pthread_join(th, NULL);
    PQfinish(holder);
    ck_assert_msg(pop.rc == 0, "rewrite: %s", pop.err.message);
    ck_assert_int_eq(length_of(s, "locked"), 0);
    ck_assert_int_eq(schema_long(pg, "rwlock", "SELECT count(*) FROM @S.messages m JOIN"
                                 " @S.threads t ON t.tid = m.tid WHERE t.thread_id = 'locked'"),
                     0);
    ck_assert_int_eq(generation_of(s, "locked"), 4);
    PQfinish(pg);
    convo_close(s);
    drop_schema("rwlock");
}
END_TEST

/* With ttl a rewrite moves the deadline; without, it clears one; a thread
 * whose deadline has passed is not there (CONVO_ENOTFOUND, nothing written). */
START_TEST(test_rewrite_ttl)
{
    convo_store *s = open_ok(schema_url("rwttl", "ttl=3600"));
    convo_store *plain = open_ok(schema_url("rwttl", NULL));
    PGconn *pg = admin();
    append3(s, "t");
    exec_in_schema(pg, schema_name("rwttl"),
                   "UPDATE @S.threads SET expires_at = now() + interval '10 s'");
    convo_error err;
    convo_rewrite_result r;
    ck_assert_int_eq(convo_replace_tail(s, "t", 2, NULL, NULL, 0, NULL, &r, &err), 0);
    ck_assert_int_eq(schema_long(pg, "rwttl", "SELECT count(*) FROM @S.threads"
                                 " WHERE expires_at > now() + interval '50 minutes'"), 1);
    ck_assert_int_eq(convo_replace_tail(plain, "t", 1, NULL, NULL, 0, NULL, &r, &err), 0);
    ck_assert_int_eq(schema_long(pg, "rwttl", "SELECT count(*) FROM @S.threads"
                                 " WHERE expires_at IS NULL"), 1);
    exec_in_schema(pg, schema_name("rwttl"),
                   "UPDATE @S.threads SET expires_at = now() - interval '1 s'");
    ck_assert_int_eq(convo_replace_tail(s, "t", 0, &AGAIN, NULL, 1, NULL, &r, &err),
                     CONVO_ENOTFOUND);
    ck_assert_int_eq(schema_long(pg, "rwttl", "SELECT length * 10 + generation FROM"
                                 " @S.threads"), 12);
    /* an append starts it afresh, at generation 0 */
    ck_assert_int_eq(append1(s, "t", &err), 0);
    ck_assert_int_eq(generation_of(s, "t"), 0);
    ck_assert_int_eq(length_of(s, "t"), 1);
    PQfinish(pg);
    convo_close(plain);
    convo_close(s);
    drop_schema("rwttl");
}
END_TEST

/* The generation is a condition in each form of the append: the one-statement
 * upsert and update (one message, a batch) and @S.append() (a key); a
 * missing thread is at 0 and is not created by a failed condition. */
START_TEST(test_append_generation_paths)
{
    convo_store *s = open_ok(schema_url("rwgen", NULL));
    PGconn *pg = admin();
    convo_error err;
    convo_append_opts o = CONVO_APPEND_OPTS_INIT;
    convo_append_result ar;
    for (size_t n = 1; n <= 2; n++) {
        o.expected_generation = 1;
        o.expected_length = -1;
        o.idempotency_key = n == 1 ? NULL : "k";
        ck_assert_int_eq(convo_append(s, "new", THREE, NULL, n, &o, &ar, &err),
                         CONVO_ECONFLICT);
        ck_assert_int_eq(rows_of(pg, "rwgen", "new"), 0);
    }
    append3(s, "t");
    convo_rewrite_result r;
    ck_assert_int_eq(convo_replace_tail(s, "t", 0, NULL, NULL, 0, NULL, &r, &err), 0);
    /* empty at generation 1: each form, each condition */
    const struct { int64_t length, generation; const char *key; size_t n; int rc; } cases[] = {
        {0, 0, NULL, 1, CONVO_ECONFLICT}, {-1, 0, NULL, 2, CONVO_ECONFLICT},
        {-1, 0, "k1", 1, CONVO_ECONFLICT}, {0, 1, NULL, 1, 0},
        {1, 1, NULL, 2, 0},               {3, 1, "k2", 1, 0},
        {-1, 1, "k2", 1, 0} /* replayed: the key answers first */,
        {-1, 0, "k2", 1, 0} /* replayed, even though the generation is stale */,
    };
    int64_t length = 0;
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        o.expected_length = cases[i].length;
        o.expected_generation = cases[i].generation;
        o.idempotency_key = cases[i].key;
        int rc = convo_append(s, "t", THREE, NULL, cases[i].n, &o, &ar, &err);
        ck_assert_msg(rc == cases[i].rc, "case %zu: %d %s", i, rc, err.message);
        if (rc == 0 && !ar.replayed)
            length += (int64_t)cases[i].n;
        ck_assert_int_eq(length_of(s, "t"), length);
    }
    ck_assert_int_eq(length, 4);
    PQfinish(pg);
    convo_close(s);
    drop_schema("rwgen");
}
END_TEST

/* ---- many writers at once on one thread, on a store's pool of 4: appenders,
 * rewriters without conditions (the one statement, and the function when a
 * writer came first) that keep the seed and put one message after it, and
 * forks. Every state is [seed, R, A...] where R is the message of the rewrite
 * that made the generation (any A at seq 1 only at generation 0): the thread
 * and every copy must be one such state, with no message row past its length. */

enum { STRESS_APPENDS = 150, STRESS_REWRITES = 100, STRESS_FORKS = 25 };

typedef struct stress {
    convo_store *s;
    int id, rc;
    convo_error err;
    int64_t made[STRESS_REWRITES]; /* rewriters: the generation each call made */
} stress;

static void *stress_append(void *arg)
{
    stress *w = arg;
    for (int i = 0; i < STRESS_APPENDS && w->rc == 0; i++) {
        char m[64];
        snprintf(m, sizeof m, "{\"role\":\"user\",\"a\":\"%d-%d\"}", w->id, i);
        const char *msgs[] = {m};
        w->rc = convo_append(w->s, "hot", msgs, NULL, 1, NULL, NULL, &w->err);
    }
    return NULL;
}

static void *stress_rewrite(void *arg)
{
    stress *w = arg;
    for (int i = 0; i < STRESS_REWRITES && w->rc == 0; i++) {
        char m[64];
        snprintf(m, sizeof m, "{\"role\":\"assistant\",\"r\":\"%d-%d\"}", w->id, i);
        const char *msgs[] = {m};
        convo_rewrite_result r;
        w->rc = convo_replace_tail(w->s, "hot", 1, msgs, NULL, 1, NULL, &r, &w->err);
        w->made[i] = r.generation;
    }
    return NULL;
}

static void *stress_fork(void *arg)
{
    stress *w = arg;
    for (int i = 0; i < STRESS_FORKS && w->rc == 0; i++) {
        char dst[32];
        snprintf(dst, sizeof dst, "copy-%d", i);
        w->rc = convo_thread_fork(w->s, "hot", dst, -1, &w->err);
    }
    return NULL;
}

/* Checks that thread is one whole state; rewrite_of[g] is the "r" token of
 * the rewrite that made generation g. */
static void assert_one_state(convo_store *s, PGconn *pg, const char *thread,
                             char (*rewrite_of)[24], int64_t generations)
{
    convo_history *h;
    convo_error err;
    ck_assert_msg(convo_load(s, thread, NULL, &h, &err) == 0, "%s: %s", thread, err.message);
    int64_t g = convo_history_generation(h), length = convo_history_length(h);
    ck_assert_int_le(g, generations);
    ck_assert_str_eq(convo_history_message(h, 0, NULL), THREE[0]);
    for (int64_t i = 1; i < length; i++) {
        const char *m = convo_history_message(h, (size_t)i, NULL);
        int rewrite = strstr(m, "\"r\"") != NULL;
        if (i == 1 && g > 0) {
            char want[64];
            snprintf(want, sizeof want, "{\"role\":\"assistant\",\"r\":\"%s\"}", rewrite_of[g]);
            ck_assert_msg(strcmp(m, want) == 0, "%s at generation %lld: seq 1 is %s, not %s",
                          thread, (long long)g, m, want);
        } else {
            ck_assert_msg(!rewrite, "%s at generation %lld: seq %lld is %s", thread,
                          (long long)g, (long long)i, m);
        }
    }
    convo_history_free(h);
    char sql[512];
    snprintf(sql, sizeof sql, "SELECT count(*) FROM \"%s\".messages m JOIN \"%s\".threads t"
             " ON t.tid = m.tid WHERE t.thread_id = '%s'", schema_name("rwstress"),
             schema_name("rwstress"), thread);
    ck_assert_int_eq(query_long(pg, sql), length);
}

START_TEST(test_rewrite_stress)
{
    convo_store *s = open_ok(schema_url("rwstress", "pool=4"));
    convo_error err;
    ck_assert_int_eq(convo_append(s, "hot", THREE, NULL, 1, NULL, NULL, &err), 0);
    enum { APPENDERS = 3, REWRITERS = 2 };
    stress w[APPENDERS + REWRITERS + 1];
    pthread_t th[APPENDERS + REWRITERS + 1];
    for (int i = 0; i < APPENDERS + REWRITERS + 1; i++) {
        memset(&w[i], 0, sizeof w[i]);
        w[i].s = s;
        w[i].id = i;
        pthread_create(&th[i], NULL,
                       i < APPENDERS ? stress_append
                       : i < APPENDERS + REWRITERS ? stress_rewrite : stress_fork,
                       &w[i]);
    }
    for (int i = 0; i < APPENDERS + REWRITERS + 1; i++) {
        pthread_join(th[i], NULL);
        ck_assert_msg(w[i].rc == 0, "writer %d: %s", i, w[i].err.message);
    }
    /* every rewrite made one generation of its own */
    int64_t generations = REWRITERS * STRESS_REWRITES;
    static char rewrite_of[REWRITERS * STRESS_REWRITES + 1][24]; /* "K-I", two ints */
    memset(rewrite_of, 0, sizeof rewrite_of);
    for (int k = APPENDERS; k < APPENDERS + REWRITERS; k++)
        for (int i = 0; i < STRESS_REWRITES; i++) {
            int64_t g = w[k].made[i];
            ck_assert(g >= 1 && g <= generations && rewrite_of[g][0] == '\0');
            snprintf(rewrite_of[g], sizeof rewrite_of[g], "%d-%d", k, i);
        }
    ck_assert_int_eq(generation_of(s, "hot"), generations);
    PGconn *pg = admin();
    assert_one_state(s, pg, "hot", rewrite_of, generations);
    for (int i = 0; i < STRESS_FORKS; i++) {
        char dst[32];
        snprintf(dst, sizeof dst, "copy-%d", i);
        assert_one_state(s, pg, dst, rewrite_of, generations);
    }
    PQfinish(pg);
    convo_close(s);
    drop_schema("rwstress");
}
END_TEST

/* ---- cost: a rewrite of the last message ("regenerate the answer") next to
 * a one-message append, on one connection, one call of each in turn (so that
 * the machine's load falls on both alike), the median of each; the rewrite
 * with a key (the function) in rounds of its own. Reported, not asserted
 * (wall time on a shared machine); every call must succeed and each rewrite
 * must count one generation. */

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, by_value);
    return v[n / 2];
}

/* One round: an append, then the kinds of rewrite asked for (bit 0 without
 * conditions, 1 on (length, generation), 2 with an idempotency key: then the
 * append has one too), each of the last message, timed; t[0] the append,
 * t[k + 1] the rewrites. */
static size_t cost_round(convo_store *s, int kinds, size_t i, int64_t *length,
                         int64_t *generation, double t[4])
{
    convo_error err;
    size_t failed = 0;
    convo_append_opts ao = CONVO_APPEND_OPTS_INIT;
    char append_key[32];
    snprintf(append_key, sizeof append_key, "a%zu", i);
    ao.idempotency_key = kinds & 4 ? append_key : NULL;
    double t0 = seconds_now();
    failed += convo_append(s, "cost", &msg1, NULL, 1, &ao, NULL, &err) != 0;
    ++*length;
    t[0] = seconds_now() - t0;
    for (int k = 0; k < 3; k++) {
        if (!(kinds & (1 << k)))
            continue;
        convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
        convo_rewrite_result r = {0};
        char key[32];
        snprintf(key, sizeof key, "k%zu", i);
        if (k == 1) {
            o.expected_length = *length;
            o.expected_generation = *generation;
        } else if (k == 2) {
            o.idempotency_key = key;
        }
        t0 = seconds_now();
        failed += convo_replace_tail(s, "cost", *length - 1, &AGAIN, NULL, 1, &o, &r, &err) != 0;
        t[k + 1] = seconds_now() - t0;
        *generation = r.generation;
    }
    ck_assert_msg(failed == 0, "%zu calls failed: %s", failed, err.message);
    return failed;
}

/* n rounds of cost_round(kinds), the first 10 not counted (statements being
 * prepared); the medians into median_of[]. */
static void cost_rounds(convo_store *s, int kinds, size_t n, int64_t *length,
                        int64_t *generation, double median_of[4])
{
    double *t[4];
    for (int k = 0; k < 4; k++)
        ck_assert_ptr_nonnull(t[k] = calloc(n + 10, sizeof *t[k]));
    for (size_t i = 0; i < n + 10; i++) {
        double one[4] = {0};
        int64_t before = *generation;
        cost_round(s, kinds, i, length, generation, one);
        ck_assert_int_eq(*generation - before, __builtin_popcount((unsigned)kinds));
        for (int k = 0; k < 4; k++)
            t[k][i] = one[k];
    }
    for (int k = 0; k < 4; k++) {
        median_of[k] = median(t[k] + 10, n);
        free(t[k]);
    }
}

START_TEST(test_rewrite_cost_against_append)
{
    const char *env = getenv("CONVO_PG_BENCH_N");
    size_t n = env ? (size_t)atol(env) : 2000;
    convo_store *s = open_ok(schema_url("rwcost", "pool=1"));
    convo_error err;
    for (int i = 0; i < 10; i++) /* a history */
        ck_assert_int_eq(append1(s, "cost", &err), 0);
    int64_t length = 10, generation = 0;
    double m[4], keyed[4];
    cost_rounds(s, 3, n, &length, &generation, m);
    cost_rounds(s, 4, n, &length, &generation, keyed);
    ck_assert_int_eq(generation_of(s, "cost"), generation);
    ck_assert_int_eq(length_of(s, "cost"), length);
    fprintf(stderr,
            "postgres: %zu rounds, median per call: append %.1f us, rewrite of the last"
            " message %.1f us (%.2f appends), the same on (length, generation) %.1f us (%.2f"
            " appends); with idempotency keys (@S.append(), @S.replace_tail()), %zu rounds:"
            " append %.1f us, rewrite %.1f us (%.2f appends)\n",
            n, m[0] * 1e6, m[1] * 1e6, m[1] / m[0], m[2] * 1e6, m[2] / m[0], n,
            keyed[0] * 1e6, keyed[3] * 1e6, keyed[3] / keyed[0]);
    convo_close(s);
    drop_schema("rwcost");
}
END_TEST

void postgres_add_rewrite_tests(Suite *s)
{
    TCase *tc = tcase_create("rewrite");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_migration_from_version_7);
    tcase_add_test(tc, test_rewrite_one_transaction);
    tcase_add_test(tc, test_rewrite_and_fork_never_mix);
    tcase_add_test(tc, test_rewrite_ttl);
    tcase_add_test(tc, test_append_generation_paths);
    tcase_add_test(tc, test_rewrite_stress);
    suite_add_tcase(s, tc);
    tc = tcase_create("rewrite-cost");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, test_rewrite_cost_against_append);
    suite_add_tcase(s, tc);
}
