/* sqlite-layout9.c — layout 9 of the SQLite driver (docs/sqlite.md, "Layout 9:
 * channel lists as deltas") beyond the conformance suite:
 *   - a checkpoint's channel list is stored as what changed against the row
 *     before it (at most 16 deltas in a row, a full list after a change of
 *     namespace), and every checkpoint reads back its own list (get and list);
 *   - every remaining checkpoint stays readable after prune, delete by
 *     metadata (delete-by-run), a rewrite dropping checkpoints, a copy that
 *     leaves rows behind and a re-put that changes a list: the row after one
 *     that goes or changes is stored in full first;
 *   - convo_checkpoint_reach bounds a thread's log_length: a rewrite past it
 *     conflicts, one within it does not, and a bound left too high by a
 *     removal is made exact by the next rewrite;
 *   - a delta that does not decode is CONVO_ECORRUPT;
 *   - a connection's memory of the last list it decoded is not taken for a
 *     row another connection rewrote at the same place;
 *   - a layout-8 file is migrated on open (lists kept, bounds filled, the
 *     index on log_length gone) and a layout-8 process that had it open can
 *     no longer read or write checkpoints.
 * `tests/sqlite_layout9 DIR`: DIR a scratch folder. */
#include <check.h>
#include <convo.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "sqlite_layout.h"

#define N 40

/* Checkpoint k of the test threads: channel a changes at every checkpoint,
 * b every third, c is there below 10 and from 20 on; every fifth from 2 on
 * refers to more of the log than the others (so a rewrite or a copy by
 * log_length leaves rows behind in the middle). */
static void version_of(int k, char ch, char *out, size_t cap)
{
    snprintf(out, cap, "%c%d", ch, ch == 'a' ? k : ch == 'b' ? k / 3 : k < 10 ? 0 : 20);
}

static int has_c(int k)
{
    return k < 10 || k >= 20;
}

static int64_t log_length_of(int k)
{
    return k % 5 == 2 ? 9 : k / 8;
}

static void put_k(convo_store *s, const char *tid, const char *ns, int k)
{
    char id[16], parent[16], meta[64], va[16], vb[16], vc[16], xa[24], xb[24], xc[24];
    snprintf(id, sizeof id, "k%02d", k);
    snprintf(parent, sizeof parent, "k%02d", k - 1);
    snprintf(meta, sizeof meta, "{\"k\":%d,\"run\":\"r%d\"}", k, k % 3);
    version_of(k, 'a', va, sizeof va);
    version_of(k, 'b', vb, sizeof vb);
    version_of(k, 'c', vc, sizeof vc);
    snprintf(xa, sizeof xa, "\"%s\"", va);
    snprintf(xb, sizeof xb, "\"%s\"", vb);
    snprintf(xc, sizeof xc, "\"%s\"", vc);
    convo_blob ba = {"json", xa, strlen(xa)}, bb = {"json", xb, strlen(xb)},
               bc = {"json", xc, strlen(xc)};
    convo_channel_in ch[3] = {{"a", va, &ba}, {"b", vb, &bb}, {"c", vc, &bc}};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = tid;
    cp.checkpoint_ns = ns;
    cp.checkpoint_id = id;
    cp.parent_id = k ? parent : NULL;
    cp.metadata_json = meta;
    cp.log_length = log_length_of(k);
    cp.channels = ch;
    cp.nchannels = has_c(k) ? 3 : 2;
    convo_error err;
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put %s: %s", id, err.message);
}

/* A thread of N checkpoints (and 10 messages for their log_length). */
static void thread_of(convo_store *s, const char *tid)
{
    const char *m = "{\"role\":\"user\",\"content\":\"x\"}";
    convo_error err;
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(convo_append(s, tid, &m, NULL, 1, NULL, NULL, &err), 0);
    for (int k = 0; k < N; k++)
        put_k(s, tid, "", k);
}

/* cp is checkpoint k with its channels, versions and values. */
static void assert_is_k(const convo_checkpoint *cp, int k)
{
    char id[16], want[16], value[24];
    snprintf(id, sizeof id, "k%02d", k);
    ck_assert_str_eq(convo_checkpoint_id(cp), id);
    ck_assert_int_eq(convo_checkpoint_log_length(cp), log_length_of(k));
    size_t n = has_c(k) ? 3 : 2;
    ck_assert_msg(convo_checkpoint_channel_count(cp) == n, "%s has %zu channels", id,
                  convo_checkpoint_channel_count(cp));
    for (size_t i = 0; i < n; i++) {
        const char *version;
        convo_blob v;
        const char *name = convo_checkpoint_channel(cp, i, &version, &v);
        ck_assert_int_eq(name[0], "abc"[i]);
        version_of(k, name[0], want, sizeof want);
        ck_assert_msg(strcmp(version, want) == 0, "%s: %s at %s", id, name, version);
        snprintf(value, sizeof value, "\"%s\"", want);
        ck_assert_msg(v.type && v.len == strlen(value) && memcmp(v.bytes, value, v.len) == 0,
                      "%s: %s's value", id, name);
    }
}

static void assert_get_k(convo_store *s, const char *tid, int k)
{
    char id[16];
    snprintf(id, sizeof id, "k%02d", k);
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_get(s, tid, "", id, &cp, &err) == 0, "get %s: %s", id,
                  err.message);
    assert_is_k(cp, k);
    convo_checkpoint_free(cp);
}

/* Exactly the checkpoints with keep[k] remain, each read back whole by get
 * and by one list (newest first). */
static void assert_remaining(convo_store *s, const char *tid, const int *keep)
{
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = tid;
    convo_checkpoint_set *set = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_list(s, &o, &set, &err) == 0, "list: %s", err.message);
    size_t at = 0;
    for (int k = N - 1; k >= 0; k--) {
        if (!keep[k])
            continue;
        ck_assert_msg(at < convo_checkpoint_set_count(set), "k%02d not listed", k);
        assert_is_k(convo_checkpoint_set_get(set, at++), k);
        assert_get_k(s, tid, k);
    }
    ck_assert_int_eq(at, convo_checkpoint_set_count(set));
    convo_checkpoint_set_free(set);
}

/* The longest run of delta rows (its first byte 0x00) in key order. */
static int longest_delta_run(const char *path)
{
    sqlite3 *db;
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT substr(channel_list, 1, 1) = x'00'"
                                            " FROM convo_checkpoints ORDER BY key",
                                        -1, &st, NULL),
                     SQLITE_OK);
    int run = 0, longest = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        run = sqlite3_column_int(st, 0) ? run + 1 : 0;
        longest = run > longest ? run : longest;
    }
    sqlite3_finalize(st);
    sqlite3_close(db);
    return longest;
}

static void all(int *keep, int v)
{
    for (int k = 0; k < N; k++)
        keep[k] = v;
}

START_TEST(test_lists_are_deltas)
{
    const char *path = db_path("deltas");
    convo_store *s = open_db(path);
    thread_of(s, "t");
    int keep[N];
    all(keep, 1);
    assert_remaining(s, "t", keep);
    /* at most 16 deltas in a row (the chain a read decodes), smaller than the
     * full lists */
    ck_assert_int_eq(longest_delta_run(path), 16);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoints"
                                   " WHERE substr(channel_list, 1, 1) <> x'00'"),
                     5); /* k00, k35 after 16 deltas, and k12, k15, k18: without c a
                          * full list is no longer than the delta */
    /* since layout 11 an entry holds the value its checkpoint brings (6-7
     * bytes here, 8 more a value): a delta of a and b takes 29 bytes */
    ck_assert_int_le(sql_int(path, "SELECT max(length(channel_list)) FROM convo_checkpoints"
                                   " WHERE substr(channel_list, 1, 1) = x'00'"),
                     29);
    /* 380 bytes of lists (layout 9) and the 56 values with their 3 more bytes
     * an entry, which full lists repeat */
    ck_assert_int_le(sql_int(path, "SELECT sum(length(channel_list)) FROM convo_checkpoints"),
                     808);
    /* the values stay once per version, in the entries (none in convo_blobs) */
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_blobs"), 0);
    convo_close(s);
}
END_TEST

START_TEST(test_namespaces_take_full_lists)
{
    const char *path = db_path("ns");
    convo_store *s = open_db(path);
    for (int k = 0; k < 6; k++)
        put_k(s, "t", k % 2 ? "sub" : "", k);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoints"
                                   " WHERE substr(channel_list, 1, 1) = x'00'"),
                     0);
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "sub", "k05", &cp, &err), 0);
    assert_is_k(cp, 5);
    convo_checkpoint_free(cp);
    convo_close(s);
}
END_TEST

START_TEST(test_prune_and_delete_keep_the_rest_readable)
{
    const char *path = db_path("prune");
    convo_store *s = open_db(path);
    thread_of(s, "t");
    int keep[N];
    all(keep, 1);
    /* delete-by-run: every third checkpoint, full lists (k00) among them */
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = "t";
    o.filter_json = "{\"run\":\"r0\"}";
    uint64_t removed = 0;
    convo_error err;
    ck_assert_msg(convo_checkpoint_delete(s, &o, &removed, &err) == 0, "%s", err.message);
    ck_assert_int_eq(removed, 14);
    for (int k = 0; k < N; k += 3)
        keep[k] = 0;
    assert_remaining(s, "t", keep);
    ck_assert_int_le(longest_delta_run(path), 16);
    /* prune: the newest 5 stay, the newest first in full then */
    ck_assert_int_eq(convo_checkpoint_prune(s, "t", 5, &err), 0);
    all(keep, 0);
    keep[38] = keep[37] = keep[35] = keep[34] = keep[32] = 1;
    assert_remaining(s, "t", keep);
    ck_assert_int_eq(sql_int(path, "SELECT substr(channel_list, 1, 1) <> x'00'"
                                   " FROM convo_checkpoints ORDER BY key LIMIT 1"),
                     1);
    /* and the values the removed ones alone used are gone with their rows
     * (layout 11: in the list entries; the rest read back above) */
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_blobs"), 0);
    convo_close(s);
}
END_TEST

START_TEST(test_rewrite_and_bound)
{
    const char *path = db_path("rewrite");
    convo_store *s = open_db(path);
    thread_of(s, "t");
    ck_assert_int_eq(sql_int(path, "SELECT log_length FROM convo_checkpoint_reach"), 9);
    convo_rewrite_opts ro = CONVO_REWRITE_OPTS_INIT;
    convo_rewrite_result r;
    convo_error err;
    ck_assert_int_eq(convo_replace_tail(s, "t", 9, NULL, NULL, 0, &ro, &r, &err), 0);
    ck_assert_int_eq(convo_replace_tail(s, "t", 8, NULL, NULL, 0, &ro, &r, &err),
                     CONVO_ECONFLICT);
    /* dropping those past 3 messages: every fifth and k >= 32 */
    ro.drop_checkpoints = 1;
    ck_assert_msg(convo_replace_tail(s, "t", 3, NULL, NULL, 0, &ro, &r, &err) == 0, "%s",
                  err.message);
    int keep[N];
    for (int k = 0; k < N; k++)
        keep[k] = log_length_of(k) <= 3;
    assert_remaining(s, "t", keep);
    ck_assert_int_eq(sql_int(path, "SELECT log_length FROM convo_checkpoint_reach"), 3);
    /* removing those at 3 leaves the bound high; a rewrite within the rest
     * still passes and makes it exact */
    for (int k = 24; k < 32; k++) {
        char filter[32];
        snprintf(filter, sizeof filter, "{\"k\":%d}", k);
        convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
        o.thread_id = "t";
        o.filter_json = filter;
        uint64_t removed;
        ck_assert_int_eq(convo_checkpoint_delete(s, &o, &removed, &err), 0);
        ck_assert_int_eq(removed, (uint64_t)keep[k]);
        keep[k] = 0;
    }
    ck_assert_int_eq(sql_int(path, "SELECT log_length FROM convo_checkpoint_reach"), 3);
    ro.drop_checkpoints = 0;
    ck_assert_msg(convo_replace_tail(s, "t", 2, NULL, NULL, 0, &ro, &r, &err) == 0, "%s",
                  err.message);
    ck_assert_int_eq(sql_int(path, "SELECT log_length FROM convo_checkpoint_reach"), 2);
    assert_remaining(s, "t", keep);
    convo_close(s);
}
END_TEST

START_TEST(test_copy_leaving_rows_behind)
{
    const char *path = db_path("copy");
    convo_store *s = open_db(path);
    thread_of(s, "t");
    convo_fork_opts fo = CONVO_FORK_OPTS_INIT;
    fo.with_checkpoints = 1;
    convo_error err;
    ck_assert_msg(convo_thread_fork_ex(s, "t", "u", 4, &fo, &err) == 0, "%s", err.message);
    int keep[N];
    for (int k = 0; k < N; k++)
        keep[k] = log_length_of(k) <= 4;
    assert_remaining(s, "u", keep);
    ck_assert_int_eq(sql_int(path, "SELECT r.log_length FROM convo_checkpoint_reach AS r"
                                   " JOIN convo_threads AS t ON t.num = r.thread"
                                   " WHERE t.id = 'u'"),
                     4);
    all(keep, 1);
    assert_remaining(s, "t", keep);
    convo_close(s);
}
END_TEST

START_TEST(test_reput_changing_a_list)
{
    const char *path = db_path("reput");
    convo_store *s = open_db(path);
    thread_of(s, "t");
    convo_blob v = {"json", "1", 1};
    convo_channel_in ch[2] = {{"a", "other", &v}, {"d", "1", &v}};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = "t";
    cp.checkpoint_id = "k10";
    cp.parent_id = "k09";
    cp.metadata_json = "{}";
    cp.channels = ch;
    cp.nchannels = 2;
    convo_error err;
    ck_assert_int_eq(convo_checkpoint_put(s, &cp, &err), 0);
    convo_checkpoint *got = NULL;
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", "k10", &got, &err), 0);
    ck_assert_int_eq(convo_checkpoint_channel_count(got), 2);
    const char *version;
    convo_blob value;
    ck_assert_str_eq(convo_checkpoint_channel(got, 1, &version, &value), "d");
    convo_checkpoint_free(got);
    for (int k = 0; k < N; k++)
        if (k != 10)
            assert_get_k(s, "t", k);
    convo_close(s);
}
END_TEST

START_TEST(test_undecodable_delta_is_corrupt)
{
    const char *path = db_path("corrupt");
    convo_store *s = open_db(path);
    thread_of(s, "t");
    convo_checkpoint *cp = NULL;
    convo_error err;
    exec_raw(path, "UPDATE convo_checkpoints SET channel_list = x'00ff' WHERE id = 'k03'");
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", "k03", &cp, &err), CONVO_ECORRUPT);
    /* well-formed entries saying what a stored delta never says: channel 2
     * (b) at the version of a 0x04 without its entry number, and channel 4
     * gone where the list before has no channel 4 */
    /* (layout 11: with the values k03 brought, a3 and b1, in the entries) */
    char sql[256];
    int json = (int)sql_int(path, "SELECT num FROM convo_names WHERE name = 'json'");
    ck_assert_int_lt(json, 128);
    snprintf(sql, sizeof sql,
             "UPDATE convo_checkpoints SET channel_list = x'00010003006133%02x0422613322"
             "020003006231%02x0422623122' WHERE id = 'k03'",
             json, json);
    exec_raw(path, sql);
    assert_get_k(s, "t", 4);
    exec_raw(path, "UPDATE convo_checkpoints SET channel_list = x'000103006134020104'"
                   " WHERE id = 'k04'");
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", "k04", &cp, &err), CONVO_ECORRUPT);
    ck_assert_ptr_null(cp);
    exec_raw(path, "UPDATE convo_checkpoints SET channel_list = x'000103006134' WHERE id = 'k04'");
    assert_get_k(s, "t", 5);
    exec_raw(path, "UPDATE convo_checkpoints SET channel_list = x'000103006135040105'"
                   " WHERE id = 'k05'");
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", "k05", &cp, &err), CONVO_ECORRUPT);
    ck_assert_ptr_null(cp);
    /* no full list within 16 rows before a delta */
    exec_raw(path, "UPDATE convo_checkpoints SET channel_list = x'00' WHERE id = 'k00'");
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", "k02", &cp, &err), CONVO_ECORRUPT);
    ck_assert_ptr_null(cp);
    assert_get_k(s, "t", 18); /* the next chain needs neither */
    convo_close(s);
}
END_TEST

START_TEST(test_migration_8_to_9)
{
    const char *path = db_path("eight");
    convo_store *s = open_db(path);
    /* layout-8 rows: full lists only (a namespace per checkpoint) */
    const char *m = "{\"role\":\"user\",\"content\":\"x\"}";
    convo_error err;
    for (int i = 0; i < 10; i++)
        ck_assert_int_eq(convo_append(s, "t", &m, NULL, 1, NULL, NULL, &err), 0);
    for (int k = 0; k < 6; k++)
        put_k(s, "t", k % 2 ? "sub" : "", k);
    convo_close(s);
    exec_raw(path, LAYOUT_16_TO_15 LAYOUT_15_TO_14 LAYOUT_14_TO_13 LAYOUT_13_TO_12 LAYOUT_10_TO_9
                   "ALTER TABLE convo_checkpoints RENAME COLUMN channel_list TO channels;"
                   "DROP TABLE convo_checkpoint_reach;"
                   "CREATE INDEX convo_checkpoints_by_log_length"
                   " ON convo_checkpoints(thread, log_length);"
                   "UPDATE convo_meta SET value = '8' WHERE key = 'schema_version'");
    /* a layout-8 process that has the file open */
    sqlite3 *old;
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_open(path, &old), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(old, "SELECT channels FROM convo_checkpoints", -1, &st,
                                        NULL),
                     SQLITE_OK);
    s = open_db(path);
    ck_assert_int_eq(sql_int(path, "SELECT value FROM convo_meta WHERE key = 'schema_version'"),
                     SQLITE_LAYOUT_NOW);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM sqlite_master"
                                   " WHERE name = 'convo_checkpoints_by_log_length'"),
                     0);
    ck_assert_int_eq(sql_int(path, "SELECT log_length FROM convo_checkpoint_reach"), 9);
    for (int k = 0; k < 6; k++) {
        convo_checkpoint *cp = NULL;
        char id[16];
        snprintf(id, sizeof id, "k%02d", k);
        ck_assert_int_eq(convo_checkpoint_get(s, "t", k % 2 ? "sub" : "", id, &cp, &err), 0);
        assert_is_k(cp, k);
        convo_checkpoint_free(cp);
    }
    /* new puts after the migrated rows are deltas against them */
    for (int k = 6; k < N; k++)
        put_k(s, "t", "", k);
    ck_assert_int_gt(sql_int(path, "SELECT count(*) FROM convo_checkpoints"
                                   " WHERE substr(channel_list, 1, 1) = x'00'"),
                     25);
    for (int k = 6; k < N; k++)
        assert_get_k(s, "t", k);
    /* the old process's statement no longer reads, its put no longer writes */
    ck_assert_int_ne(sqlite3_step(st), SQLITE_ROW);
    sqlite3_finalize(st);
    ck_assert_int_eq(sqlite3_exec(old, "INSERT INTO convo_checkpoints(key, thread, ns, id, meta,"
                                       " log_length, created_at, put_order, channels)"
                                       " VALUES(1, 1, '', 'y', '{}', 0, 1, 1, x'')",
                                  NULL, NULL, NULL),
                     SQLITE_ERROR);
    sqlite3_close(old);
    convo_close(s);
    exec_raw(path, "PRAGMA integrity_check");
}
END_TEST

/* Checkpoint id of thread "m" with channels a and b at those versions. */
static void put_ab(convo_store *s, const char *id, const char *va, const char *vb)
{
    convo_blob v = {"json", "1", 1};
    convo_channel_in ch[2] = {{"a", va, &v}, {"b", vb, &v}};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = "m";
    cp.checkpoint_id = id;
    cp.metadata_json = "{\"x\":1}";
    cp.channels = ch;
    cp.nchannels = 2;
    convo_error err;
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put %s: %s", id, err.message);
}

static void assert_ab(convo_store *s, const char *id, const char *va, const char *vb)
{
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_get(s, "m", "", id, &cp, &err) == 0, "%s", err.message);
    const char *version;
    convo_blob value;
    ck_assert_int_eq(convo_checkpoint_channel_count(cp), 2);
    convo_checkpoint_channel(cp, 0, &version, &value);
    ck_assert_str_eq(version, va);
    convo_checkpoint_channel(cp, 1, &version, &value);
    ck_assert_str_eq(version, vb);
    convo_checkpoint_free(cp);
}

/* A connection remembers the last list it decoded or stored (a put after a
 * put reads one row, not the chain). Another store's connection removes the
 * rows and puts new ones at the same places, the last with the very bytes
 * the first remembered but after a different row: the first must not take
 * its memory for that row's list (it would give a1, not a9). */
START_TEST(test_memo_of_another_connection)
{
    const char *path = db_path("memo");
    convo_store *s1 = open_db(path), *s2 = open_db(path);
    put_ab(s1, "m0", "a0", "b0");
    put_ab(s1, "m1", "a1", "b0");
    put_ab(s1, "m2", "a1", "b2"); /* a delta: b -> b2 */
    assert_ab(s1, "m2", "a1", "b2");
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = "m";
    o.filter_json = "{\"x\":1}";
    o.before = "m1";
    uint64_t removed;
    convo_error err;
    ck_assert_int_eq(convo_checkpoint_delete(s2, &o, &removed, &err), 0);
    ck_assert_int_eq(removed, 1); /* m0 */
    o.before = NULL;
    ck_assert_int_eq(convo_checkpoint_delete(s2, &o, &removed, &err), 0);
    ck_assert_int_eq(removed, 2);
    put_ab(s2, "n0", "a9", "b0");
    put_ab(s2, "n1", "a9", "b0"); /* the same list: an empty delta */
    put_ab(s2, "n2", "a9", "b2"); /* b -> b2 again, at m2's place */
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoints"
                                   " WHERE substr(channel_list, 1, 1) = x'00'"),
                     2);
    assert_ab(s1, "n2", "a9", "b2");
    put_ab(s1, "n3", "a9", "b3"); /* after a row another connection wrote */
    assert_ab(s2, "n3", "a9", "b3");
    convo_close(s2);
    convo_close(s1);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    Suite *suite = suite_create("layout9");
    TCase *tc = tcase_create("layout9");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_lists_are_deltas);
    tcase_add_test(tc, test_namespaces_take_full_lists);
    tcase_add_test(tc, test_prune_and_delete_keep_the_rest_readable);
    tcase_add_test(tc, test_rewrite_and_bound);
    tcase_add_test(tc, test_copy_leaving_rows_behind);
    tcase_add_test(tc, test_reput_changing_a_list);
    tcase_add_test(tc, test_undecodable_delta_is_corrupt);
    tcase_add_test(tc, test_migration_8_to_9);
    tcase_add_test(tc, test_memo_of_another_connection);
    suite_add_tcase(suite, tc);
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
