/* index.c — the upkeep of the SQLite driver's thread index: the extra keys a
 * store indexes (declared once, recorded in convo_indexed_keys, checked at
 * every open that declares some) and the rows of convo_thread_index that
 * save_extra, fork and delete keep in step with each thread's extra, in their
 * own transaction. The listing that reads them is list.c; the layout is
 * migrate-4-5.sql (docs/sqlite.md, The thread index). */
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

/* The row of indexed key `key` of thread num for value v (NULL: the patch
 * does not set it), written or removed. */
static int index_set(sq_conn *c, int64_t num, const char *key, const json_t *v,
                     convo_error *err)
{
    char *value;
    int rc = sq_index_value(v, &value, err);
    sqlite3_stmt *st;
    if (rc == 0)
        rc = sq_stmt_get(c, value ? ST_INDEX_PUT : ST_INDEX_DROP, &st, err);
    if (rc == 0) {
        sqlite3_bind_int64(st, 1, num);
        sqlite3_bind_text(st, 2, key, -1, SQLITE_STATIC);
        if (value)
            sqlite3_bind_text(st, 3, value, -1, SQLITE_STATIC);
        rc = sq_stmt_run(c, st, "indexing the extra", err);
    }
    free(value);
    return rc;
}

/* After a save_extra of patch on thread num (its row already written): each
 * indexed key the patch sets gets its new row, or loses its row when the new
 * value is not one the index keeps. Keys the patch does not name keep theirs. */
int sq_index_extra(sq_conn *c, int64_t num, const json_t *patch, convo_error *err)
{
    char **keys;
    int rc = sq_index_keys(c, &keys, err);
    if (rc)
        return rc;
    for (size_t i = 0; rc == 0 && keys[i]; i++) {
        json_t *v = json_object_get(patch, keys[i]);
        if (v)
            rc = index_set(c, num, keys[i], v, err);
    }
    sq_index_keys_free(keys);
    return rc;
}

/* A fork: thread dst, created with src's extra, gets src's rows. */
int sq_index_copy(sq_conn *c, int64_t src, int64_t dst, convo_error *err)
{
    return sq_run_with_ints(c, ST_INDEX_COPY, 2, src, dst, 0, "indexing the fork's extra", err);
}

/* ---- declaring the keys (at open) ---- */

/* Rows for the threads stored before the keys were declared. */
static int backfill(sq_conn *c, char *const *keys, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sq_stmt_get(c, ST_INDEX_BACKFILL, &st, err);
    while (rc == 0 && (rc = sq_stmt_step(c, st, "indexing stored threads", err)) == 1) {
        const char *extra = (const char *)sqlite3_column_text(st, 4);
        json_t *obj = extra ? json_loadb(extra, (size_t)sqlite3_column_bytes(st, 4), 0, NULL)
                            : NULL;
        int64_t num = sqlite3_column_int64(st, 0);
        rc = 0;
        for (size_t i = 0; rc == 0 && json_is_object(obj) && keys[i]; i++) {
            json_t *v = json_object_get(obj, keys[i]);
            if (v)
                rc = index_set(c, num, keys[i], v, err);
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
