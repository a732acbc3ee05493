/* list.c — the SQLite driver's thread listing (convo_thread_list_ex): one
 * read transaction walks one index in the order asked, from the cursor on,
 * and stops at limit + 1 matching rows. A where naming an indexed extra key
 * with a value the index keeps walks that value's range of convo_key_recent
 * (and adds the open thread, which has no row there: list-key-open.sql) or
 * convo_key_threads (statements/list-key-*.sql); any other listing walks
 * convo_activity, or convo_threads by created_at or id (statements/list-*.sql).
 * Each row is checked against the where on its extra, unless the where is
 * that one key and value, whose range holds the matches exactly; a listing of
 * ids and times in activity order reads the order's B-tree alone (-bare.sql).
 * docs/sqlite.md, The thread index, says which index serves which query. */
#include "config.h"
#include "sqlite_int.h"
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

/* [filtered by an indexed key][order][reverse] */
static const enum stmt_id list_stmt[2][3][2] = {
    {{ST_LIST_RECENT, ST_LIST_RECENT_REVERSE},
     {ST_LIST_CREATED, ST_LIST_CREATED_REVERSE},
     {ST_LIST_ID, ST_LIST_ID_REVERSE}},
    {{ST_LIST_KEY_RECENT, ST_LIST_KEY_RECENT_REVERSE},
     {ST_LIST_KEY_CREATED, ST_LIST_KEY_CREATED_REVERSE},
     {ST_LIST_KEY_ID, ST_LIST_KEY_ID_REVERSE}},
};

/* [filtered by an indexed key][reverse]: the activity order's ids and times
 * alone, from its own B-tree (list-[key-]recent[-reverse]-bare.sql) */
static const enum stmt_id bare_stmt[2][2] = {
    {ST_LIST_RECENT_BARE, ST_LIST_RECENT_REVERSE_BARE},
    {ST_LIST_KEY_RECENT_BARE, ST_LIST_KEY_RECENT_REVERSE_BARE},
};

/* Sorts after every valid UTF-8 id (no lead byte is over 0xF4). */
static const char past_every_id[] = "\xF5";

typedef struct list_args {
    const convo_thread_list_opts *o;
    json_t *where; /* NULL when the rows walked are exactly the matches */
    const convo_thread_cursor *after;
    convo_thread_page *p;
    size_t rows;
} list_args;

/* The indexed key of where to walk by, and its value as the index keeps it:
 * the first declared key (in byte order) that where names with such a value.
 * *key stays NULL when there is none: the listing walks every thread. */
static int pick_key(sq_conn *c, json_t *where, char **key, char **value, convo_error *err)
{
    *key = *value = NULL;
    if (!where)
        return 0;
    char **keys;
    int rc = sq_index_keys(c, &keys, err);
    if (rc)
        return rc;
    for (size_t i = 0; rc == 0 && keys[i] && !*value; i++)
        if ((rc = sq_index_value(json_object_get(where, keys[i]), value, err)) == 0 && *value &&
            !(*key = strdup(keys[i]))) {
            free(*value);
            *value = NULL;
            rc = no_memory(err);
        }
    sq_index_keys_free(keys);
    return rc;
}

/* The position to continue after: the cursor's, or one before every thread. */
static void bind_position(sqlite3_stmt *st, const list_args *a)
{
    int descending = (a->o->order != CONVO_ORDER_ID) != (a->o->reverse != 0);
    if (a->after) {
        sqlite3_bind_int64(st, 3, a->after->time);
        sqlite3_bind_text(st, 4, a->after->id, -1, SQLITE_STATIC);
    } else if (a->o->order == CONVO_ORDER_ID) {
        sqlite3_bind_text(st, 4, descending ? past_every_id : "", -1, SQLITE_STATIC);
    } else { /* (MAX, past every id) is after every entry, the open ones too
              * (ACTIVITY_OPEN); every id is non-empty: (MIN, "") before them all */
        sqlite3_bind_int64(st, 3, descending ? INT64_MAX : INT64_MIN);
        sqlite3_bind_text(st, 4, descending ? past_every_id : "", -1, SQLITE_STATIC);
    }
    sqlite3_bind_int64(st, 5, convo__now_micros());
    if (sqlite3_bind_parameter_count(st) >= 6) /* the listings that read the last message */
        sqlite3_bind_int(st, 6, a->o->with_last_message != 0);
}

/* The length of thread num, its last message's created_at and, when asked,
 * the message itself (*last NULL when it has none), through one seek to the
 * end of its key range; *last stays valid until *tail is reset. */
static int last_message(sq_conn *c, int64_t num, int with_body, int64_t *length,
                        int64_t *last_at, const void **last, size_t *last_len,
                        sqlite3_stmt **tail, convo_error *err)
{
    int rc = sq_stmt_get(c, with_body ? ST_MSG_LAST_BODY : ST_MSG_LAST, tail, err);
    if (rc)
        return rc;
    sqlite3_bind_int64(*tail, 1, key_of(num, 0));
    sqlite3_bind_int64(*tail, 2, key_of(num, MAX_LENGTH));
    *length = *last_at = 0;
    *last = NULL;
    *last_len = 0;
    if ((rc = sq_stmt_step(c, *tail, "reading a thread's last message", err)) != 1)
        return rc;
    *length = sqlite3_column_int64(*tail, 0) - key_of(num, 0) + 1;
    *last_at = sqlite3_column_int64(*tail, 1);
    if (with_body) {
        *last_len = (size_t)sqlite3_column_bytes(*tail, 2);
        *last = *last_len ? sqlite3_column_blob(*tail, 2) : "";
    }
    return 0;
}

/* The last message of the current row of st, a listing in activity order
 * that reads it with the row (columns 5, 6, 7: its key, created_at and body;
 * NULLs when the thread has none). */
static void joined_last_message(sqlite3_stmt *st, int with_body, int64_t *length,
                                int64_t *last_at, const void **last, size_t *last_len)
{
    *length = *last_at = 0;
    *last = NULL;
    *last_len = 0;
    if (sqlite3_column_type(st, 5) == SQLITE_NULL)
        return;
    *length = sqlite3_column_int64(st, 5) - key_of(sqlite3_column_int64(st, 0), 0) + 1;
    *last_at = sqlite3_column_int64(st, 6);
    if (with_body) {
        *last_len = (size_t)sqlite3_column_bytes(st, 7);
        *last = *last_len ? sqlite3_column_blob(st, 7) : "";
    }
}

/* Adds the thread of the current row of st to the page, with its activity
 * time: the later of its row's updated_at and its last message's created_at. */
static int add_row(sq_conn *c, sqlite3_stmt *st, list_args *a, convo_error *err)
{
    const char *id = (const char *)sqlite3_column_text(st, 1);
    size_t id_len = (size_t)sqlite3_column_bytes(st, 1);
    const char *extra = (const char *)sqlite3_column_text(st, 4);
    size_t extra_len = extra ? (size_t)sqlite3_column_bytes(st, 4) : 2;
    if (!extra)
        extra = "{}";
    if (a->where && !convo__json_contains(extra, extra_len, a->where))
        return 0;
    int64_t length, last_at, updated_at = sqlite3_column_int64(st, 3);
    const void *last;
    size_t last_len;
    sqlite3_stmt *tail = NULL;
    int rc = 0;
    if (sqlite3_column_count(st) > 5)
        joined_last_message(st, a->o->with_last_message, &length, &last_at, &last, &last_len);
    else
        rc = last_message(c, sqlite3_column_int64(st, 0), a->o->with_last_message, &length,
                          &last_at, &last, &last_len, &tail, err);
    if (rc)
        return rc;
    if (last_at > updated_at)
        updated_at = last_at;
    if (!id || convo__thread_page_add_row(a->p, id, id_len, sqlite3_column_int64(st, 2),
                                          updated_at, length, a->o->with_extra ? extra : NULL,
                                          extra_len, last, last_len) != 0)
        rc = no_memory(err);
    if (tail)
        sq_stmt_done(tail);
    a->rows += rc == 0;
    return rc;
}

/* Adds the row of a bare listing: (num, id, created_at, updated_at, length);
 * the open entry's time and length are read from its thread. */
static int add_bare_row(sq_conn *c, sqlite3_stmt *st, list_args *a, convo_error *err)
{
    const char *id = (const char *)sqlite3_column_text(st, 1);
    int64_t updated_at = sqlite3_column_int64(st, 3), length = sqlite3_column_int64(st, 4);
    int rc = updated_at == ACTIVITY_OPEN
                 ? sq_thread_activity(c, sqlite3_column_int64(st, 0), &updated_at, &length, err)
                 : 0;
    if (rc == 0 && (!id || convo__thread_page_add_row(a->p, id, (size_t)sqlite3_column_bytes(st, 1),
                                                      sqlite3_column_int64(st, 2), updated_at,
                                                      length, NULL, 0, NULL, 0) != 0))
        rc = no_memory(err);
    a->rows += rc == 0;
    return rc;
}

/* 1 when the listing can be read from the activity order's B-tree alone: in
 * activity order, nothing asked of the thread row or the messages, every row
 * walked a match, and no thread with a deadline to check. */
static int bare_listing(sq_conn *c, const list_args *a, convo_error *err)
{
    if (a->o->order != CONVO_ORDER_RECENT || a->o->with_extra || a->o->with_last_message ||
        a->where)
        return 0;
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_THREAD_ANY_DEADLINE, &st, err);
    if (rc == 0 && (rc = sq_stmt_step(c, st, "looking for deadlines", err)) == 1) {
        sq_stmt_done(st);
        return 0;
    }
    return rc < 0 ? rc : 1;
}

void sq_open_memo_clear(sq_conn *c)
{
    free(c->open_memo.values);
    memset(&c->open_memo, 0, sizeof c->open_memo);
}

/* The open thread's key values into the connection's note, read in this
 * transaction (activity-open-values.sql), for data version v (valid: 1 when
 * it is known). */
static int open_memo_read(sq_conn *c, unsigned v, int valid, convo_error *err)
{
    sqlite3_stmt *st;
    sq_open_memo_clear(c);
    int rc = sq_stmt_get(c, ST_ACTIVITY_OPEN_VALUES, &st, err);
    if (rc == 0 && (rc = sq_stmt_step(c, st, "reading the open thread", err)) == 1) {
        size_t len = (size_t)sqlite3_column_bytes(st, 0);
        const unsigned char *text = sqlite3_column_text(st, 0);
        if (text && (c->open_memo.values = malloc(len + 1)) != NULL) {
            memcpy(c->open_memo.values, text, len + 1);
            c->open_memo.values_len = len;
        }
        rc = text && !c->open_memo.values ? no_memory(err) : 0;
        sq_stmt_done(st);
    }
    c->open_memo.valid = rc == 0 && valid;
    c->open_memo.version = v;
    return rc;
}

/* *holds: 1 when the thread written last holds value at key. Its key values
 * come from the connection's note when the file has not changed since it was
 * taken: SQLite's data version (SQLITE_FCNTL_DATA_VERSION, as this read
 * transaction sees the file) changes with every commit, this connection's or
 * another's, so a page read again costs no statement here. */
static int open_holds(sq_conn *c, const char *key, const char *value, int *holds,
                      convo_error *err)
{
    unsigned v = 0;
    int known = 0, rc = 0;
#ifdef SQLITE_FCNTL_DATA_VERSION
    known = sqlite3_file_control(c->db, "main", SQLITE_FCNTL_DATA_VERSION, &v) == SQLITE_OK;
#endif
    if (!known || !c->open_memo.valid || c->open_memo.version != v)
        rc = open_memo_read(c, v, known, err);
    return rc ? rc
              : sq_key_values_hold(c->open_memo.values, c->open_memo.values_len, key, value,
                                   holds, err);
}

/* A listing by key's value in activity order: the open thread (the thread
 * written last, which has no row in convo_key_recent) when it holds the value
 * and the position lets it: run before the range newest first, after it
 * oldest first (open_holds says whether it holds the value; list-key-open.sql
 * reads its row). */
static int add_open_row(sq_conn *c, list_args *a, const char *key, const char *value,
                        convo_error *err)
{
    int descending = !a->o->reverse;
    if (a->rows > a->o->limit || (descending && a->after && a->after->time < ACTIVITY_OPEN))
        return 0; /* the page is full, or the cursor is past the open entry */
    int holds;
    int rc = open_holds(c, key, value, &holds, err);
    if (rc || !holds)
        return rc; /* the common case: the thread written last is not one to list */
    sqlite3_stmt *st;
    if ((rc = sq_stmt_get(c, ST_LIST_KEY_OPEN, &st, err)) != 0)
        return rc;
    sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
    sqlite3_bind_text(st, 2, value, -1, SQLITE_STATIC);
    bind_position(st, a);
    sqlite3_bind_int(st, 7, descending);
    if ((rc = sq_stmt_step(c, st, "listing threads", err)) == 1) {
        rc = add_row(c, st, a, err);
        sq_stmt_done(st);
    }
    return rc;
}

static int list_tx(sq_conn *c, void *arg, convo_error *err)
{
    list_args *a = arg;
    char *key, *value;
    int rc = pick_key(c, a->where, &key, &value, err);
    /* one scalar at one key: the index range holds exactly the threads whose
     * extra has it (sq_index_value), no need to parse each extra */
    if (rc == 0 && key && json_object_size(a->where) == 1)
        a->where = NULL;
    int bare = rc == 0 ? bare_listing(c, a, err) : 0;
    rc = bare < 0 ? bare : rc;
    sqlite3_stmt *st;
    if (rc == 0)
        rc = sq_stmt_get(c,
                         bare ? bare_stmt[key != NULL][a->o->reverse != 0]
                              : list_stmt[key != NULL][a->o->order][a->o->reverse != 0],
                         &st, err);
    if (rc == 0) {
        if (key) {
            sqlite3_bind_text(st, 1, key, -1, SQLITE_STATIC);
            sqlite3_bind_text(st, 2, value, -1, SQLITE_STATIC);
        }
        bind_position(st, a);
        int open = key && a->o->order == CONVO_ORDER_RECENT;
        if (open && !a->o->reverse)
            rc = add_open_row(c, a, key, value, err);
        while (rc == 0 && a->rows <= a->o->limit) {
            rc = sq_stmt_step(c, st, "listing threads", err);
            if (rc != 1)
                break;
            rc = bare ? add_bare_row(c, st, a, err) : add_row(c, st, a, err);
        }
        sq_stmt_done(st);
        if (rc == 0 && open && a->o->reverse)
            rc = add_open_row(c, a, key, value, err);
    }
    free(key);
    free(value);
    return rc;
}

int sq_thread_list_ex(convo_backend *b, const convo_thread_list_opts *opts, void *where,
                      const convo_thread_cursor *after, convo_thread_page **out,
                      convo_error *err)
{
    list_args a = {opts, where, after, convo__thread_page_new(), 0};
    if (!a.p)
        return no_memory(err);
    int rc = sq_run_tx(b, 0, list_tx, &a, err);
    if (rc) {
        convo_thread_page_free(a.p);
        return rc;
    }
    *out = a.p;
    return 0;
}
