/* index.c — the upkeep of the SQLite driver's thread index, in the
 * transaction of the write that calls for it: each thread's entry in the
 * activity order (convo_activity), the extra keys a store indexes (declared
 * once, recorded in convo_indexed_keys, checked at every open that declares
 * some), and each thread's rows for them (convo_thread_keys, and
 * convo_key_recent at its activity time but for the open thread). The listing
 * that reads them is list.c; the layout is migrate-4-5.sql and
 * migrate-14-15.sql (docs/sqlite.md, The thread index). */
#include "config.h"
#include "sqlite_int.h"
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* ---- values ---- */

/* *out: the canonical JSON text of v as the index keeps it, malloc'd, or NULL
 * when the index keeps no row for v (an object or array, which containment
 * does not match by equality, or a text over INDEX_VALUE_MAX bytes). Numbers
 * are written as the double they are, since containment compares them so (3
 * and 3.0 are one value), with -0 as 0. */
int sq_index_value(const json_t *v, char **out, convo_error *err)
{
    *out = NULL;
    if (!v || json_is_object(v) || json_is_array(v))
        return 0;
    json_t *number = NULL;
    if (json_is_number(v)) {
        double d = json_number_value(v);
        if (!(number = json_real(d == 0 ? 0.0 : d)))
            return no_memory(err);
        v = number;
    }
    char *text = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);
    json_decref(number);
    if (!text)
        return no_memory(err);
    if (strlen(text) > INDEX_VALUE_MAX) {
        free(text);
        return 0;
    }
    *out = text;
    return 0;
}

/* ---- the declared keys ---- */

void sq_index_keys_free(char **keys)
{
    for (size_t i = 0; keys && keys[i]; i++)
        free(keys[i]);
    free(keys);
}

/* *keys: the keys the store indexes, in byte order, NULL-terminated (an empty
 * list when none was declared); caller frees with sq_index_keys_free. */
int sq_index_keys(sq_conn *c, char ***keys, convo_error *err)
{
    sqlite3_stmt *st;
    size_t n = 0;
    char **list = calloc(1, sizeof *list);
    int rc = list ? sq_stmt_get(c, ST_INDEX_KEYS, &st, err) : no_memory(err);
    while (rc == 0 && (rc = sq_stmt_step(c, st, "reading the indexed keys", err)) == 1) {
        const char *key = (const char *)sqlite3_column_text(st, 0);
        char **grown = realloc(list, (n + 2) * sizeof *list);
        if (grown)
            list = grown;
        if (!key || !grown || !(list[n] = strdup(key))) {
            sq_stmt_done(st);
            rc = no_memory(err);
            break;
        }
        list[++n] = NULL;
        rc = 0;
    }
    if (rc) {
        sq_index_keys_free(list);
        return rc;
    }
    *keys = list;
    return 0;
}

/* ---- the open entry ----
 *
 * The thread written last, from its creation or its second write in a row
 * on, has its entry in convo_activity at ACTIVITY_OPEN, after every other
 * entry, and no rows in convo_key_recent (layout 15; a listing by a key's
 * value adds it, list-key-open.sql); its next writes leave that so, so an
 * append to it writes no page of the index. Its time and length are the
 * thread's own (sq_thread_activity). A write to another thread first gives
 * the open entry those and the open thread its key rows, then opens its own:
 * every entry but the open one is at its thread's time, and since a write's
 * time is past every other thread's (sq_activity_next), the open thread is
 * also the newest, of the store and of each of its key values. A thread's
 * creation with a key so writes one leaf of its keys' orders (the thread it
 * closes, in that thread's value's range), not two. */

/* Thread num's activity time (the later of its row's updated_at and its last
 * message's created_at) and length, read from the thread, or from what the
 * transaction read of it before (the open thread, by sq_activity_next). */
int sq_thread_activity(sq_conn *c, int64_t num, int64_t *at, int64_t *length,
                       convo_error *err)
{
    if (num == c->open_read.num) {
        *at = c->open_read.at;
        *length = c->open_read.length;
        return 0;
    }
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_THREAD_ACTIVITY, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, num);
    if ((rc = sq_stmt_step(c, st, "reading a thread", err)) != 1)
        return rc < 0 ? rc : convo__error(err, CONVO_ECORRUPT, NULL,
                                          "sqlite: thread number %lld is gone", (long long)num);
    *at = sqlite3_column_int64(st, 0);
    *length = sqlite3_column_int64(st, 1);
    sq_stmt_done(st);
    return 0;
}

/* The newest entry of the activity order: its time, thread number and id
 * (malloc'd; *num 0 when the order is empty). */
typedef struct entry {
    int64_t at, num;
    char *id;
} entry;

static int newest_entry(sq_conn *c, entry *e, convo_error *err)
{
    sqlite3_stmt *st;
    *e = (entry){0, 0, NULL};
    int rc = sq_stmt_get(c, ST_ACTIVITY_NEWEST, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, ACTIVITY_OPEN);
    if ((rc = sq_stmt_step(c, st, "reading the activity order", err)) != 1)
        return rc;
    e->at = sqlite3_column_int64(st, 0);
    e->num = sqlite3_column_int64(st, 1);
    e->id = strdup((const char *)sqlite3_column_text(st, 2));
    sq_stmt_done(st);
    return e->id ? 0 : no_memory(err);
}

/* The time of a write to thread t (zeroed when new): now, or past its own
 * activity and every other thread's should the clock have stepped back (or
 * not moved), so the thread it opens is the newest and a thread's times grow
 * with every write. */
int sq_activity_next(sq_conn *c, const thread_row *t, int64_t *at, convo_error *err)
{
    entry e;
    int64_t floor = activity_of(t), other = 0, length;
    c->open_read.num = 0;
    int rc = newest_entry(c, &e, err);
    if (rc == 0 && e.at == ACTIVITY_OPEN && e.num != t->num &&
        (rc = sq_thread_activity(c, e.num, &other, &length, err)) == 0)
        c->open_read = (struct sq_open_read){e.num, other, length}; /* for activity_close */
    else if (rc == 0 && e.at != ACTIVITY_OPEN)
        other = e.at;
    free(e.id);
    if (other > floor)
        floor = other;
    int64_t now = convo__now_micros();
    /* an imported time can be the last one (INT64_MAX): later writes share it */
    *at = now > floor ? now : floor < INT64_MAX ? floor + 1 : floor;
    return rc;
}

/* Moves thread num's entry (id) in the activity order from `from` to `to`,
 * with length messages; *moved 0 when it was not there. */
static int activity_move(sq_conn *c, const char *id, int64_t from, int64_t to, int64_t length,
                         int *moved, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_ACTIVITY_MOVE, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 2, from);
    sqlite3_bind_int64(st, 3, to);
    sqlite3_bind_int64(st, 4, length);
    rc = sq_stmt_run(c, st, "moving the thread in the activity order", err);
    *moved = rc == 0 && sqlite3_changes(c->db) > 0;
    return rc;
}

/* Rows in the activity order of thread num's indexed keys (of `key` only,
 * unless NULL), as of at with length messages; none at the open time. */
static int recent_add(sq_conn *c, int64_t num, int64_t at, const char *key, int64_t length,
                      convo_error *err)
{
    if (at == ACTIVITY_OPEN)
        return 0;
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_RECENT_ADD, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, num);
    sqlite3_bind_int64(st, 2, at);
    if (key)
        sqlite3_bind_text(st, 3, key, -1, SQLITE_STATIC);
    sqlite3_bind_int64(st, 4, length);
    return sq_stmt_run(c, st, "indexing the extra", err);
}

static int recent_delete(sq_conn *c, int64_t num, const char *key, int64_t from,
                         convo_error *err);

/* Thread num's rows in its indexed keys' orders (of `key` only, unless NULL)
 * at `from` move to `to`, with length messages: they enter at `to` when from
 * is 0 or the open time (the open thread has none), and go when `to` is. */
static int recent_move(sq_conn *c, int64_t num, const char *key, int64_t from, int64_t to,
                       int64_t length, convo_error *err)
{
    if (!from || from == ACTIVITY_OPEN)
        return recent_add(c, num, to, key, length, err);
    if (to == ACTIVITY_OPEN)
        return recent_delete(c, num, key, from, err);
    sqlite3_stmt *keys, *st;
    int rc = sq_stmt_get(c, ST_KEYS_OF, &keys, err);
    if (rc == 0)
        rc = sq_stmt_get(c, ST_RECENT_MOVE, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(keys, 1, num);
    if (key)
        sqlite3_bind_text(keys, 2, key, -1, SQLITE_STATIC);
    while ((rc = sq_stmt_step(c, keys, "reading the thread's key rows", err)) == 1) {
        for (int i = 0; i < 3; i++) /* key, value, id: ?1, ?2, ?4 */
            sqlite3_bind_value(st, i < 2 ? i + 1 : 4, sqlite3_column_value(keys, i));
        sqlite3_bind_int64(st, 3, from);
        sqlite3_bind_int64(st, 5, to);
        sqlite3_bind_int64(st, 6, length);
        if ((rc = sq_stmt_run(c, st, "updating the key index", err)) != 0) {
            sq_stmt_done(keys);
            return rc;
        }
    }
    return rc;
}

/* Reads the newest entry, and when it is open and not thread num's gives it
 * its thread's time and length, in the activity order and in its keys'
 * orders. *newest: whose the newest entry is, num's open (2) or at its time
 * (1), or another thread's (0). */
static int activity_close(sq_conn *c, int64_t num, int *newest, convo_error *err)
{
    entry e;
    int64_t at, length;
    int moved, rc = newest_entry(c, &e, err);
    *newest = rc || e.num != num || !e.id ? 0 : e.at == ACTIVITY_OPEN ? 2 : 1;
    if (rc == 0 && e.at == ACTIVITY_OPEN && !*newest &&
        (rc = sq_thread_activity(c, e.num, &at, &length, err)) == 0 &&
        (rc = activity_move(c, e.id, ACTIVITY_OPEN, at, length, &moved, err)) == 0)
        rc = recent_move(c, e.num, NULL, ACTIVITY_OPEN, at, length, err);
    free(e.id);
    return rc;
}

/* Thread num's rows in its indexed keys' orders (of `key` only, unless NULL)
 * at `from` go (or at the open time: a file of layout 6 to 14 had them). */
static int recent_delete(sq_conn *c, int64_t num, const char *key, int64_t from,
                         convo_error *err)
{
    sqlite3_stmt *keys, *st;
    int rc = sq_stmt_get(c, ST_KEYS_OF, &keys, err);
    if (rc == 0)
        rc = sq_stmt_get(c, ST_RECENT_DELETE, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(keys, 1, num);
    if (key)
        sqlite3_bind_text(keys, 2, key, -1, SQLITE_STATIC);
    while ((rc = sq_stmt_step(c, keys, "reading the thread's key rows", err)) == 1) {
        for (int i = 0; i < 3; i++) /* key, value, id: ?1, ?2, ?4 */
            sqlite3_bind_value(st, i < 2 ? i + 1 : 4, sqlite3_column_value(keys, i));
        sqlite3_bind_int64(st, 3, from);
        sqlite3_bind_int64(st, 5, ACTIVITY_OPEN);
        if ((rc = sq_stmt_run(c, st, "updating the key index", err)) != 0) {
            sq_stmt_done(keys);
            return rc;
        }
    }
    return rc;
}

/* ---- the activity order ---- */

/* A layout-4 libconvo wrote thread num without moving its entries: the ones
 * it has go, found by walks (rare), and it enters again at `at`. */
static int activity_repair(sq_conn *c, int64_t num, int64_t at, int64_t length,
                           convo_error *err)
{
    int rc = sq_run_with_ints(c, ST_ACTIVITY_FORGET, 1, num, 0, 0, "repairing the activity order",
                              err);
    if (rc == 0)
        rc = sq_run_with_ints(c, ST_ACTIVITY_ADD, 3, num, at, length,
                              "entering the thread in the activity order", err);
    if (rc == 0)
        rc = sq_run_with_ints(c, ST_RECENT_FORGET, 1, num, 0, 0, "repairing the key index", err);
    return rc ? rc : recent_add(c, num, at, NULL, length, err);
}

/* Thread t (id; found: 0 when it was created by this write, with no entry
 * yet), written at `to` (from sq_activity_next) and with length messages
 * after it, goes to the front of the activity order and of its keys' orders:
 * at `to`, or at the open time when it is new or the newest thread already
 * (its second write in a row; its key rows then leave their orders until the
 * entry closes), and then nothing more to write while no other
 * thread is: an append to the thread written last touches no page of the
 * index, and writes that alternate between threads move one entry each, as
 * before there was an open entry. *entry_at: where its entries are now. */
int sq_activity_front(sq_conn *c, const char *id, const thread_row *t, int found, int64_t to,
                      int64_t length, int64_t *entry_at, convo_error *err)
{
    int newest, moved = 0;
    int rc = activity_close(c, t->num, &newest, err);
    *entry_at = newest || !found ? ACTIVITY_OPEN : to;
    if (rc || (found && newest == 2))
        return rc;
    if (!found)
        return sq_run_with_ints(c, ST_ACTIVITY_ADD, 3, t->num, ACTIVITY_OPEN, length,
                                "entering the thread in the activity order", err);
    if ((rc = activity_move(c, id, activity_of(t), *entry_at, length, &moved, err)) != 0)
        return rc;
    if (!moved)
        return activity_repair(c, t->num, *entry_at, length, err);
    return recent_move(c, t->num, NULL, activity_of(t), *entry_at, length, err);
}

/* Before thread num is removed: its entry in the activity order and its key
 * rows go. Reads its row and its last message, so it runs first. */
int sq_index_forget(sq_conn *c, int64_t num, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_THREAD_BY_NUM, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, num);
    if ((rc = sq_stmt_step(c, st, "reading a thread", err)) != 1)
        return rc < 0 ? rc : convo__error(err, CONVO_ECORRUPT, NULL,
                                          "sqlite: thread number %lld is gone", (long long)num);
    thread_row t = {.num = num, .updated_at = sqlite3_column_int64(st, 1)};
    char *id = strdup((const char *)sqlite3_column_text(st, 0));
    sq_stmt_done(st);
    if (!id)
        return no_memory(err);
    rc = sq_thread_last(c, num, &t.length, &t.last_at, err);
    if (rc == 0 && (rc = sq_stmt_get(c, ST_ACTIVITY_DELETE, &st, err)) == 0) {
        sqlite3_bind_text(st, 1, id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, activity_of(&t));
        sqlite3_bind_int64(st, 3, ACTIVITY_OPEN);
        rc = sq_stmt_run(c, st, "removing the thread from the activity order", err);
    }
    free(id);
    if (rc == 0 && sqlite3_changes(c->db) == 0) { /* a layout-4 writer's: walk */
        rc = sq_run_with_ints(c, ST_ACTIVITY_FORGET, 1, num, 0, 0,
                              "removing the thread from the activity order", err);
        if (rc == 0)
            rc = sq_run_with_ints(c, ST_RECENT_FORGET, 1, num, 0, 0, "removing key index rows",
                                  err);
    } else if (rc == 0)
        rc = recent_delete(c, num, NULL, activity_of(&t), err);
    return rc ? rc : sq_run_with_ints(c, ST_KEYS_DELETE, 1, num, 0, 0, "removing key index rows",
                                      err);
}

/* ---- key rows ---- */

/* *same: 1 when thread num's row for indexed key `key` holds value (or it has
 * none and value is NULL: a value the index does not keep), one seek. */
static int key_row_is(sq_conn *c, int64_t num, const char *key, const char *value, int *same,
                      convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_KEYS_OF, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, num);
    sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
    if ((rc = sq_stmt_step(c, st, "reading the thread's key rows", err)) < 0)
        return rc;
    const char *stored = rc == 1 ? (const char *)sqlite3_column_text(st, 1) : NULL;
    *same = stored && value ? strcmp(stored, value) == 0 : !stored && !value;
    if (rc == 1)
        sq_stmt_done(st);
    return 0;
}

/* Thread num, active as of at (ACTIVITY_OPEN: the open entry) with length
 * messages, holds v at indexed key `key`: its old rows for the key go, new
 * ones come when the value is one the index keeps. */
static int index_set(sq_conn *c, int64_t num, int64_t at, int64_t length, const char *key,
                     const json_t *v, convo_error *err)
{
    char *value;
    int same;
    int rc = sq_index_value(v, &value, err);
    if (rc == 0 && (rc = key_row_is(c, num, key, value, &same, err)) == 0 && same) {
        free(value); /* a patch that repeats the value: the rows are where they belong */
        return 0;
    }
    if (rc == 0)
        rc = recent_delete(c, num, key, at, err);
    sqlite3_stmt *st;
    if (rc == 0)
        rc = sq_stmt_get(c, value ? ST_KEYS_PUT : ST_KEYS_DROP, &st, err);
    if (rc == 0) {
        sqlite3_bind_int64(st, 1, num);
        sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
        if (value)
            sqlite3_bind_text(st, 3, value, -1, SQLITE_STATIC);
        rc = sq_stmt_run(c, st, "indexing the extra", err);
    }
    if (rc == 0 && value)
        rc = recent_add(c, num, at, key, length, err);
    free(value);
    return rc;
}

/* After a save_extra of patch on thread num (its row already written, its
 * entry at `at`, length messages): each indexed key the patch sets gets its
 * new rows, or loses them when the new value is not one the index keeps. Keys
 * the patch does not name keep theirs. */
int sq_index_extra(sq_conn *c, int64_t num, int64_t at, int64_t length, const json_t *patch,
                   convo_error *err)
{
    char **keys;
    int rc = sq_index_keys(c, &keys, err);
    if (rc)
        return rc;
    for (size_t i = 0; rc == 0 && keys[i]; i++) {
        json_t *v = json_object_get(patch, keys[i]);
        if (v)
            rc = index_set(c, num, at, length, keys[i], v, err);
    }
    sq_index_keys_free(keys);
    return rc;
}

/* A fork: thread dst, created with src's extra, its entry at `at` with
 * length messages, gets src's key rows. */
int sq_index_copy(sq_conn *c, int64_t src, int64_t dst, int64_t at, int64_t length,
                  convo_error *err)
{
    int rc = sq_run_with_ints(c, ST_KEYS_COPY, 2, src, dst, 0, "indexing the fork's extra", err);
    return rc ? rc : recent_add(c, dst, at, NULL, length, err);
}

/* ---- declaring the keys (at open) ---- */

/* Rows for the threads stored before the keys were declared, at their
 * times; the open entry's thread's are the open rows of their values. */
static int backfill(sq_conn *c, char *const *keys, convo_error *err)
{
    sqlite3_stmt *st;
    entry open;
    int rc = newest_entry(c, &open, err);
    free(open.id);
    int64_t open_num = open.at == ACTIVITY_OPEN ? open.num : 0;
    if (rc == 0)
        rc = sq_stmt_get(c, ST_INDEX_BACKFILL, &st, err);
    while (rc == 0 && (rc = sq_stmt_step(c, st, "indexing stored threads", err)) == 1) {
        const char *extra = (const char *)sqlite3_column_text(st, 1);
        json_t *obj = extra ? json_loadb(extra, (size_t)sqlite3_column_bytes(st, 1), 0, NULL)
                            : NULL;
        thread_row t = {.num = sqlite3_column_int64(st, 0),
                        .updated_at = sqlite3_column_int64(st, 2)};
        rc = sq_thread_last(c, t.num, &t.length, &t.last_at, err);
        for (size_t i = 0; rc == 0 && json_is_object(obj) && keys[i]; i++) {
            json_t *v = json_object_get(obj, keys[i]);
            if (v)
                rc = index_set(c, t.num, t.num == open_num ? ACTIVITY_OPEN : activity_of(&t),
                               t.length, keys[i], v, err);
        }
        json_decref(obj);
        if (rc)
            sq_stmt_done(st);
    }
    return rc;
}

/* "a, b" for a message; NULL when out of memory. */
static char *keys_text(char *const *keys)
{
    size_t len = 1;
    for (size_t i = 0; keys[i]; i++)
        len += strlen(keys[i]) + 2;
    char *text = malloc(len);
    if (!text)
        return NULL;
    text[0] = '\0';
    for (size_t i = 0; keys[i]; i++) {
        if (i)
            strcat(text, ", ");
        strcat(text, keys[i]);
    }
    return text;
}

static int keys_differ(char *const *recorded, char *const *declared, convo_error *err)
{
    char *had = keys_text(recorded), *asked = keys_text(declared);
    int rc = had && asked ? convo__error(err, CONVO_EINVAL, NULL,
                                         "sqlite: the store indexes the extra keys [%s]; this open"
                                         " declares [%s]",
                                         had, asked)
                          : no_memory(err);
    free(had);
    free(asked);
    return rc;
}

static int declare_tx(sq_conn *c, void *arg, convo_error *err)
{
    char *const *declared = arg;
    char **recorded;
    int rc = sq_index_keys(c, &recorded, err);
    if (rc)
        return rc;
    size_t i = 0;
    while (recorded[i] && declared[i] && strcmp(recorded[i], declared[i]) == 0)
        i++;
    if (recorded[0] && (recorded[i] || declared[i]))
        rc = keys_differ(recorded, declared, err);
    else if (!recorded[0]) {
        for (i = 0; rc == 0 && declared[i]; i++) {
            sqlite3_stmt *st;
            if ((rc = sq_stmt_get(c, ST_INDEX_KEY_ADD, &st, err)) == 0) {
                sqlite3_bind_text(st, 1, declared[i], -1, SQLITE_STATIC);
                rc = sq_stmt_run(c, st, "recording the indexed keys", err);
            }
        }
        rc = rc ? rc : backfill(c, declared, err);
    }
    sq_index_keys_free(recorded);
    return rc;
}

/* The keys an opener declares (sorted, no duplicates): recorded with rows for
 * the threads already stored when the store has none yet, else they must be
 * the recorded ones. */
int sq_index_declare(convo_backend *b, char *const *keys, convo_error *err)
{
    return sq_run_tx(b, 1, declare_tx, (void *)keys, err);
}
