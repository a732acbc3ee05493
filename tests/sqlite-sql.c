/* sqlite-sql.c — each .sql file of the SQLite driver on its own, read from the
 * source tree (the files scripts/embed.sh builds into the driver):
 *   - the migrations migrate-V-W.sql form one chain from 0, and run one by
 *     one in order on an empty scratch database each succeeds; the layout they
 *     make is, object for object and text for text, the one convo_open gives
 *     a new file, at the version the driver records;
 *   - every statements/NAME.sql holds exactly one statement, which prepares
 *     (sqlite3_prepare_v2) against that final layout; the checkpoint reads give
 *     the columns in the order the driver reads them;
 *   - the statements of the tail rewrite that look for checkpoints past what
 *     it keeps search an index, never scan a table;
 *   - each listing of the thread index (list-*.sql) walks the one index that
 *     gives its order, from the cursor on, without a sort, and the upkeep of
 *     the index rows (index-*.sql) searches, never scans;
 *   - the swaps of a put with log references seek their rows by index.
 * `tests/sqlite_sql SQLDIR DIR`: SQLDIR is drivers/sqlite of the source tree,
 * DIR a scratch folder. */
#include <check.h>
#include <convo.h>
#include <sqlite3.h>
#include "compact.h"
#include "pending.h"
#include "segments.h"
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *sqldir, *dir;

/* ------------------------------------------------------------ helpers */

/* The whole of file path (NUL-terminated, malloc'd). */
static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    ck_assert_msg(f != NULL, "open %s: %s", path, strerror(errno));
    size_t cap = 4096, n = 0, got;
    char *buf = malloc(cap);
    ck_assert_ptr_nonnull(buf);
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n - 1 == 0) {
            buf = realloc(buf, cap *= 2);
            ck_assert_ptr_nonnull(buf);
        }
    }
    ck_assert_msg(!ferror(f), "read %s", path);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names of the .sql files in folder sub of sqldir, sorted; *n of them. */
static char **sql_files(const char *sub, size_t *n)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", sqldir, sub);
    DIR *d = opendir(path);
    ck_assert_msg(d != NULL, "opendir %s: %s", path, strerror(errno));
    char **names = NULL;
    struct dirent *e;
    *n = 0;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(e->d_name);
        if (len <= 4 || strcmp(e->d_name + len - 4, ".sql") != 0)
            continue;
        names = realloc(names, (*n + 1) * sizeof *names);
        ck_assert_ptr_nonnull(names);
        names[(*n)++] = strdup(e->d_name);
    }
    closedir(d);
    if (*n)
        qsort(names, *n, sizeof *names, by_name);
    return names;
}

static void free_names(char **names, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* A fresh scratch database file in dir. */
static sqlite3 *scratch(const char *name, char *path, size_t size)
{
    snprintf(path, size, "%s/%s-%ld.db", dir, name, (long)getpid());
    unlink(path);
    sqlite3 *db;
    ck_assert_int_eq(sqlite3_open(path, &db), SQLITE_OK);
    /* the functions the driver registers on each connection (compact.c,
     * pending.c, segments.c) */
    ck_assert_int_eq(sq_compact_register(db), SQLITE_OK);
    ck_assert_int_eq(sq_pending_register(db), SQLITE_OK);
    ck_assert_int_eq(sq_segments_register(db), SQLITE_OK);
    return db;
}

/* Runs file sub/name of sqldir whole with sqlite3_exec; fails the test,
 * naming the file, when it does not succeed. */
static void exec_file(sqlite3 *db, const char *sub, const char *name)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s%s%s", sqldir, sub, *sub ? "/" : "", name);
    char *sql = slurp(path), *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    ck_assert_msg(rc == SQLITE_OK, "%s: %s", name, msg ? msg : sqlite3_errstr(rc));
    free(sql);
}

/* The migrations of the source tree, checked to be migrate-0-1.sql,
 * migrate-1-2.sql, ... with no gap: their number, the layout version they
 * reach. Other names in the folder are not migrations. */
static char **migrations(size_t *n)
{
    size_t all;
    char **names = sql_files(".", &all), **out = NULL;
    *n = 0;
    for (size_t i = 0; i < all; i++) {
        int from, to, end = 0;
        if (sscanf(names[i], "migrate-%d-%d.sql%n", &from, &to, &end) != 2 ||
            names[i][end] != '\0')
            continue;
        out = realloc(out, (*n + 1) * sizeof *out);
        ck_assert_ptr_nonnull(out);
        out[(*n)++] = strdup(names[i]);
    }
    free_names(names, all);
    /* in version order, which is not name order from migrate-10-11.sql on */
    for (size_t v = 0; v < *n; v++) {
        char want[64];
        snprintf(want, sizeof want, "migrate-%zu-%zu.sql", v, v + 1);
        size_t at = v;
        while (at < *n && strcmp(out[at], want) != 0)
            at++;
        ck_assert_msg(at < *n, "%s is missing: the migrations must go 0-1, 1-2, ... without a gap",
                      want);
        char *t = out[v];
        out[v] = out[at];
        out[at] = t;
    }
    return out;
}

/* The final layout: every migration in order on an empty database. */
static sqlite3 *final_layout(char *path, size_t size, size_t *version)
{
    sqlite3 *db = scratch("layout", path, size);
    char **names = migrations(version);
    ck_assert_msg(*version > 0, "no migrate-V-W.sql in %s", sqldir);
    for (size_t i = 0; i < *version; i++)
        exec_file(db, "", names[i]);
    free_names(names, *version);
    return db;
}

/* Every schema object of db, one per line: type, name, table, its SQL text. */
static char *schema_of(sqlite3 *db)
{
    sqlite3_stmt *st;
    ck_assert_int_eq(sqlite3_prepare_v2(db,
                                        "SELECT type, name, tbl_name, coalesce(sql, '')"
                                        " FROM sqlite_master ORDER BY type, name",
                                        -1, &st, NULL),
                     SQLITE_OK);
    size_t cap = 1, len = 0;
    char *out = calloc(1, 1);
    while (sqlite3_step(st) == SQLITE_ROW) {
        char line[8192];
        int n = snprintf(line, sizeof line, "%s %s %s: %s\n", sqlite3_column_text(st, 0),
                         sqlite3_column_text(st, 1), sqlite3_column_text(st, 2),
                         sqlite3_column_text(st, 3));
        ck_assert(n > 0 && (size_t)n < sizeof line);
        out = realloc(out, cap += (size_t)n);
        ck_assert_ptr_nonnull(out);
        memcpy(out + len, line, (size_t)n + 1);
        len += (size_t)n;
    }
    sqlite3_finalize(st);
    return out;
}

static long long int_of(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st;
    ck_assert_msg(sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", sql,
                  sqlite3_errmsg(db));
    ck_assert_int_eq(sqlite3_step(st), SQLITE_ROW);
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* ------------------------------------------------------------ migrations */

START_TEST(test_migrations_in_order)
{
    char path[600], made[600];
    size_t version;
    sqlite3 *db = final_layout(path, sizeof path, &version);
    /* the driver makes the same layout on a new file, at that version */
    snprintf(made, sizeof made, "%s/driver-%ld.db", dir, (long)getpid());
    unlink(made);
    char url[700];
    snprintf(url, sizeof url, "sqlite:%s", made);
    convo_store *s = NULL;
    convo_error err;
    ck_assert_msg(convo_open(&s, url, &err) == 0, "%s", err.message);
    convo_close(s);
    sqlite3 *driver;
    ck_assert_int_eq(sqlite3_open(made, &driver), SQLITE_OK);
    ck_assert_int_eq(int_of(driver, "SELECT value FROM convo_meta WHERE key = 'schema_version'"),
                     (long long)version);
    char *want = schema_of(db), *got = schema_of(driver);
    ck_assert_msg(strstr(want, "table convo_threads") != NULL, "%s", want);
    /* the first line that differs, so the message stays short */
    size_t at = 0, line = 0;
    while (want[at] && want[at] == got[at])
        if (want[at++] == '\n')
            line = at;
    ck_assert_msg(strcmp(want, got) == 0,
                  "the layout of the .sql files differs from the driver's: files [%.300s]"
                  " driver [%.300s]",
                  want + line, got + line);
    free(want);
    free(got);
    sqlite3_close(driver);
    sqlite3_close(db);
}
END_TEST

/* ------------------------------------------------------------ statements */

/* The columns of a checkpoint row, in the order the driver's cp_from_row()
 * reads them. */
static const char *const cp_columns[] = {"key",      "ns",         "id",        "parent_id",
                                         "metadata", "body_type",  "body",      "log_length",
                                         "created_at", "channel_list"};
static const char *const cp_reads[] = {"cp-get.sql", "cp-latest.sql", "cp-list-thread.sql",
                                       "cp-list-all.sql", "cp-list-all-before.sql"};

static void check_cp_columns(const char *name, sqlite3_stmt *st)
{
    int listing_all = strncmp(name, "cp-list-all", 11) == 0;
    int n = sqlite3_column_count(st), want = 10 + listing_all;
    ck_assert_msg(n == want, "%s gives %d columns, the driver reads %d", name, n, want);
    for (int i = 0; i < 10; i++)
        ck_assert_msg(strcmp(sqlite3_column_name(st, i), cp_columns[i]) == 0,
                      "%s: column %d is %s, the driver reads it as %s", name, i,
                      sqlite3_column_name(st, i), cp_columns[i]);
    if (listing_all) /* the thread id */
        ck_assert_str_eq(sqlite3_column_name(st, 10), "id");
}

START_TEST(test_statements_prepare)
{
    char path[600];
    size_t version, n;
    sqlite3 *db = final_layout(path, sizeof path, &version);
    /* the bench statements are printf formats: their scratch table, by the
     * name as it stands in the file, comes from bench-create.sql */
    exec_file(db, "statements", "bench-create.sql");
    char **names = sql_files("statements", &n);
    ck_assert_msg(n >= 40, "only %zu files in %s/statements", n, sqldir);
    size_t cp_checked = 0;
    for (size_t i = 0; i < n; i++) {
        char file[1024];
        snprintf(file, sizeof file, "%s/statements/%s", sqldir, names[i]);
        char *sql = slurp(file);
        const char *tail = NULL;
        sqlite3_stmt *st = NULL, *more = NULL;
        int rc = sqlite3_prepare_v2(db, sql, -1, &st, &tail);
        ck_assert_msg(rc == SQLITE_OK, "%s: %s", names[i], sqlite3_errmsg(db));
        ck_assert_msg(st != NULL, "%s holds no statement", names[i]);
        /* one statement a file: the rest is blank or comments */
        rc = sqlite3_prepare_v2(db, tail, -1, &more, NULL);
        ck_assert_msg(rc == SQLITE_OK && more == NULL, "%s holds more than one statement",
                      names[i]);
        for (size_t k = 0; k < sizeof cp_reads / sizeof *cp_reads; k++)
            if (strcmp(names[i], cp_reads[k]) == 0) {
                check_cp_columns(names[i], st);
                cp_checked++;
            }
        sqlite3_finalize(st);
        free(sql);
    }
    ck_assert_int_eq(cp_checked, sizeof cp_reads / sizeof *cp_reads);
    free_names(names, n);
    sqlite3_close(db);
}
END_TEST

/* The statements a rewrite runs on checkpoints: each must read only the
 * thread's key range of convo_checkpoints (layout 9 has no index on
 * log_length; convo_checkpoint_reach spares the walk when nothing is past
 * what the rewrite keeps). */
static const char *const rewrite_reads[] = {"cp-beyond.sql", "cp-delete-beyond.sql",
                                            "cp-orphans-beyond.sql"};

START_TEST(test_rewrite_statements_search)
{
    char path[600];
    size_t version;
    sqlite3 *db = final_layout(path, sizeof path, &version);
    for (size_t i = 0; i < sizeof rewrite_reads / sizeof *rewrite_reads; i++) {
        char file[1024];
        snprintf(file, sizeof file, "%s/statements/%s", sqldir, rewrite_reads[i]);
        char *sql = slurp(file);
        size_t size = strlen(sql) + 32;
        char *plan_sql = malloc(size);
        ck_assert_ptr_nonnull(plan_sql);
        snprintf(plan_sql, size, "EXPLAIN QUERY PLAN %s", sql);
        sqlite3_stmt *st;
        ck_assert_msg(sqlite3_prepare_v2(db, plan_sql, -1, &st, NULL) == SQLITE_OK, "%s: %s",
                      rewrite_reads[i], sqlite3_errmsg(db));
        int by_range = 0;
        while (sqlite3_step(st) == SQLITE_ROW) {
            const char *detail = (const char *)sqlite3_column_text(st, 3);
            ck_assert_msg(strncmp(detail, "SCAN", 4) != 0, "%s: %s", rewrite_reads[i], detail);
            by_range |= strstr(detail, "USING INTEGER PRIMARY KEY (rowid>? AND rowid<?)") != NULL;
        }
        ck_assert_msg(by_range, "%s does not read the thread's key range", rewrite_reads[i]);
        sqlite3_finalize(st);
        free(plan_sql);
        free(sql);
    }
    sqlite3_close(db);
}
END_TEST

/* The query plan of statements/name on db, one line per step. */
static char *plan_of(sqlite3 *db, const char *name)
{
    char file[1024];
    snprintf(file, sizeof file, "%s/statements/%s", sqldir, name);
    char *sql = slurp(file);
    size_t size = strlen(sql) + 32;
    char *plan_sql = malloc(size);
    ck_assert_ptr_nonnull(plan_sql);
    snprintf(plan_sql, size, "EXPLAIN QUERY PLAN %s", sql);
    sqlite3_stmt *st;
    ck_assert_msg(sqlite3_prepare_v2(db, plan_sql, -1, &st, NULL) == SQLITE_OK, "%s: %s", name,
                  sqlite3_errmsg(db));
    char *plan = calloc(1, 1);
    size_t len = 0;
    while (sqlite3_step(st) == SQLITE_ROW) {
        const char *detail = (const char *)sqlite3_column_text(st, 3);
        plan = realloc(plan, len + strlen(detail) + 2);
        ck_assert_ptr_nonnull(plan);
        len += (size_t)sprintf(plan + len, "%s\n", detail);
    }
    sqlite3_finalize(st);
    free(plan_sql);
    free(sql);
    return plan;
}

/* Each listing and the index that must serve it: a search from the cursor
 * (the thread row is then one rowid seek; the -bare listings read their one
 * B-tree alone): convo_activity and convo_key_recent are WITHOUT ROWID
 * tables in activity order, convo_key_threads one in creation order, and
 * its index by id covers what the walk reads. */
static const struct {
    const char *file, *uses;
} listings[] = {
    {"list-recent.sql", "SEARCH i USING PRIMARY KEY ((updated_at,id)<(?,?))"},
    {"list-recent-reverse.sql", "SEARCH i USING PRIMARY KEY ((updated_at,id)>(?,?))"},
    {"list-created.sql", "USING INDEX convo_threads_by_created ((created_at,id)<(?,?))"},
    {"list-created-reverse.sql", "USING INDEX convo_threads_by_created ((created_at,id)>(?,?))"},
    {"list-id.sql", "USING INDEX sqlite_autoindex_convo_threads_1 (id>?)"},
    {"list-id-reverse.sql", "USING INDEX sqlite_autoindex_convo_threads_1 (id<?)"},
    {"list-key-recent.sql", "SEARCH i USING PRIMARY KEY (key=? AND value=? AND"
                            " (updated_at,id)<(?,?))"},
    {"list-key-recent-reverse.sql", "SEARCH i USING PRIMARY KEY (key=? AND value=? AND"
                                    " (updated_at,id)>(?,?))"},
    {"list-key-open.sql", "SEARCH i USING PRIMARY KEY (updated_at=?)"},
    {"list-key-created.sql", "SEARCH i USING PRIMARY KEY (key=? AND"
                             " value=? AND (created_at,id)<(?,?))"},
    {"list-key-created-reverse.sql", "SEARCH i USING PRIMARY KEY (key=?"
                                     " AND value=? AND (created_at,id)>(?,?))"},
    {"list-key-id.sql", "USING COVERING INDEX convo_key_threads_by_id (key=? AND value=? AND"
                        " id>?)"},
    {"list-key-id-reverse.sql", "USING COVERING INDEX convo_key_threads_by_id (key=? AND"
                                " value=? AND id<?)"},
    {"list-recent-bare.sql", "SEARCH convo_activity USING PRIMARY KEY ((updated_at,id)<(?,?))"},
    {"list-recent-reverse-bare.sql", "SEARCH convo_activity USING PRIMARY KEY"
                                     " ((updated_at,id)>(?,?))"},
    {"list-key-recent-bare.sql", "SEARCH convo_key_recent USING PRIMARY KEY (key=? AND"
                                 " value=? AND (updated_at,id)<(?,?))"},
    {"list-key-recent-reverse-bare.sql", "SEARCH convo_key_recent USING PRIMARY KEY (key=?"
                                         " AND value=? AND (updated_at,id)>(?,?))"},
};

/* The upkeep of the index in every write: a search, never a walk. (The
 * repairs, activity-forget.sql and recent-forget.sql, walk by design.) */
static const char *const index_upkeep[] = {
    "activity-move.sql", "activity-delete.sql", "recent-move.sql",   "recent-delete.sql",
    "recent-add.sql",    "key-threads-add.sql", "key-threads-delete.sql",
    "thread-set-key-values.sql", "thread-key-values.sql",
    "thread-touch.sql",    "thread-by-num.sql", "msg-last.sql",
    "msg-last-body.sql", "activity-add.sql",  "thread-any-deadline.sql",
    "activity-newest.sql", "thread-activity.sql", "activity-open-values.sql"};

START_TEST(test_list_statements_search)
{
    char path[600];
    size_t version;
    sqlite3 *db = final_layout(path, sizeof path, &version);
    size_t n, seen = 0;
    char **names = sql_files("statements", &n);
    for (size_t i = 0; i < n; i++)
        seen += strncmp(names[i], "list-", 5) == 0;
    free_names(names, n);
    ck_assert_msg(seen == sizeof listings / sizeof *listings,
                  "%zu list-*.sql files, %zu checked here", seen,
                  sizeof listings / sizeof *listings);
    for (size_t i = 0; i < sizeof listings / sizeof *listings; i++) {
        char *plan = plan_of(db, listings[i].file);
        ck_assert_msg(strstr(plan, listings[i].uses) != NULL, "%s does not search %s: %s",
                      listings[i].file, listings[i].uses, plan);
        ck_assert_msg(strstr(plan, "SCAN") == NULL && strstr(plan, "TEMP B-TREE") == NULL,
                      "%s scans or sorts: %s", listings[i].file, plan);
        int bare = strstr(listings[i].file, "-bare.sql") != NULL;
        if (bare) /* one B-tree and nothing else */
            ck_assert_msg(strchr(plan, '\n') == plan + strlen(plan) - 1, "%s: %s",
                          listings[i].file, plan);
        else if (strncmp(listings[i].file, "list-key-", 9) == 0 ||
                 strncmp(listings[i].file, "list-recent", 11) == 0)
            ck_assert_msg(strstr(plan, "SEARCH t USING INTEGER PRIMARY KEY (rowid=?)") != NULL,
                          "%s: %s", listings[i].file, plan);
        free(plan);
    }
    for (size_t i = 0; i < sizeof index_upkeep / sizeof *index_upkeep; i++) {
        char *plan = plan_of(db, index_upkeep[i]);
        ck_assert_msg(strstr(plan, "SCAN") == NULL, "%s scans: %s", index_upkeep[i], plan);
        free(plan);
    }
    sqlite3_close(db);
}
END_TEST

/* A put with log references runs these once per swap, inside its write
 * transaction (a pending write's swap: cp-find.sql, then its row by key,
 * layout 10; layout 13: every put moves the thread's waiting records into
 * their rows; cp-pending-wait.sql, an insert by key, has no plan): each must
 * seek its row by an index, never walk a table. */
static const char *const swap_statements[] = {"cp-find.sql", "cp-pending-get.sql",
                                              "cp-pending-set.sql", "cp-pending-settle.sql",
                                              "cp-pending-settled.sql",
                                              "blob-swap.sql", "cp-log-at-least.sql",
                                              "cp-get.sql"};

START_TEST(test_swap_statements_search)
{
    char path[600];
    size_t version;
    sqlite3 *db = final_layout(path, sizeof path, &version);
    for (size_t i = 0; i < sizeof swap_statements / sizeof *swap_statements; i++) {
        char *plan = plan_of(db, swap_statements[i]);
        ck_assert_msg(strstr(plan, "SEARCH") != NULL && strstr(plan, "SCAN") == NULL,
                      "%s does not search: %s", swap_statements[i], plan);
        /* layout 10: a lookup by id on 6 bytes of the id (or its text) in the
         * thread's key range */
        ck_assert_msg(strstr(swap_statements[i], "pending") != NULL ||
                          strstr(plan, "convo_checkpoints_by_id (<expr>=? AND rowid>? AND rowid<?)") != NULL,
                      "%s does not seek by id: %s", swap_statements[i], plan);
        /* layout 14: an ordered row by the first ordered row of its block */
        ck_assert_msg(strstr(swap_statements[i], "pending") != NULL ||
                          strstr(plan, "convo_checkpoints_ordered_by_id (thread=? AND id<?)") != NULL,
                      "%s does not seek the ordered rows: %s", swap_statements[i], plan);
        free(plan);
    }
    sqlite3_close(db);
}
END_TEST

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: %s SQLDIR DIR\n", argv[0]);
        return 2;
    }
    sqldir = argv[1];
    dir = argv[2];
    Suite *suite = suite_create("sqlite-sql");
    TCase *tc = tcase_create("sqlite-sql");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, test_migrations_in_order);
    tcase_add_test(tc, test_statements_prepare);
    tcase_add_test(tc, test_rewrite_statements_search);
    tcase_add_test(tc, test_list_statements_search);
    tcase_add_test(tc, test_swap_statements_search);
    suite_add_tcase(suite, tc);
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
