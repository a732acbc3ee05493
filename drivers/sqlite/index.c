/* index.c — the upkeep of the SQLite driver's thread index, in the
 * transaction of the write that calls for it: each thread's entry in the
 * activity order (convo_activity), the extra keys a store indexes (declared
 * once, recorded in convo_indexed_keys, checked at every open that declares
 * some), and each thread's values at them (convo_threads.key_values) and
 * rows for them (convo_key_threads, and convo_key_recent at its activity
 * time but for the open thread). The listing that reads them is list.c; the
 * layout is migrate-4-5.sql, migrate-14-15.sql and migrate-15-16.sql
 * (docs/sqlite.md, The thread index). */
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

/* ---- a thread's key values (convo_threads.key_values, layout 16) ----
 *
 * The indexed keys at which a thread holds a value the index keeps, each as
 * "LEN:KEY" then "LEN:VALUE" (lengths in bytes, in decimal; the value its
 * canonical text, sq_index_value), in any order, e.g. 7:user_id4:"u1"; NULL
 * when it holds none. They say which rows the thread has in
 * convo_key_threads and (but for the open thread) convo_key_recent, so a
 * move, a close or a removal finds them in the thread's row, which the write
 * reads or writes anyway, where layouts 5 to 15 kept a table of them. */

typedef struct key_pair {
    const char *key, *value;
    int key_len, value_len;
} key_pair;

/* A thread as its key rows name it; values malloc'd, NULL when none. */
typedef struct keyed_thread {
    int64_t num, created_at;
    char *id, *values;
    size_t values_len;
    int changed; /* values differ from the row's */
} keyed_thread;

static void keyed_free(keyed_thread *t)
{
    free(t->id);
    free(t->values);
}

/* One "LEN:TEXT" of [*p, end) into *s, *len; -1 when malformed. */
static int pair_field(const char **p, const char *end, const char **s, int *len)
{
    size_t n = 0;
    const char *q = *p;
    while (q < end && *q >= '0' && *q <= '9' && n <= (size_t)(end - q))
        n = n * 10 + (size_t)(*q++ - '0');
    if (q == *p || q == end || *q != ':' || n > (size_t)(end - q - 1) || n > INT32_MAX)
        return -1;
    *s = q + 1;
    *len = (int)n;
    *p = q + 1 + n;
    return 0;
}

/* The pair at *p (of a string ending at end) into *pair: 1, or 0 at the end,
 * or CONVO_ECORRUPT. */
static int pair_next(const char **p, const char *end, key_pair *pair, convo_error *err)
{
    if (!*p || *p == end)
        return 0;
    if (pair_field(p, end, &pair->key, &pair->key_len) == 0 &&
        pair_field(p, end, &pair->value, &pair->value_len) == 0)
        return 1;
    return convo__error(err, CONVO_ECORRUPT, NULL, "sqlite: a thread's key_values is malformed");
}

/* *holds: 1 when key values (values, len bytes; NULL: none) hold value at
 * key (list.c: whether the open thread is one to list). */
int sq_key_values_hold(const char *values, size_t len, const char *key, const char *value,
                       int *holds, convo_error *err)
{
    const char *p = values, *end = p ? p + len : NULL;
    size_t key_len = strlen(key), value_len = strlen(value);
    key_pair pair;
    int rc;
    *holds = 0;
    while ((rc = pair_next(&p, end, &pair, err)) == 1)
        if ((size_t)pair.key_len == key_len && memcmp(pair.key, key, key_len) == 0) {
            *holds = (size_t)pair.value_len == value_len &&
                     memcmp(pair.value, value, value_len) == 0;
            return 0;
        }
    return rc;
}

/* Thread num's id, created_at and key values, from its row. */
static int keyed_read(sq_conn *c, int64_t num, keyed_thread *t, convo_error *err)
{
    sqlite3_stmt *st;
    *t = (keyed_thread){.num = num};
    int rc = sq_stmt_get(c, ST_THREAD_KEY_VALUES, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(st, 1, num);
    if ((rc = sq_stmt_step(c, st, "reading a thread", err)) != 1)
        return rc < 0 ? rc : convo__error(err, CONVO_ECORRUPT, NULL,
                                          "sqlite: thread number %lld is gone", (long long)num);
    t->created_at = sqlite3_column_int64(st, 1);
    t->id = strdup((const char *)sqlite3_column_text(st, 0));
    if (t->id && sqlite3_column_type(st, 2) != SQLITE_NULL) {
        t->values_len = (size_t)sqlite3_column_bytes(st, 2);
        if ((t->values = malloc(t->values_len + 1)) != NULL)
            memcpy(t->values, sqlite3_column_text(st, 2), t->values_len + 1);
    }
    rc = !t->id || (sqlite3_column_type(st, 2) != SQLITE_NULL && !t->values) ? no_memory(err) : 0;
    sq_stmt_done(st);
    return rc;
}

/* *found: 1 with t's pair for key in *pair, else 0. */
static int pair_find(const keyed_thread *t, const char *key, key_pair *pair, int *found,
                     convo_error *err)
{
    const char *p = t->values, *end = p ? p + t->values_len : NULL;
    int rc;
    size_t key_len = strlen(key);
    while ((rc = pair_next(&p, end, pair, err)) == 1)
        if ((size_t)pair->key_len == key_len && memcmp(pair->key, key, key_len) == 0)
            break;
    *found = rc == 1;
    return rc < 0 ? rc : 0;
}

/* t's values with key's pair replaced by (key, value), or dropped when value
 * is NULL. */
static int values_set(keyed_thread *t, const char *key, const char *value, convo_error *err)
{
    size_t key_len = strlen(key), value_len = value ? strlen(value) : 0;
    char *out = malloc(t->values_len + key_len + value_len + 48), *w = out;
    const char *p = t->values, *end = p ? p + t->values_len : NULL;
    key_pair pair;
    int rc;
    if (!out)
        return no_memory(err);
    while ((rc = pair_next(&p, end, &pair, err)) == 1)
        if ((size_t)pair.key_len != key_len || memcmp(pair.key, key, key_len) != 0)
            w += sprintf(w, "%d:%.*s%d:%.*s", pair.key_len, pair.key_len, pair.key,
                         pair.value_len, pair.value_len, pair.value);
    if (rc == 0 && value)
        w += sprintf(w, "%zu:%s%zu:%s", key_len, key, value_len, value);
    if (rc) {
        free(out);
        return rc;
    }
    free(t->values);
    t->values_len = (size_t)(w - out);
    t->values = t->values_len ? out : NULL;
    if (!t->values)
        free(out);
    t->changed = 1;
    return 0;
}

/* ---- rows of a pair ---- */

/* Thread t's row for pair p in the key's activity order goes from `from` to
 * `to`: it enters (an insert) when from is 0 or the open time (the open
 * thread has none), leaves (a delete) when `to` is, moves (an update)
 * otherwise; nothing when both are. */
static int pair_recent(sq_conn *c, const keyed_thread *t, const key_pair *p, int64_t from,
                       int64_t to, int64_t length, convo_error *err)
{
    int before = from && from != ACTIVITY_OPEN, after = to && to != ACTIVITY_OPEN;
    if (!before && !after)
        return 0;
    enum stmt_id which = !before ? ST_RECENT_ADD : !after ? ST_RECENT_DELETE : ST_RECENT_MOVE;
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, which, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_text(st, 1, p->key, p->key_len, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, p->value, p->value_len, SQLITE_STATIC);
    sqlite3_bind_text(st, 4, t->id, -1, SQLITE_STATIC);
    if (which == ST_RECENT_ADD) { /* ?3 at, ?5 thread, ?6 created_at, ?7 length */
        sqlite3_bind_int64(st, 3, to);
        sqlite3_bind_int64(st, 5, t->num);
        sqlite3_bind_int64(st, 6, t->created_at);
        sqlite3_bind_int64(st, 7, length);
    } else if (which == ST_RECENT_DELETE) { /* ?3 from, or ?5 the open time */
        sqlite3_bind_int64(st, 3, from);
        sqlite3_bind_int64(st, 5, ACTIVITY_OPEN);
    } else { /* ?3 from, ?5 to, ?6 length */
        sqlite3_bind_int64(st, 3, from);
        sqlite3_bind_int64(st, 5, to);
        sqlite3_bind_int64(st, 6, length);
    }
    return sq_stmt_run(c, st, "updating the key index", err);
}

/* Thread t's row for pair p in the key's orders by creation and by id (the
 * table convo_key_threads and its index): added, or deleted. */
static int pair_threads(sq_conn *c, const keyed_thread *t, const key_pair *p, int add,
                        convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, add ? ST_KEY_THREADS_ADD : ST_KEY_THREADS_DELETE, &st, err);
    if (rc)
        return rc;
    sqlite3_bind_text(st, 1, p->key, p->key_len, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, p->value, p->value_len, SQLITE_STATIC);
    sqlite3_bind_int64(st, 3, t->created_at);
    sqlite3_bind_text(st, 4, t->id, -1, SQLITE_STATIC);
    if (add)
        sqlite3_bind_int64(st, 5, t->num);
    return sq_stmt_run(c, st, "indexing the extra", err);
}

/* Thread num's rows in its keys' activity orders go from `from` to `to`
 * (pair_recent), with length messages. */
static int recent_move(sq_conn *c, int64_t num, int64_t from, int64_t to, int64_t length,
                       convo_error *err)
{
    if ((!from || from == ACTIVITY_OPEN) && (!to || to == ACTIVITY_OPEN))
        return 0; /* neither end has rows */
    keyed_thread t;
    int rc = keyed_read(c, num, &t, err);
    const char *p = t.values, *end = p ? p + t.values_len : NULL;
    key_pair pair;
    while (rc == 0 && (rc = pair_next(&p, end, &pair, err)) == 1)
        rc = pair_recent(c, &t, &pair, from, to, length, err);
    keyed_free(&t);
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
        rc = recent_move(c, e.num, ACTIVITY_OPEN, at, length, err);
    free(e.id);
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
    return rc ? rc : recent_move(c, num, 0, at, length, err);
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
    return recent_move(c, t->num, activity_of(t), *entry_at, length, err);
}

/* Before thread num is removed: its entry in the activity order and its key
 * rows go. Reads its row and its last message, so it runs first. */
int sq_index_forget(sq_conn *c, int64_t num, convo_error *err)
{
    keyed_thread k;
    int rc = keyed_read(c, num, &k, err);
    thread_row t = {.num = num};
    sqlite3_stmt *st;
    if (rc == 0 && (rc = sq_stmt_get(c, ST_THREAD_BY_NUM, &st, err)) == 0) {
        sqlite3_bind_int64(st, 1, num);
        if ((rc = sq_stmt_step(c, st, "reading a thread", err)) == 1) {
            t.updated_at = sqlite3_column_int64(st, 1);
            sq_stmt_done(st);
            rc = 0;
        }
    }
    if (rc == 0)
        rc = sq_thread_last(c, num, &t.length, &t.last_at, err);
    if (rc == 0 && (rc = sq_stmt_get(c, ST_ACTIVITY_DELETE, &st, err)) == 0) {
        sqlite3_bind_text(st, 1, k.id, -1, SQLITE_STATIC);
        sqlite3_bind_int64(st, 2, activity_of(&t));
        sqlite3_bind_int64(st, 3, ACTIVITY_OPEN);
        rc = sq_stmt_run(c, st, "removing the thread from the activity order", err);
    }
    int walk = rc == 0 && sqlite3_changes(c->db) == 0; /* a layout-4 writer's */
    if (walk && (rc = sq_run_with_ints(c, ST_ACTIVITY_FORGET, 1, num, 0, 0,
                                       "removing the thread from the activity order", err)) == 0)
        rc = sq_run_with_ints(c, ST_RECENT_FORGET, 1, num, 0, 0, "removing key index rows", err);
    const char *p = k.values, *end = p ? p + k.values_len : NULL;
    key_pair pair;
    while (rc == 0 && (rc = pair_next(&p, end, &pair, err)) == 1)
        if ((rc = walk ? 0 : pair_recent(c, &k, &pair, activity_of(&t), 0, 0, err)) == 0)
            rc = pair_threads(c, &k, &pair, 0, err);
    keyed_free(&k);
    return rc;
}

/* ---- key rows ---- */

/* Thread t, active as of at (ACTIVITY_OPEN: the open entry) with length
 * messages, holds v at indexed key `key`: its old rows for the key go, new
 * ones come when the value is one the index keeps, and its key values say so
 * (t->values; the caller writes them). */
static int index_set(sq_conn *c, keyed_thread *t, int64_t at, int64_t length, const char *key,
                     const json_t *v, convo_error *err)
{
    char *value;
    key_pair old;
    int found = 0;
    int rc = sq_index_value(v, &value, err);
    if (rc == 0)
        rc = pair_find(t, key, &old, &found, err);
    if (rc || (!found && !value) ||
        (found && value && (size_t)old.value_len == strlen(value) &&
         memcmp(old.value, value, strlen(value)) == 0)) {
        free(value); /* a patch that repeats the value: the rows are where they belong */
        return rc;
    }
    if (found && (rc = pair_recent(c, t, &old, at, 0, 0, err)) == 0)
        rc = pair_threads(c, t, &old, 0, err);
    key_pair now = {key, value, (int)strlen(key), value ? (int)strlen(value) : 0};
    if (rc == 0 && value && (rc = pair_threads(c, t, &now, 1, err)) == 0)
        rc = pair_recent(c, t, &now, 0, at, length, err);
    if (rc == 0)
        rc = values_set(t, key, value, err);
    free(value);
    return rc;
}

/* Thread t's key values into its row, when they changed. */
static int values_write(sq_conn *c, const keyed_thread *t, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = t->changed ? sq_stmt_get(c, ST_THREAD_SET_KEY_VALUES, &st, err) : 0;
    if (rc || !t->changed)
        return rc;
    sqlite3_bind_int64(st, 1, t->num);
    if (t->values)
        sqlite3_bind_text(st, 2, t->values, (int)t->values_len, SQLITE_STATIC);
    return sq_stmt_run(c, st, "indexing the extra", err);
}

/* After a save_extra of patch on thread num (its row already written, its
 * entry at `at`, length messages): each indexed key the patch sets gets its
 * new rows, or loses them when the new value is not one the index keeps. Keys
 * the patch does not name keep theirs. */
int sq_index_extra(sq_conn *c, int64_t num, int64_t at, int64_t length, const json_t *patch,
                   convo_error *err)
{
    char **keys;
    keyed_thread t = {0};
    int rc = sq_index_keys(c, &keys, err);
    if (rc)
        return rc;
    if (keys[0])
        rc = keyed_read(c, num, &t, err);
    for (size_t i = 0; rc == 0 && keys[i]; i++) {
        json_t *v = json_object_get(patch, keys[i]);
        if (v)
            rc = index_set(c, &t, at, length, keys[i], v, err);
    }
    rc = rc ? rc : values_write(c, &t, err);
    keyed_free(&t);
    sq_index_keys_free(keys);
    return rc;
}

/* A fork: thread dst, created with src's extra, its entry at `at` with
 * length messages, gets src's key values and rows. */
int sq_index_copy(sq_conn *c, int64_t src, int64_t dst, int64_t at, int64_t length,
                  convo_error *err)
{
    keyed_thread s, d;
    int rc = keyed_read(c, src, &s, err);
    if (rc) {
        keyed_free(&s);
        return rc;
    }
    rc = keyed_read(c, dst, &d, err);
    const char *p = s.values, *end = p ? p + s.values_len : NULL;
    key_pair pair;
    while (rc == 0 && (rc = pair_next(&p, end, &pair, err)) == 1)
        if ((rc = pair_threads(c, &d, &pair, 1, err)) == 0)
            rc = pair_recent(c, &d, &pair, 0, at, length, err);
    if (rc == 0 && s.values) {
        free(d.values);
        d.values = s.values;
        d.values_len = s.values_len;
        s.values = NULL;
        d.changed = 1;
        rc = values_write(c, &d, err);
    }
    keyed_free(&s);
    keyed_free(&d);
    return rc;
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
        keyed_thread k = {0};
        rc = sq_thread_last(c, t.num, &t.length, &t.last_at, err);
        if (rc == 0)
            rc = keyed_read(c, t.num, &k, err);
        for (size_t i = 0; rc == 0 && json_is_object(obj) && keys[i]; i++) {
            json_t *v = json_object_get(obj, keys[i]);
            if (v)
                rc = index_set(c, &k, t.num == open_num ? ACTIVITY_OPEN : activity_of(&t),
                               t.length, keys[i], v, err);
        }
        rc = rc ? rc : values_write(c, &k, err);
        keyed_free(&k);
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
