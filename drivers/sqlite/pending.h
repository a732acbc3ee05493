/* pending.h — layout 10's pending writes of a checkpoint as one value in its
 * row (docs/sqlite.md, "Layout 10: pending writes in the checkpoint row"): the
 * record's form, the merge of a put_writes call into it, and the SQL functions
 * over it. Depends on sqlite3.h alone, like compact.h. */
#ifndef CONVO_SQLITE_PENDING_H
#define CONVO_SQLITE_PENDING_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

/* One pending write; task is the task id's stored form (16 bytes when uuid,
 * else its text), names are numbers in convo_names; pointers into the record
 * or the caller's memory. */
typedef struct sq_write {
    const unsigned char *task;
    size_t task_len;
    int uuid;
    int64_t idx, path, channel, type;
    const unsigned char *value;
    size_t len;
} sq_write;

/* The writes of a record, in its order: *out malloc'd (NULL when n is 0).
 * 0, -1 out of memory, -2 malformed. */
int sq_writes_decode(const unsigned char *p, size_t n, sq_write **out, size_t *count);
/* w[0..n) sorted by (task id text, idx) and packed: *out malloc'd, NULL when
 * n is 0. 0, -1 out of memory, -2 a (task, idx) twice. */
int sq_writes_encode(sq_write *w, size_t n, unsigned char **out, size_t *len);
/* The writes of one put_writes call merged into w[0..*n) (room for n + nadd):
 * an idx >= 0 already there stays, a negative one is replaced. */
void sq_writes_merge(sq_write *w, size_t *n, const sq_write *add, size_t nadd);

/* Registers the table-valued convo_pending_list(pending) (columns task_id,
 * idx, task_path, channel, type, value) and the aggregate
 * convo_pending_pack(task_id, idx, task_path, channel, type, value) the
 * 9 -> 10 migration uses. SQLITE_OK or SQLite's error. */
int sq_pending_register(sqlite3 *db);

#endif
