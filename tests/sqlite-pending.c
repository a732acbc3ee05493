/* sqlite-pending.c — layout 10's record of a checkpoint's pending writes
 * (drivers/sqlite/pending.c) on its own, for the sanitizers:
 *   - writes with extreme numbers (idx INT64_MIN and INT64_MAX, names up to
 *     INT64_MAX), UUID and text task ids, empty and large values encode into
 *     the buffer encode sizes and decode back exactly, in one order;
 *   - every prefix of a record and every byte of it changed, each decoded from
 *     a buffer of exactly its size: malformed (-2) or writes that lie inside
 *     it, never a read past its end (ASan) — a stored record is data;
 *   - the SQL functions over the record: convo_pending_list() of a record
 *     that does not decode (or of text) is SQLITE_CORRUPT, of NULL nothing;
 *     convo_pending_pack() of no rows is NULL, of a (task, idx) twice an error.
 * `tests/sqlite_pending`. */
#include <check.h>
#include <sqlite3.h>
#include "pending.h"
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const unsigned char uuid_a[16] = {0x46, 0xf2, 0xb8, 0x24, 0x10, 0x07, 0x59, 0x38,
                                         0x98, 0x0a, 0xef, 0xe0, 0xc0, 0xbb, 0x8d, 0xe3};
static const unsigned char uuid_b[16] = {0xdc, 0x5f, 0x84, 0xfc, 0x65, 0xf3, 0x50, 0xef,
                                         0xb0, 0xaa, 0x0c, 0xc4, 0x29, 0xae, 0x08, 0x09};

static sq_write text_task(const char *task, int64_t idx, const char *value, size_t len)
{
    sq_write w = {(const unsigned char *)task, strlen(task), 0, idx, 1, 2, 3,
                  (const unsigned char *)value, len};
    return w;
}

static sq_write uuid_task(const unsigned char *task, int64_t idx, int64_t name)
{
    sq_write w = {task, 16, 1, idx, name, name, name, (const unsigned char *)"v", 1};
    return w;
}

/* The writes the tests pack: n of them in *n; big is a large value. */
static sq_write *sample(size_t *n, const char *big, size_t big_len)
{
    static sq_write w[8];
    w[0] = uuid_task(uuid_b, INT64_MAX, INT64_MAX);
    w[1] = text_task("zz", 0, "\"z\"", 3);
    w[2] = uuid_task(uuid_a, INT64_MIN, 1);
    w[3] = text_task("a-task", -1, "", 0);
    w[4] = uuid_task(uuid_a, 0, INT64_MAX - 1);
    w[5] = text_task("a-task", 7, big, big_len);
    w[6] = uuid_task(uuid_b, -1, 128);
    w[7] = text_task("46f2b824", 3, "x", 1);
    *n = 8;
    return w;
}

static int same_write(const sq_write *a, const sq_write *b)
{
    return a->uuid == b->uuid && a->task_len == b->task_len &&
           memcmp(a->task, b->task, a->task_len) == 0 && a->idx == b->idx &&
           a->path == b->path && a->channel == b->channel && a->type == b->type &&
           a->len == b->len && (a->len == 0 || memcmp(a->value, b->value, a->len) == 0);
}

/* p[0..n) in a buffer of exactly n bytes, so that ASan sees a read past it */
static int decode_exact(const unsigned char *p, size_t n, sq_write **w, size_t *count,
                        unsigned char **copy)
{
    *copy = malloc(n ? n : 1);
    ck_assert_ptr_nonnull(*copy);
    if (n)
        memcpy(*copy, p, n);
    return sq_writes_decode(*copy, n, w, count);
}

/* A decoded record's writes lie inside it. */
static void assert_inside(const unsigned char *p, size_t n, const sq_write *w, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        ck_assert(w[i].task >= p && w[i].task_len <= n &&
                  (size_t)(w[i].task - p) <= n - w[i].task_len);
        ck_assert(w[i].task_len > 0 && (!w[i].uuid || w[i].task_len == 16));
        ck_assert(w[i].len == 0 ||
                  (w[i].value >= p && w[i].len <= n && (size_t)(w[i].value - p) <= n - w[i].len));
        ck_assert(w[i].path >= 0 && w[i].channel >= 0 && w[i].type >= 0);
    }
}

START_TEST(test_round_trip)
{
    size_t big_len = 300000, n;
    char *big = malloc(big_len);
    ck_assert_ptr_nonnull(big);
    memset(big, 'b', big_len);
    sq_write *w = sample(&n, big, big_len);
    sq_write want[8];
    memcpy(want, w, sizeof want);
    unsigned char *record, *again, *copy;
    size_t len, len2, count;
    ck_assert_int_eq(sq_writes_encode(w, n, &record, &len), 0); /* sorts w */
    sq_write *back;
    ck_assert_int_eq(decode_exact(record, len, &back, &count, &copy), 0);
    ck_assert_uint_eq(count, n);
    assert_inside(copy, len, back, count);
    for (size_t i = 0; i < n; i++) {
        ck_assert(same_write(&back[i], &w[i])); /* in the encoded order */
        size_t found = 0;
        for (size_t j = 0; j < n; j++)
            found += same_write(&back[i], &want[j]);
        ck_assert_uint_eq(found, 1);
    }
    /* text order of the task ids, then idx */
    ck_assert(!back[0].uuid && back[0].task_len == 8); /* "46f2b824" < "46f2b824-1007..." */
    ck_assert(back[1].uuid && back[1].task[0] == 0x46 && back[1].idx == INT64_MIN);
    ck_assert(back[2].uuid && back[2].idx == 0);
    ck_assert(!back[3].uuid && back[3].idx == -1 && back[4].idx == 7);
    ck_assert(back[5].uuid && back[5].idx == -1 && back[6].idx == INT64_MAX);
    ck_assert(!back[7].uuid && back[7].task[0] == 'z');
    /* one order: the decoded writes encode to the same bytes */
    ck_assert_int_eq(sq_writes_encode(back, count, &again, &len2), 0);
    ck_assert(len2 == len && memcmp(again, record, len) == 0);
    free(again);
    free(back);
    free(copy);
    /* a (task, idx) twice is refused */
    sq_write twice[2] = {text_task("t", 5, "1", 1), text_task("t", 5, "2", 1)};
    ck_assert_int_eq(sq_writes_encode(twice, 2, &again, &len2), -2);
    ck_assert_ptr_null(again);
    free(record);
    free(big);
}
END_TEST

/* Decodes p[0..n) from an exact buffer: 0 with its writes inside it, or -2. */
static void decode_any(const unsigned char *p, size_t n)
{
    sq_write *w;
    size_t count;
    unsigned char *copy;
    int rc = decode_exact(p, n, &w, &count, &copy);
    ck_assert_msg(rc == 0 || rc == -2, "decode of %zu bytes: %d", n, rc);
    if (rc == 0)
        assert_inside(copy, n, w, count);
    else
        ck_assert_ptr_null(w);
    free(w);
    free(copy);
}

START_TEST(test_prefixes_and_changed_bytes)
{
    size_t n;
    sq_write *w = sample(&n, "0123456789", 10);
    unsigned char *record;
    size_t len;
    ck_assert_int_eq(sq_writes_encode(w, n, &record, &len), 0);
    size_t whole = 0;
    for (size_t k = 0; k < len; k++) {
        sq_write *out;
        size_t count;
        unsigned char *copy;
        int rc = decode_exact(record, k, &out, &count, &copy);
        ck_assert(rc == 0 || rc == -2);
        whole += rc == 0;
        if (rc == 0)
            assert_inside(copy, k, out, count);
        free(out);
        free(copy);
    }
    ck_assert_uint_eq(whole, 5); /* empty, and after each of the first four groups */
    static const unsigned char bytes[] = {0x00, 0x01, 0x10, 0x7f, 0x80, 0xff};
    unsigned char *changed = malloc(len);
    ck_assert_ptr_nonnull(changed);
    for (size_t at = 0; at < len; at++)
        for (size_t b = 0; b < sizeof bytes; b++) {
            memcpy(changed, record, len);
            changed[at] = bytes[b];
            decode_any(changed, len);
            decode_any(changed, at + 1);
        }
    /* varints of ten bytes and more, counts past the end */
    static const unsigned char odd[][16] = {
        {0x00, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01},
        {0x00, 0x01, 0x61, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
        {0x00, 0x01, 0x61, 0x01, 0x00, 0x00, 0x00, 0x00, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
         0x80, 0x01},
        {0x00, 0x01, 0x61, 0x01, 0x00, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
         0x01},
        {0x10}, {0x00}, {0x00, 0x00}, {0x00, 0x01, 0x61, 0x00}};
    static const size_t odd_len[] = {12, 13, 16, 15, 1, 1, 2, 4};
    for (size_t i = 0; i < sizeof odd_len / sizeof *odd_len; i++) {
        sq_write *out;
        size_t count;
        unsigned char *copy;
        ck_assert_msg(decode_exact(odd[i], odd_len[i], &out, &count, &copy) == -2, "odd %zu", i);
        free(copy);
    }
    free(changed);
    free(record);
}
END_TEST

static sqlite3 *open_memory(void)
{
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(":memory:", &db), SQLITE_OK);
    ck_assert_int_eq(sq_pending_register(db), SQLITE_OK);
    return db;
}

/* The result code of stepping sql to its end, and its rows in *rows. */
static int run(sqlite3 *db, const char *sql, int *rows)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    *rows = 0;
    if (rc != SQLITE_OK)
        return rc;
    while ((rc = sqlite3_step(st)) == SQLITE_ROW)
        (*rows)++;
    sqlite3_finalize(st);
    return rc;
}

START_TEST(test_sql_functions)
{
    sqlite3 *db = open_memory();
    int rows;
    /* a group that claims two writes and has one; a bad tag; text */
    ck_assert_int_eq(run(db, "SELECT * FROM convo_pending_list(x'0001610200010203000131')",
                         &rows), SQLITE_CORRUPT);
    ck_assert_int_eq(run(db, "SELECT * FROM convo_pending_list(x'07')", &rows), SQLITE_CORRUPT);
    ck_assert_int_eq(run(db, "SELECT * FROM convo_pending_list('text')", &rows),
                     SQLITE_CORRUPT);
    ck_assert_int_eq(run(db, "SELECT * FROM convo_pending_list(NULL)", &rows), SQLITE_DONE);
    ck_assert_int_eq(rows, 0);
    ck_assert_int_eq(run(db, "SELECT * FROM convo_pending_list(x'000161010002010203000131')",
                         &rows), SQLITE_DONE);
    ck_assert_int_eq(rows, 1);
    ck_assert_int_eq(run(db, "SELECT 1 WHERE (SELECT convo_pending_pack(1, 2, 3, 4, 5, 6)"
                             " WHERE 0) IS NULL", &rows), SQLITE_DONE);
    ck_assert_int_eq(rows, 1);
    ck_assert_int_eq(run(db, "SELECT convo_pending_pack(t, i, 1, 2, 3, 'v') FROM"
                             " (SELECT 'a' AS t, 0 AS i UNION ALL SELECT 'a', 0)", &rows),
                     SQLITE_ERROR);
    /* what pack makes, list reads back */
    ck_assert_int_eq(run(db, "SELECT * FROM convo_pending_list((SELECT convo_pending_pack(t,"
                             " i, 1, 2, 3, v) FROM (SELECT 'b' AS t, 1 AS i, x'00' AS v"
                             " UNION ALL SELECT 'a', -5, '' UNION ALL SELECT"
                             " x'46f2b82410075938980aefe0c0bb8de3', 2, 'u')))"
                             " WHERE (rowid, task_id, idx) IN (VALUES (0,"
                             " x'46f2b82410075938980aefe0c0bb8de3', 2), (1, 'a', -5),"
                             " (2, 'b', 1))", &rows), SQLITE_DONE);
    ck_assert_int_eq(rows, 3);
    sqlite3_close(db);
}
END_TEST

int main(void)
{
    Suite *suite = suite_create("sqlite-pending");
    TCase *tc = tcase_create("sqlite-pending");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_round_trip);
    tcase_add_test(tc, test_prefixes_and_changed_bytes);
    tcase_add_test(tc, test_sql_functions);
    suite_add_tcase(suite, tc);
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
