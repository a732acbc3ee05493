/* sqlite-segments.c — layout 17's sealed segments (docs/sqlite.md, "Layout
 * 17"): a put seals the block of 16 positions it leaves 3 behind; every read
 * (get by id, latest, list with before / limit / filter, one channel, pending
 * writes) and every operation (put_writes and re-put on a sealed checkpoint,
 * prune, delete by filter, thread delete, fork with checkpoints, convo_copy)
 * sees sealed and unsealed checkpoints alike; a corrupt segment is
 * CONVO_ECORRUPT; a seal that fails rolls the put back whole; the migrations
 * from layouts 16 and 15. `tests/sqlite_segments DIR` works in DIR. */
#include "sqlite_layout.h"

#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define N 45 /* positions 0..44: blocks 0 and 1 sealed (by the puts at 19 and 35) */
#define TASK "46f2b824-1007-5938-980a-efe0c0bb8de3"

static const char *uuid(int n)
{
    static char buf[8][40];
    static int next;
    char *b = buf[next++ % 8];
    snprintf(b, 40, "1f0%05x-0000-6000-8000-000000000000", (unsigned)n);
    return b;
}

/* checkpoint n of tid: channel a at version n (value n), channel b at version
 * 1 (its value "B" brought by checkpoint 0 only), metadata with step n and
 * run r<n % 2>, body body-n */
static int with_log; /* 1: checkpoint n has log_length n + 1 (the thread has the messages) */

static int put_n(convo_store *s, const char *tid, int n, const char *extra_meta)
{
    char version[16], value[16], meta[128], body[32];
    snprintf(version, sizeof version, "%d", n + 1);
    snprintf(value, sizeof value, "%d", n);
    snprintf(meta, sizeof meta, "{\"step\":%d,\"run_id\":\"r%d\",\"source\":\"loop\"%s}", n,
             n % 2, extra_meta ? extra_meta : "");
    snprintf(body, sizeof body, "body-%d", n);
    convo_blob va = {"json", value, strlen(value)}, vb = {"json", "\"B\"", 3};
    convo_channel_in ch[2] = {{"a", version, &va}, {"b", "1", n == 0 ? &vb : NULL}};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = tid;
    cp.checkpoint_id = uuid(n);
    cp.parent_id = n ? uuid(n - 1) : NULL;
    cp.metadata_json = meta;
    cp.body = (convo_blob){"text", body, strlen(body)};
    cp.channels = ch;
    cp.nchannels = 2;
    cp.log_length = with_log ? n + 1 : 0;
    convo_error err;
    int rc = convo_checkpoint_put(s, &cp, &err);
    return rc;
}

static void put_range(convo_store *s, const char *tid, int from, int to)
{
    for (int n = from; n < to; n++)
        ck_assert_msg(put_n(s, tid, n, NULL) == 0, "put %d", n);
}

/* cp is checkpoint n as put_n stored it */
static void is_n(const convo_checkpoint *cp, int n)
{
    char value[16], step[32], body[32];
    ck_assert_str_eq(convo_checkpoint_id(cp), uuid(n));
    if (n)
        ck_assert_str_eq(convo_checkpoint_parent_id(cp), uuid(n - 1));
    else
        ck_assert_ptr_null(convo_checkpoint_parent_id(cp));
    snprintf(step, sizeof step, "\"step\":%d,", n);
    ck_assert_msg(strstr(convo_checkpoint_metadata(cp), step) != NULL, "%d: metadata %s", n,
                  convo_checkpoint_metadata(cp));
    convo_blob b = convo_checkpoint_body(cp);
    snprintf(body, sizeof body, "body-%d", n);
    ck_assert_str_eq(b.type, "text");
    ck_assert_uint_eq(b.len, strlen(body));
    ck_assert_int_eq(memcmp(b.bytes, body, b.len), 0);
    ck_assert_uint_eq(convo_checkpoint_channel_count(cp), 2);
    const char *version;
    convo_blob v;
    ck_assert_str_eq(convo_checkpoint_channel(cp, 0, &version, &v), "a");
    snprintf(value, sizeof value, "%d", n);
    ck_assert_uint_eq(v.len, strlen(value));
    ck_assert_int_eq(memcmp(v.bytes, value, v.len), 0);
    ck_assert_str_eq(convo_checkpoint_channel(cp, 1, &version, &v), "b");
    ck_assert_uint_eq(v.len, 3);
    ck_assert_int_eq(memcmp(v.bytes, "\"B\"", 3), 0);
    ck_assert_int_gt(convo_checkpoint_created_at(cp), 0);
}

static int get_n(convo_store *s, const char *tid, int n, convo_checkpoint **out)
{
    convo_error err;
    return convo_checkpoint_get(s, tid, "", n < 0 ? NULL : uuid(n), out, &err);
}

static void see_n(convo_store *s, const char *tid, int n)
{
    convo_checkpoint *cp = NULL;
    ck_assert_msg(get_n(s, tid, n, &cp) == 0, "get %d", n);
    is_n(cp, n);
    convo_checkpoint_free(cp);
}

static long long sealed_rows(const char *path)
{
    return sql_int(path, "SELECT count(*) FROM convo_checkpoints WHERE sealed = 1");
}

static long long segments(const char *path)
{
    return sql_int(path, "SELECT count(*) FROM convo_checkpoint_segments");
}

static convo_checkpoint_set *list(convo_store *s, const char *tid, const char *before,
                                  size_t limit, const char *filter, const char *only)
{
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = tid;
    o.before = before;
    o.limit = limit;
    o.filter_json = filter;
    o.only_channel = only;
    convo_checkpoint_set *set = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_list(s, &o, &set, &err) == 0, "list: %s", err.message);
    return set;
}

START_TEST(test_sealed_reads)
{
    const char *path = db_path("reads");
    convo_store *s = open_db(path);
    put_range(s, "t", 0, 4);
    convo_checkpoint *cp = NULL;
    ck_assert_int_eq(get_n(s, "t", 2, &cp), 0);
    int64_t created = convo_checkpoint_created_at(cp);
    convo_checkpoint_free(cp);
    put_range(s, "t", 4, 19);
    ck_assert_int_eq(sealed_rows(path), 0); /* block 0 whole, not yet 3 behind */
    put_range(s, "t", 19, N);
    ck_assert_int_eq(sealed_rows(path), 32);
    ck_assert_int_eq(segments(path), 2);
    /* the placeholders a layout-16 reader would meet: a list no libconvo decodes */
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoints WHERE sealed = 1"
                                   " AND channel_list = x'0080' AND body IS NULL"), 32);
    for (int n = 0; n < N; n++)
        see_n(s, "t", n);
    ck_assert_int_eq(get_n(s, "t", 2, &cp), 0);
    ck_assert_int_eq(convo_checkpoint_created_at(cp), created); /* kept through the seal */
    convo_checkpoint_free(cp);
    ck_assert_int_eq(get_n(s, "t", -1, &cp), 0); /* the latest */
    is_n(cp, N - 1);
    convo_checkpoint_free(cp);

    convo_checkpoint_set *set = list(s, "t", NULL, 0, NULL, NULL);
    ck_assert_uint_eq(convo_checkpoint_set_count(set), N);
    for (int i = 0; i < N; i++)
        is_n(convo_checkpoint_set_get(set, (size_t)i), N - 1 - i);
    convo_checkpoint_set_free(set);
    set = list(s, "t", uuid(20), 5, NULL, NULL); /* across the blocks' boundary */
    ck_assert_uint_eq(convo_checkpoint_set_count(set), 5);
    for (int i = 0; i < 5; i++)
        is_n(convo_checkpoint_set_get(set, (size_t)i), 19 - i);
    convo_checkpoint_set_free(set);
    set = list(s, "t", NULL, 0, "{\"step\":7}", NULL);
    ck_assert_uint_eq(convo_checkpoint_set_count(set), 1);
    is_n(convo_checkpoint_set_get(set, 0), 7);
    convo_checkpoint_set_free(set);
    set = list(s, "t", NULL, 0, NULL, "a"); /* one channel */
    ck_assert_uint_eq(convo_checkpoint_set_count(set), N);
    for (int i = 0; i < N; i++) {
        const convo_checkpoint *c = convo_checkpoint_set_get(set, (size_t)i);
        ck_assert_str_eq(convo_checkpoint_id(c), uuid(N - 1 - i));
        const char *version;
        convo_blob v;
        ck_assert_uint_eq(convo_checkpoint_channel_count(c), 1);
        ck_assert_str_eq(convo_checkpoint_channel(c, 0, &version, &v), "a");
    }
    convo_checkpoint_set_free(set);
    set = list(s, NULL, NULL, 0, "{\"step\":3}", NULL); /* every thread */
    ck_assert_uint_eq(convo_checkpoint_set_count(set), 1);
    is_n(convo_checkpoint_set_get(set, 0), 3);
    convo_checkpoint_set_free(set);
    convo_close(s);
}
END_TEST

/* put_writes and a re-put on a sealed checkpoint unseal its block; a later
 * put seals the next block; a raw write to a sealed row's moved columns is
 * refused (a layout-16 libconvo that had the file open) */
START_TEST(test_writes_and_reput)
{
    const char *path = db_path("writes");
    convo_store *s = open_db(path);
    put_range(s, "t", 0, N);
    convo_write_in w = {0, "a", {"json", "\"w\"", 3}};
    convo_error err;
    ck_assert_int_eq(convo_checkpoint_put_writes(s, "t", "", uuid(3), TASK, "~p", &w, 1, &err), 0);
    ck_assert_int_eq(sealed_rows(path), 16);
    ck_assert_int_eq(segments(path), 1);
    convo_checkpoint *cp = NULL;
    ck_assert_int_eq(get_n(s, "t", 3, &cp), 0);
    is_n(cp, 3);
    ck_assert_uint_eq(convo_checkpoint_write_count(cp), 1);
    convo_checkpoint_free(cp);
    for (int n = 0; n < N; n++)
        see_n(s, "t", n);

    ck_assert_int_eq(put_n(s, "t", 20, ",\"again\":1"), 0); /* a re-put in block 1 */
    ck_assert_int_eq(sealed_rows(path), 0);
    ck_assert_int_eq(segments(path), 0);
    ck_assert_int_eq(get_n(s, "t", 20, &cp), 0);
    is_n(cp, 20);
    ck_assert_ptr_nonnull(strstr(convo_checkpoint_metadata(cp), "\"again\":1"));
    convo_checkpoint_free(cp);
    put_range(s, "t", N, 52); /* position 51 seals block 2 */
    ck_assert_int_eq(sealed_rows(path), 16);
    ck_assert_int_eq(convo_checkpoint_put_writes(s, "t", "", uuid(50), TASK, "~p", &w, 1, &err), 0);
    convo_close(s);
    char url[640];
    snprintf(url, sizeof url, "sqlite:%s?seal=0", path); /* seals nothing, reads all */
    ck_assert_int_eq(convo_open(&s, url, &err), 0);
    put_range(s, "t", 52, 70);
    ck_assert_int_eq(sealed_rows(path), 16);
    ck_assert_int_eq(put_n(s, "t", 50, ",\"again\":2"), 0); /* a hot row put again in its row */
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoint_hot"
                                   " WHERE key & 4294967295 = 50"), 0);
    ck_assert_int_eq(get_n(s, "t", 50, &cp), 0);
    is_n(cp, 50);
    ck_assert_uint_eq(convo_checkpoint_write_count(cp), 1); /* its writes kept */
    ck_assert_ptr_nonnull(strstr(convo_checkpoint_metadata(cp), "\"again\":2"));
    convo_checkpoint_free(cp);
    for (int n = 52; n < 70; n++)
        see_n(s, "t", n);
    convo_close(s);
    snprintf(url, sizeof url, "sqlite:%s?seal=2", path);
    ck_assert_int_eq(convo_open(&s, url, &err), CONVO_EINVAL);
    s = open_db(path);
    for (int n = 0; n < 52; n++)
        see_n(s, "t", n);
    ck_assert_int_eq(get_n(s, "t", 3, &cp), 0);
    ck_assert_uint_eq(convo_checkpoint_write_count(cp), 1);
    convo_checkpoint_free(cp);
    convo_close(s);

    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    char *msg = NULL;
    ck_assert_int_ne(sqlite3_exec(db, "UPDATE convo_checkpoints SET pending = x'01'"
                                      " WHERE sealed = 1", NULL, NULL, &msg), SQLITE_OK);
    ck_assert_ptr_nonnull(strstr(msg, "sealed"));
    sqlite3_free(msg);
    sqlite3_close(db);
}
END_TEST

START_TEST(test_removals)
{
    const char *path = db_path("removals");
    convo_store *s = open_db(path);
    convo_error err;
    put_range(s, "t", 0, N);
    ck_assert_int_eq(convo_checkpoint_prune(s, "t", 12, &err), 0); /* keeps 33..44 */
    for (int n = N - 12; n < N; n++)
        see_n(s, "t", n);
    convo_checkpoint *cp = NULL;
    ck_assert_int_eq(get_n(s, "t", 31, &cp), CONVO_ENOTFOUND);
    ck_assert_int_eq(sealed_rows(path), 0);
    ck_assert_int_eq(segments(path), 0); /* block 1's rows all gone: its segment too */

    /* delete-by-run: the odd steps of a second thread stay, sealed or not */
    put_range(s, "u", 0, N);
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.filter_json = "{\"run_id\":\"r0\"}";
    uint64_t removed = 0;
    ck_assert_int_eq(convo_checkpoint_delete(s, &o, &removed, &err), 0);
    ck_assert_uint_eq(removed, (N + 1) / 2 + 6); /* u's even steps, t's 34..44 even */
    for (int n = 1; n < N; n += 2)
        see_n(s, "u", n);
    /* (the rows after each deleted one have their lists stored in full: their
     * blocks are unsealed) no segment without a sealed row */
    ck_assert_int_eq(segments(path), sql_int(path, "SELECT count(DISTINCT key >> 4) FROM"
                                                   " convo_checkpoints WHERE sealed = 1"));

    ck_assert_int_eq(convo_thread_delete(s, "u", &err), 0);
    ck_assert_int_eq(segments(path), 0);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoints"), 6);
    convo_close(s);
}
END_TEST

/* a tail rewrite dropping the checkpoints past it, sealed ones among them */
START_TEST(test_rewrite_drops)
{
    const char *path = db_path("rewrite");
    convo_store *s = open_db(path);
    convo_error err;
    const char *msg[N];
    for (int i = 0; i < N; i++)
        msg[i] = "{\"role\":\"user\",\"content\":\"m\"}";
    ck_assert_int_eq(convo_append(s, "t", msg, NULL, N, NULL, NULL, &err), 0);
    with_log = 1;
    put_range(s, "t", 0, N);
    with_log = 0;
    convo_rewrite_opts o = CONVO_REWRITE_OPTS_INIT;
    o.drop_checkpoints = 1;
    ck_assert_msg(convo_replace_tail(s, "t", 30, NULL, NULL, 0, &o, NULL, &err) == 0, "%s",
                  err.message); /* checkpoints 30.. refer to messages it removes */
    for (int n = 0; n < 30; n++)
        see_n(s, "t", n);
    convo_checkpoint *cp = NULL;
    ck_assert_int_eq(get_n(s, "t", 30, &cp), CONVO_ENOTFOUND);
    ck_assert_int_eq(sealed_rows(path), 30); /* 30 and 31 of block 1 went */
    ck_assert_int_eq(get_n(s, "t", -1, &cp), 0); /* the latest: 29, sealed */
    is_n(cp, 29);
    convo_checkpoint_free(cp);
    ck_assert_int_eq(segments(path), sql_int(path, "SELECT count(DISTINCT key >> 4) FROM"
                                                   " convo_checkpoints WHERE sealed = 1"));
    convo_close(s);
}
END_TEST

START_TEST(test_fork_and_copy)
{
    const char *path = db_path("fork");
    convo_store *s = open_db(path);
    convo_error err;
    put_range(s, "t", 0, N);
    convo_write_in w = {0, "a", {"json", "\"w\"", 3}};
    ck_assert_int_eq(convo_checkpoint_put_writes(s, "t", "", uuid(40), TASK, "~p", &w, 1, &err), 0);
    convo_fork_opts fo = CONVO_FORK_OPTS_INIT;
    fo.with_checkpoints = 1;
    ck_assert_int_eq(convo_thread_fork_ex(s, "t", "t2", -1, &fo, &err), 0);
    for (int n = 0; n < N; n++)
        see_n(s, "t2", n);
    ck_assert_int_eq(sealed_rows(path), 32); /* the copies are rows */

    const char *path2 = db_path("copy");
    convo_store *d = open_db(path2);
    const char *ids[1] = {"t"};
    ck_assert_msg(convo_copy(s, d, ids, 1, NULL, NULL, &err) == 0, "copy: %s", err.message);
    for (int n = 0; n < N; n++)
        see_n(d, "t", n);
    convo_checkpoint *cp = NULL;
    ck_assert_int_eq(get_n(d, "t", 40, &cp), 0);
    ck_assert_uint_eq(convo_checkpoint_write_count(cp), 1);
    convo_checkpoint_free(cp);
    ck_assert_int_eq(sealed_rows(path2), 32); /* the import's puts sealed what they passed */
    convo_close(d);
    convo_close(s);
}
END_TEST

/* the first byte of the last segment of the file at path */
static void first_byte_set(const char *path, int byte)
{
    sqlite3 *db;
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(db, "SELECT block, data FROM convo_checkpoint_segments"
                                            " ORDER BY block DESC LIMIT 1", -1, &st, NULL),
                     SQLITE_OK);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    long long block = sqlite3_column_int64(st, 0);
    size_t len = (size_t)sqlite3_column_bytes(st, 1);
    unsigned char *data = malloc(len);
    memcpy(data, sqlite3_column_blob(st, 1), len);
    sqlite3_finalize(st);
    data[0] = (unsigned char)byte;
    ck_assert_int_eq(sqlite3_prepare_v2(db, "UPDATE convo_checkpoint_segments SET data = ?2"
                                            " WHERE block = ?1", -1, &st, NULL), SQLITE_OK);
    sqlite3_bind_int64(st, 1, block);
    sqlite3_bind_blob(st, 2, data, (int)len, free);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    sqlite3_close(db);
}

START_TEST(test_corrupt_segment)
{
    const char *path = db_path("corrupt");
    convo_store *s = open_db(path);
    put_range(s, "t", 0, N);
    convo_close(s);
    exec_raw(path, "UPDATE convo_checkpoint_segments SET data = substr(data, 1, 20)"
                   " WHERE block = (SELECT min(block) FROM convo_checkpoint_segments)");
    s = open_db(path);
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", uuid(3), &cp, &err), CONVO_ECORRUPT);
    ck_assert_msg(strstr(err.message, "segment") != NULL, "%s", err.message);
    ck_assert_ptr_null(cp);
    see_n(s, "t", 20); /* another block */
    see_n(s, "t", 40); /* a row */
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = "t";
    convo_checkpoint_set *set = NULL;
    ck_assert_int_eq(convo_checkpoint_list(s, &o, &set, &err), CONVO_ECORRUPT);
    ck_assert_ptr_null(set);
    convo_close(s);

    first_byte_set(path, 2); /* a format this libconvo does not know */
    s = open_db(path);
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", uuid(20), &cp, &err), CONVO_ECORRUPT);
    ck_assert_msg(strstr(err.message, "format 2") != NULL, "%s", err.message);
    convo_close(s);
    exec_raw(path, "DELETE FROM convo_checkpoint_segments");
    s = open_db(path);
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", uuid(20), &cp, &err), CONVO_ECORRUPT);
    ck_assert_msg(strstr(err.message, "missing") != NULL, "%s", err.message);
    convo_close(s);
}
END_TEST

/* A segment of lib/segment.c's format 1 (a format byte, rows, columns and
 * the raw size as one-byte varints, the zlib stream of the raw cells) whose
 * raw cells are raw[0..n), for block `block` of the file at path. */
static void segment_forge(const char *path, int rows, int cols, const unsigned char *raw,
                          size_t n)
{
    unsigned char seg[512] = {1, (unsigned char)rows, (unsigned char)cols, (unsigned char)n};
    uLongf zlen = sizeof seg - 4;
    ck_assert_int_lt(n, 128);
    ck_assert_int_eq(compress2(seg + 4, &zlen, raw, n, 6), Z_OK);
    sqlite3 *db;
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    ck_assert_int_eq(sqlite3_prepare_v2(db, "UPDATE convo_checkpoint_segments SET data = ?1"
                                            " WHERE block = (SELECT min(block) FROM"
                                            " convo_checkpoint_segments)", -1, &st, NULL),
                     SQLITE_OK);
    sqlite3_bind_blob(st, 1, seg, (int)(4 + zlen), SQLITE_TRANSIENT);
    ck_assert_int_eq(sqlite3_step(st), SQLITE_DONE);
    sqlite3_finalize(st);
    sqlite3_close(db);
}

/* a get of checkpoint 3 (in the first block) is CONVO_ECORRUPT naming what */
static void get_3_corrupt(const char *path, const char *what)
{
    convo_store *s = open_db(path);
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_int_eq(convo_checkpoint_get(s, "t", "", uuid(3), &cp, &err), CONVO_ECORRUPT);
    ck_assert_msg(strstr(err.message, what) != NULL, "%s", err.message);
    ck_assert_ptr_null(cp);
    convo_close(s);
}

/* well-formed segments whose cells are not a block's: refused by
 * convo_sealed() with CONVO_ECORRUPT */
START_TEST(test_segment_cells_corrupt)
{
    const char *path = db_path("cells");
    convo_store *s = open_db(path);
    put_range(s, "t", 0, 20);
    convo_close(s);
    const unsigned char one_col[] = {2, 3};
    segment_forge(path, 1, 1, one_col, sizeof one_col);
    get_3_corrupt(path, "of 1 columns");
    /* 8 columns, one row at place 5: checkpoint 3 is not in it */
    unsigned char raw[64], *p = raw;
    *p++ = 2, *p++ = 5;                  /* the place */
    for (int c = 1; c < 8; c++)
        *p++ = 0;                        /* NULL */
    segment_forge(path, 1, 8, raw, (size_t)(p - raw));
    get_3_corrupt(path, "not in its block's segment");
    raw[1] = 3;                          /* place 3: its meta a cell of type 9 */
    raw[2] = 3, raw[3] = 9, raw[4] = 'x';
    p = raw + 5;
    for (int c = 2; c < 8; c++)
        *p++ = 0;
    segment_forge(path, 1, 8, raw, (size_t)(p - raw));
    get_3_corrupt(path, "unknown type");
    raw[2] = 1;                          /* its meta an empty cell: no type */
    memmove(raw + 3, raw + 5, 6);
    segment_forge(path, 1, 8, raw, 9);
    get_3_corrupt(path, "without its type");
}
END_TEST

/* a seal that fails (injected at the segment's insert) rolls the put back
 * whole: the store is as before it, readable; the next put seals */
START_TEST(test_seal_rolls_back)
{
    const char *path = db_path("rollback");
    convo_store *s = open_db(path);
    put_range(s, "t", 0, 19);
    exec_raw(path, "CREATE TRIGGER fail BEFORE INSERT ON convo_checkpoint_segments"
                   " BEGIN SELECT RAISE(ABORT, 'injected'); END;");
    ck_assert_int_ne(put_n(s, "t", 19, NULL), 0);
    convo_checkpoint *cp = NULL;
    ck_assert_int_eq(get_n(s, "t", 19, &cp), CONVO_ENOTFOUND);
    ck_assert_int_eq(sealed_rows(path), 0);
    for (int n = 0; n < 19; n++)
        see_n(s, "t", n);
    exec_raw(path, "DROP TRIGGER fail;");
    put_range(s, "t", 19, 20);
    ck_assert_int_eq(sealed_rows(path), 16);
    for (int n = 0; n < 20; n++)
        see_n(s, "t", n);
    convo_close(s);
}
END_TEST

/* layout 16 -> 17 (and 15 -> 17): the rows stay rows, a later put seals the
 * blocks it passes, rows of the older layout included */
static void migrate_from(const char *name, const char *back, int from)
{
    const char *path = db_path(name);
    layout_seal = 0; /* rows as layout 16 writes them */
    convo_store *s = open_db(path);
    put_range(s, "t", 0, 12);
    convo_close(s);
    layout_seal = 1;
    exec_raw(path, back);
    ck_assert_int_eq(schema_version_of(path), from);
    s = open_db(path);
    ck_assert_int_eq(schema_version_of(path), SQLITE_LAYOUT_NOW);
    for (int n = 0; n < 12; n++)
        see_n(s, "t", n);
    ck_assert_int_eq(sealed_rows(path), 0);
    put_range(s, "t", 12, N);
    ck_assert_int_eq(sealed_rows(path), 32);
    for (int n = 0; n < N; n++)
        see_n(s, "t", n);
    convo_close(s);
}

START_TEST(test_migration_16_to_17)
{
    migrate_from("v16", LAYOUT_17_TO_16
                 "UPDATE convo_meta SET value = '16' WHERE key = 'schema_version'", 16);
}
END_TEST

START_TEST(test_migration_15_to_17)
{
    migrate_from("v15", LAYOUT_16_TO_15
                 "UPDATE convo_meta SET value = '15' WHERE key = 'schema_version'", 15);
}
END_TEST

START_TEST(test_migration_fails_whole)
{
    const char *path = db_path("v16-fails");
    layout_seal = 0;
    convo_store *s = open_db(path);
    put_range(s, "t", 0, 3);
    convo_close(s);
    layout_seal = 1;
    assert_migration_fails_whole(path,
                                 LAYOUT_17_TO_16
                                 "CREATE TABLE convo_checkpoint_segments(x);"
                                 "UPDATE convo_meta SET value = '16' WHERE key = 'schema_version'",
                                 16);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM pragma_table_info('convo_checkpoints')"
                                   " WHERE name = 'sealed'"), 0);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    layout_seal = 1;
    Suite *su = suite_create("sqlite layout 17");
    TCase *tc = tcase_create("segments");
    tcase_set_timeout(tc, 300); /* a bound against a hang, not a speed check */
    tcase_add_test(tc, test_sealed_reads);
    tcase_add_test(tc, test_writes_and_reput);
    tcase_add_test(tc, test_removals);
    tcase_add_test(tc, test_fork_and_copy);
    tcase_add_test(tc, test_rewrite_drops);
    tcase_add_test(tc, test_corrupt_segment);
    tcase_add_test(tc, test_segment_cells_corrupt);
    tcase_add_test(tc, test_seal_rolls_back);
    tcase_add_test(tc, test_migration_16_to_17);
    tcase_add_test(tc, test_migration_15_to_17);
    tcase_add_test(tc, test_migration_fails_whole);
    suite_add_tcase(su, tc);
    SRunner *sr = srunner_create(su);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
