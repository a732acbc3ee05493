/* sqlite-layout8.c — layout 8 of the SQLite driver (docs/sqlite.md, "Layout 8:
 * metadata as shape and values") beyond the conformance suite:
 *   - metadata is stored as its values with its shape kept once in
 *     convo_names, and comes back exactly through get, list, the metadata
 *     filter, a fork with checkpoints, export and import, odd metadata too;
 *   - past the bound on names a new shape leaves the metadata as text;
 *   - a layout-7 file is migrated on open, its rows read back as they were,
 *     and a layout-7 process that had it open can no longer read or write
 *     checkpoints (the column it names is gone);
 *   - a fresh store's get of a checkpoint at the end of a long chain of bodies
 *     coded against a base (and a short list there) reads as many pages of
 *     the file as on a short chain: no walk back along the chain, no
 *     per-checkpoint read of bases (pages counted by a VFS shim, not timed).
 * `tests/sqlite_layout8 DIR`: DIR a scratch folder. */
#define _GNU_SOURCE /* memmem */
#include <check.h>
#include <convo.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "sqlite_layout.h"

static void put(convo_store *s, const char *tid, const char *id, const char *parent,
                const char *metadata)
{
    convo_blob v = {"json", "1", 1};
    convo_channel_in ch = {"a", id, &v};
    convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
    cp.thread_id = tid;
    cp.checkpoint_id = id;
    cp.parent_id = parent;
    cp.metadata_json = metadata;
    cp.body = (convo_blob){"json", "{\"v\":4}", 7};
    cp.channels = &ch;
    cp.nchannels = 1;
    convo_error err;
    ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put %s: %s", id, err.message);
}

static void assert_metadata(convo_store *s, const char *tid, const char *id, const char *want)
{
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_get(s, tid, "", id, &cp, &err) == 0, "get %s: %s", id,
                  err.message);
    ck_assert_str_eq(convo_checkpoint_metadata(cp), want);
    convo_checkpoint_free(cp);
}

/* The ids a filtered list gives, newest first, space-separated, in buf. */
static const char *list_ids(convo_store *s, const char *tid, const char *filter, char *buf,
                            size_t size)
{
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = tid;
    o.filter_json = filter;
    convo_checkpoint_set *set = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_list(s, &o, &set, &err) == 0, "list: %s", err.message);
    buf[0] = '\0';
    for (size_t i = 0; i < convo_checkpoint_set_count(set); i++) {
        const convo_checkpoint *cp = convo_checkpoint_set_get(set, i);
        snprintf(buf + strlen(buf), size - strlen(buf), "%s%s", i ? " " : "",
                 convo_checkpoint_id(cp));
    }
    convo_checkpoint_set_free(set);
    return buf;
}

#define M_LOOP "{\"source\":\"loop\",\"step\":%d,\"parents\":{}}"
static const char *ODD =
    "{\"\xc3\xa9t\xc3\xa9\":\"\xf0\x9f\x98\x80 \\\"q\\\"\",\"r\":0.5,\"n\":null,\"t\":true,"
    "\"a\":[1,\"x\",[],{\"k\":-9223372036854775808}],\"source\":\"loop\"}";

/* Metadata of LangGraph's shape costs its values; odd metadata comes back too. */
START_TEST(test_metadata_as_values)
{
    const char *path = db_path("values");
    convo_store *s = open_db(path);
    char m[128], id[16], parent[16];
    for (int k = 0; k < 6; k++) {
        snprintf(m, sizeof m, M_LOOP, k);
        snprintf(id, sizeof id, "c%d", k);
        snprintf(parent, sizeof parent, "c%d", k - 1);
        put(s, "t", id, k ? parent : NULL, k == 3 ? "{\"source\":\"input\",\"step\":3,\"parents\":{}}"
                                                  : m);
    }
    put(s, "t", "odd", "c5", ODD);
    char *big = malloc(200100);
    ck_assert_ptr_nonnull(big);
    strcpy(big, "{\"writes\":\"");
    for (int i = 0; i < 100000; i++)
        memcpy(big + 11 + 2 * i, "\xc3\xa9", 2);
    strcpy(big + 200011, "\"}");
    put(s, "t", "big", "odd", big);
    /* one shape a kind: LangGraph's, the odd one's, the big one's */
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoints"
                                   " WHERE meta_shape IS NOT NULL AND typeof(meta) = 'blob'"),
                     8);
    ck_assert_int_eq(sql_int(path, "SELECT count(DISTINCT meta_shape) FROM convo_checkpoints"),
                     3);
    ck_assert_int_le(sql_int(path, "SELECT max(length(meta)) FROM convo_checkpoints"
                                   " WHERE id = 'c5'"),
                     9);
    for (int k = 0; k < 6; k++) {
        snprintf(m, sizeof m, M_LOOP, k);
        snprintf(id, sizeof id, "c%d", k);
        assert_metadata(s, "t", id, k == 3 ? "{\"source\":\"input\",\"step\":3,\"parents\":{}}" : m);
    }
    assert_metadata(s, "t", "odd", ODD);
    assert_metadata(s, "t", "big", big);
    char buf[256];
    ck_assert_str_eq(list_ids(s, "t", "{\"source\":\"input\"}", buf, sizeof buf), "c3");
    ck_assert_str_eq(list_ids(s, "t", "{\"step\":4}", buf, sizeof buf), "c4");
    ck_assert_str_eq(list_ids(s, "t", "{\"source\":\"loop\"}", buf, sizeof buf),
                     "odd c5 c4 c2 c1 c0");
    ck_assert_str_eq(list_ids(s, "t", "{\"r\":0.5,\"t\":true}", buf, sizeof buf), "odd");
    /* a fork with checkpoints, an export and an import keep it */
    convo_error err;
    convo_fork_opts fo = CONVO_FORK_OPTS_INIT;
    fo.with_checkpoints = 1;
    ck_assert_msg(convo_thread_fork_ex(s, "t", "u", -1, &fo, &err) == 0, "%s", err.message);
    assert_metadata(s, "u", "odd", ODD);
    assert_metadata(s, "u", "big", big);
    convo_store *d = open_db(db_path("copy"));
    ck_assert_msg(convo_copy(s, d, NULL, 0, NULL, NULL, &err) == 0, "%s", err.message);
    assert_metadata(d, "t", "odd", ODD);
    assert_metadata(d, "u", "c3", "{\"source\":\"input\",\"step\":3,\"parents\":{}}");
    assert_metadata(d, "t", "big", big);
    convo_close(d);
    free(big);
    convo_close(s);
}
END_TEST

/* Past SHAPE_NAMES_MAX names a new shape leaves metadata as text; a shape
 * already kept still codes it. */
START_TEST(test_shape_bound)
{
    const char *path = db_path("bound");
    convo_store *s = open_db(path);
    put(s, "t", "c0", NULL, "{\"source\":\"loop\",\"step\":0,\"parents\":{}}");
    convo_close(s);
    exec_raw(path, "INSERT INTO convo_names(num, name) VALUES(4096, 'many names')");
    s = open_db(path);
    put(s, "t", "c1", "c0", "{\"source\":\"loop\",\"step\":1,\"parents\":{}}");
    put(s, "t", "c2", "c1", "{\"other\":\"shape\"}");
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoints"
                                   " WHERE meta_shape IS NULL AND typeof(meta) = 'text'"),
                     1);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_names WHERE name LIKE '%other%'"),
                     0);
    assert_metadata(s, "t", "c1", "{\"source\":\"loop\",\"step\":1,\"parents\":{}}");
    assert_metadata(s, "t", "c2", "{\"other\":\"shape\"}");
    char buf[64];
    ck_assert_str_eq(list_ids(s, "t", "{\"other\":\"shape\"}", buf, sizeof buf), "c2");
    convo_close(s);
}
END_TEST

/* Values that do not fit their shape, or have none (a corrupt row), are
 * CONVO_ECORRUPT on a read that joins them: not a generic error, and not the
 * values' bytes given as the metadata's text. */
START_TEST(test_corrupt_values)
{
    const char *path = db_path("corrupt");
    const char *bad[] = {
        "UPDATE convo_checkpoints SET meta = x'91a46c6f6f70'",   /* one value short */
        "UPDATE convo_checkpoints SET meta = x'93a46c6f6f700001'", /* one too many */
        "UPDATE convo_checkpoints SET meta = x'92a46c6f6f'",     /* truncated */
        "UPDATE convo_checkpoints SET meta = x'92c0c0'",         /* nil is no value */
        "UPDATE convo_checkpoints SET meta_shape = NULL",        /* values without a shape */
        "UPDATE convo_checkpoints SET meta_shape = meta_shape + 1000", /* a shape not kept */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        convo_store *s = open_db(path);
        put(s, "t", "c0", NULL, "{\"source\":\"loop\",\"step\":0,\"parents\":{}}");
        convo_close(s);
        ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoints"
                                       " WHERE meta_shape IS NOT NULL"),
                         1);
        exec_raw(path, bad[i]);
        s = open_db(path);
        convo_checkpoint *cp = NULL;
        convo_error err;
        ck_assert_msg(convo_checkpoint_get(s, "t", "", "c0", &cp, &err) == CONVO_ECORRUPT,
                      "case %zu: get gave %d (%s)", i, err.code, err.message);
        ck_assert_ptr_null(cp);
        convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
        o.thread_id = "t";
        convo_checkpoint_set *set = NULL;
        ck_assert_msg(convo_checkpoint_list(s, &o, &set, &err) == CONVO_ECORRUPT,
                      "case %zu: list gave %d (%s)", i, err.code, err.message);
        ck_assert_ptr_null(set);
        convo_close(s);
        db_path("corrupt");
    }
}
END_TEST

/* A layout-7 file (metadata as text in column metadata) is migrated on open
 * and reads back as it was; a layout-7 process can no longer use it. */
START_TEST(test_migration_7_to_8)
{
    const char *path = db_path("seven");
    /* rows as layout 7 stored them: names past the bound keep every shape out */
    convo_store *s = open_db(path);
    put(s, "x", "first", NULL, "{}");
    convo_close(s);
    exec_raw(path, "INSERT INTO convo_names(num, name) VALUES(100000, 'many names')");
    s = open_db(path);
    char m[128], id[16], parent[16];
    for (int k = 0; k < 4; k++) {
        snprintf(m, sizeof m, M_LOOP, k);
        snprintf(id, sizeof id, "c%d", k);
        snprintf(parent, sizeof parent, "c%d", k - 1);
        put(s, "t", id, k ? parent : NULL, k == 3 ? ODD : m);
    }
    convo_close(s);
    exec_raw(path, LAYOUT_16_TO_15 LAYOUT_15_TO_14 LAYOUT_14_TO_13 LAYOUT_13_TO_12 LAYOUT_10_TO_9
                   "DELETE FROM convo_checkpoints WHERE id = 'first';"
                   "DELETE FROM convo_names WHERE num = 100000;"
                   "DROP VIEW convo_checkpoint_view;"
                   "ALTER TABLE convo_checkpoints DROP COLUMN meta_shape;"
                   "ALTER TABLE convo_checkpoints RENAME COLUMN meta TO metadata;"
                   /* and layout 9 undone (its lists here are full: a one-channel delta is no smaller) */
                   "ALTER TABLE convo_checkpoints RENAME COLUMN channel_list TO channels;"
                   "DROP TABLE convo_checkpoint_reach;"
                   "CREATE INDEX convo_checkpoints_by_log_length"
                   " ON convo_checkpoints(thread, log_length);"
                   /* a stand-in for layout 7's view, which the migration replaces */
                   "CREATE VIEW convo_checkpoint_view AS SELECT metadata FROM convo_checkpoints;"
                   "UPDATE convo_meta SET value = '7' WHERE key = 'schema_version'");
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoints"
                                   " WHERE typeof(metadata) = 'text'"),
                     4);
    /* a layout-7 process that has the file open */
    sqlite3 *old;
    ck_assert_int_eq(sqlite3_open(path, &old), SQLITE_OK);
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_prepare_v2(old, "SELECT metadata FROM convo_checkpoints", -1, &st,
                                        NULL),
                     SQLITE_OK);
    s = open_db(path);
    ck_assert_int_eq(sql_int(path, "SELECT value FROM convo_meta WHERE key = 'schema_version'"),
                     SQLITE_LAYOUT_NOW);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoints"
                                   " WHERE meta_shape IS NULL AND typeof(meta) = 'text'"),
                     4);
    for (int k = 0; k < 4; k++) {
        snprintf(m, sizeof m, M_LOOP, k);
        snprintf(id, sizeof id, "c%d", k);
        assert_metadata(s, "t", id, k == 3 ? ODD : m);
    }
    put(s, "t", "c4", "c3", "{\"source\":\"loop\",\"step\":4,\"parents\":{}}");
    ck_assert_int_eq(sql_int(path, "SELECT typeof(meta) = 'blob' AND meta_shape IS NOT NULL"
                                   " FROM convo_checkpoints WHERE id = 'c4'"),
                     1);
    char buf[64];
    ck_assert_str_eq(list_ids(s, "t", "{\"step\":2}", buf, sizeof buf), "c2");
    ck_assert_str_eq(list_ids(s, "t", "{\"source\":\"loop\"}", buf, sizeof buf),
                     "c4 c3 c2 c1 c0");
    /* the old process's statement no longer reads: it would take values for text */
    ck_assert_int_ne(sqlite3_step(st), SQLITE_ROW);
    sqlite3_finalize(st);
    ck_assert_int_eq(sqlite3_exec(old, "INSERT INTO convo_checkpoints(key, thread, ns, id,"
                                       " metadata, log_length, created_at, put_order, channels)"
                                       " VALUES(1, 1, '', 'y', '{}', 0, 1, 1, x'')",
                                  NULL, NULL, NULL),
                     SQLITE_ERROR);
    sqlite3_close(old);
    convo_close(s);
    ck_assert_int_eq(sql_int(path, "SELECT count(*) FROM convo_checkpoint_view"
                                   " WHERE (metadata IS NULL) = (metadata_shape IS NOT NULL)"),
                     5);
    exec_raw(path, "PRAGMA integrity_check");
}
END_TEST

/* ---- a VFS shim counting the pages SQLite reads (the file and its WAL) ---- */

typedef struct counted_file {
    sqlite3_file base; /* pMethods: counted_io */
    sqlite3_file *real;
} counted_file;

static sqlite3_vfs *real_vfs;
static long page_reads;

#define REAL(f) (((counted_file *)(f))->real)
static int c_close(sqlite3_file *f)
{
    int rc = REAL(f)->pMethods ? REAL(f)->pMethods->xClose(REAL(f)) : SQLITE_OK;
    free(REAL(f));
    return rc;
}
static int c_read(sqlite3_file *f, void *p, int n, sqlite3_int64 at)
{
    page_reads++;
    return REAL(f)->pMethods->xRead(REAL(f), p, n, at);
}
static int c_write(sqlite3_file *f, const void *p, int n, sqlite3_int64 at)
{
    return REAL(f)->pMethods->xWrite(REAL(f), p, n, at);
}
static int c_truncate(sqlite3_file *f, sqlite3_int64 n)
{
    return REAL(f)->pMethods->xTruncate(REAL(f), n);
}
static int c_sync(sqlite3_file *f, int flags) { return REAL(f)->pMethods->xSync(REAL(f), flags); }
static int c_size(sqlite3_file *f, sqlite3_int64 *n)
{
    return REAL(f)->pMethods->xFileSize(REAL(f), n);
}
static int c_lock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xLock(REAL(f), l); }
static int c_unlock(sqlite3_file *f, int l) { return REAL(f)->pMethods->xUnlock(REAL(f), l); }
static int c_reserved(sqlite3_file *f, int *out)
{
    return REAL(f)->pMethods->xCheckReservedLock(REAL(f), out);
}
static int c_control(sqlite3_file *f, int op, void *arg)
{
    return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}
static int c_sector(sqlite3_file *f) { return REAL(f)->pMethods->xSectorSize(REAL(f)); }
static int c_chars(sqlite3_file *f) { return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f)); }
static int c_shm_map(sqlite3_file *f, int pg, int size, int extend, void volatile **p)
{
    return REAL(f)->pMethods->xShmMap(REAL(f), pg, size, extend, p);
}
static int c_shm_lock(sqlite3_file *f, int at, int n, int flags)
{
    return REAL(f)->pMethods->xShmLock(REAL(f), at, n, flags);
}
static void c_shm_barrier(sqlite3_file *f) { REAL(f)->pMethods->xShmBarrier(REAL(f)); }
static int c_shm_unmap(sqlite3_file *f, int del)
{
    return REAL(f)->pMethods->xShmUnmap(REAL(f), del);
}

/* version 2: no memory-mapped reads (xFetch), so every page read is an xRead */
static const sqlite3_io_methods counted_io = {
    2,       c_close,    c_read,     c_write,       c_truncate, c_sync,    c_size,
    c_lock,  c_unlock,   c_reserved, c_control,     c_sector,   c_chars,   c_shm_map,
    c_shm_lock, c_shm_barrier, c_shm_unmap, NULL, NULL};

static int c_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out)
{
    (void)vfs;
    counted_file *cf = (counted_file *)f;
    cf->base.pMethods = NULL;
    cf->real = calloc(1, (size_t)real_vfs->szOsFile);
    if (!cf->real)
        return SQLITE_NOMEM;
    int rc = real_vfs->xOpen(real_vfs, name, cf->real, flags, out);
    if (rc != SQLITE_OK || !cf->real->pMethods) {
        free(cf->real);
        return rc != SQLITE_OK ? rc : SQLITE_CANTOPEN;
    }
    cf->base.pMethods = &counted_io;
    return SQLITE_OK;
}

/* The shim as the default VFS (the driver opens its files with the default). */
static void count_reads(void)
{
    static sqlite3_vfs vfs;
    if (real_vfs)
        return;
    real_vfs = sqlite3_vfs_find(NULL);
    ck_assert_ptr_nonnull(real_vfs);
    vfs = *real_vfs;
    vfs.szOsFile = (int)sizeof(counted_file);
    vfs.zName = "convo-counted";
    vfs.xOpen = c_open;
    vfs.pNext = NULL;
    ck_assert_int_eq(sqlite3_vfs_register(&vfs, 1), SQLITE_OK);
}

/* A chain of n checkpoints whose bodies code against a base (LangGraph's
 * shape: its id, a time, channel versions) on a new file at path. */
static void chain(const char *path, int n)
{
    convo_store *s = open_db(path);
    char id[32], parent[32], body[512];
    for (int i = 0; i < n; i++) {
        snprintf(id, sizeof id, "c%05d", i);
        /* one message a checkpoint: items are what makes libconvo code the body */
        char msg[64];
        snprintf(msg, sizeof msg, "{\"role\":\"user\",\"content\":\"m%d\"}", i);
        const char *texts[] = {msg};
        convo_items_in items = {0};
        items.items = texts;
        items.n = 1;
        items.log = 1;
        const convo_items_in *per_channel[] = {&items};
        convo_channel_in ch = {"messages", id, NULL};
        convo_checkpoint_in cp = CONVO_CHECKPOINT_IN_INIT;
        cp.channel_items = per_channel;
        cp.thread_id = "t";
        cp.checkpoint_id = id;
        cp.parent_id = i ? parent : NULL;
        char meta[80];
        snprintf(meta, sizeof meta, M_LOOP, i);
        cp.metadata_json = meta;
        int len = snprintf(body, sizeof body,
                           "{\"v\":4,\"ts\":\"2026-11-27T00:%02d:%02d.%06d+00:00\",\"id\":\"%s\","
                           "\"channel_versions\":{\"messages\":\"%s\",\"b\":\"00000000000000000000000000000001.0\"},"
                           "\"versions_seen\":{\"__input__\":{},\"node\":{\"messages\":\"%s\"}},"
                           "\"pending_sends\":[]}",
                           (i / 60) % 60, i % 60, i, id, id, i ? parent : id);
        cp.body = (convo_blob){"json", body, (size_t)len};
        cp.channels = &ch;
        cp.nchannels = 1;
        convo_error err;
        ck_assert_msg(convo_checkpoint_put(s, &cp, &err) == 0, "put %s: %s", id, err.message);
        memcpy(parent, id, sizeof id);
    }
    convo_close(s);
}

/* Pages read by a new store's get of checkpoint id (NULL: the latest) and a
 * list of the 3 newest; the body checked as put. */
static long fresh_reads(const char *path, const char *id, const char *want_id)
{
    convo_store *s = open_db(path);
    page_reads = 0;
    convo_checkpoint *cp = NULL;
    convo_error err;
    ck_assert_msg(convo_checkpoint_get(s, "t", "", id, &cp, &err) == 0, "get: %s", err.message);
    ck_assert_str_eq(convo_checkpoint_id(cp), want_id);
    convo_blob b = convo_checkpoint_body(cp);
    ck_assert_str_eq(b.type, "json");
    char want[40];
    snprintf(want, sizeof want, "\"id\":\"%s\"", want_id);
    ck_assert_ptr_nonnull(memmem(b.bytes, b.len, want, strlen(want)));
    convo_checkpoint_free(cp);
    convo_checkpoint_list_opts o = CONVO_CHECKPOINT_LIST_OPTS_INIT;
    o.thread_id = "t";
    o.limit = 3;
    convo_checkpoint_set *set = NULL;
    ck_assert_msg(convo_checkpoint_list(s, &o, &set, &err) == 0, "list: %s", err.message);
    ck_assert_int_eq(convo_checkpoint_set_count(set), 3);
    convo_checkpoint_set_free(set);
    long reads = page_reads;
    convo_close(s);
    return reads;
}

/* A fresh get at the end of 1,500 coded checkpoints reads about the pages it
 * reads at the end of 15 (the B-tree one level deeper): not the chain. */
START_TEST(test_fresh_get_reads_no_chain)
{
    count_reads();
    char short_path[600], long_path[600];
    snprintf(short_path, sizeof short_path, "%s", db_path("chain-short"));
    snprintf(long_path, sizeof long_path, "%s", db_path("chain-long"));
    chain(short_path, 15);
    chain(long_path, 1500);
    /* the bodies are stored coded (else this would pin nothing about bases) */
    ck_assert_int_ge(sql_int(long_path, "SELECT count(*) FROM convo_checkpoints AS c"
                                        " JOIN convo_names AS n ON n.num = c.body_type"
                                        " WHERE n.name = 'convo/delta'"),
                     1499);
    long few = fresh_reads(short_path, NULL, "c00014");
    long many = fresh_reads(long_path, NULL, "c01499");
    long mid = fresh_reads(long_path, "c00750", "c00750");
    ck_assert_int_gt(few, 0);
    ck_assert_msg(many <= few + 8 && mid <= few + 8,
                  "a fresh get read %ld pages after 1,500 checkpoints (%ld mid-chain), "
                  "%ld after 15",
                  many, mid, few);
    /* the file is that large: reading the chain would cost far more */
    ck_assert_int_gt(sql_int(long_path, "PRAGMA page_count"), few + 40);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    dir = argv[1];
    Suite *s = suite_create("layout8");
    TCase *tc = tcase_create("layout8");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_metadata_as_values);
    tcase_add_test(tc, test_shape_bound);
    tcase_add_test(tc, test_corrupt_values);
    tcase_add_test(tc, test_migration_7_to_8);
    tcase_add_test(tc, test_fresh_get_reads_no_chain);
    suite_add_tcase(s, tc);
    SRunner *r = srunner_create(s);
    srunner_run_all(r, CK_NORMAL);
    int failed = srunner_ntests_failed(r);
    srunner_free(r);
    return failed ? 1 : 0;
}
