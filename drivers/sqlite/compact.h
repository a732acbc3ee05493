/* compact.h — layout 7's compact forms of what a checkpoint repeats (docs/sqlite.md,
 * "Layout 7: checkpoints stored densely"): ids, channel versions and the channel
 * list of a checkpoint row. Depends on sqlite3.h alone, so that tests/sqlite-sql.c
 * can register the same SQL functions on a scratch database. */
#ifndef CONVO_SQLITE_COMPACT_H
#define CONVO_SQLITE_COMPACT_H

#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

/* A canonical UUID text is 36 lowercase hex digits and hyphens (8-4-4-4-12). */
#define SQ_UUID_TEXT 36
#define SQ_UUID_BYTES 16

/* 1 with its 16 bytes in out when s is a canonical UUID, else 0. */
int sq_uuid_pack(const char *s, size_t len, unsigned char out[SQ_UUID_BYTES]);
/* The canonical text of 16 bytes, NUL-terminated. */
void sq_uuid_unpack(const unsigned char in[SQ_UUID_BYTES], char out[SQ_UUID_TEXT + 1]);

/* An id (checkpoint or task id) as stored: a canonical UUID as its 16 bytes (a
 * BLOB), any other id as its text; NULL binds NULL. */
void sq_bind_id(sqlite3_stmt *st, int i, const char *id);
/* Column i read back as the id text: in buf when stored as 16 bytes, else the
 * column's own text (valid until the statement moves); NULL for NULL. */
const char *sq_column_id(sqlite3_stmt *st, int i, char buf[SQ_UUID_TEXT + 1]);

/* A varint of v at p (at most 10 bytes): its length. */
size_t sq_varint_put(unsigned char *p, uint64_t v);
/* Bytes read from p[0..n) (0: malformed) with the value in *v. */
size_t sq_varint_get(const unsigned char *p, size_t n, uint64_t *v);

/* The stored form of a channel version (bytes; at most len + 2 of them, so a
 * buffer of len + 16 always holds it); decoding gives the text back exactly. */
size_t sq_version_pack(const char *v, size_t len, unsigned char *out);
/* The text of a stored version into out (cap bytes, NUL-terminated): its
 * length, or -1 when the bytes are not a stored version or out is too small. */
long sq_version_unpack(const unsigned char *p, size_t n, char *out, size_t cap);
/* The longest text a stored version of n bytes can decode to. */
#define SQ_VERSION_TEXT_MAX(n) ((n) + 300)

/* A checkpoint's channel list (channel, version) as one value, a channel
 * given as the number of its name (convo_names), in the order of those:
 * *out malloc'd, *outlen its bytes. 0, or -1 when out of memory, -2 when a
 * channel is named twice (or a number is negative). */
int sq_channels_pack(const int64_t *channels, const char *const *versions, size_t n,
                     unsigned char **out, size_t *outlen);

/* Layout 9: one entry of a channel list, its version in the stored form;
 * len 0: (in a delta) the channel is gone. Layout 11: an entry may hold the
 * value of its version (type > 0, the number of its type in convo_names). */
typedef struct sq_entry {
    int64_t channel;
    const unsigned char *version;
    size_t len;
    int64_t type;               /* 0: no value in the entry */
    const unsigned char *value;
    size_t value_len;
} sq_entry;

/* The entries of a stored list, full or delta (its first byte 0x00), in
 * channel order, versions pointing into p (a 0x04 resolved): *out malloc'd.
 * 0, -1 out of memory, -2 malformed. */
int sq_list_entries(const unsigned char *p, size_t n, sq_entry **out, size_t *count);
/* Full list base with delta applied; entries point where theirs did. 0, -1
 * out of memory, -2 the delta removes a channel base does not have. */
int sq_list_apply(const sq_entry *base, size_t nbase, const sq_entry *delta, size_t ndelta,
                  sq_entry **out, size_t *n);
/* The delta from full list base to full list full: changed or new channels,
 * those with a value where base has none (layout 11) and (len 0) gone ones. */
int sq_list_diff(const sq_entry *base, size_t nbase, const sq_entry *full, size_t nfull,
                 sq_entry **out, size_t *n);
/* Layout 11: each entry of e at the version base's entry for its channel
 * holds takes that entry's value when it has one (both in channel order): a
 * value stored once stays. */
void sq_list_fill(sq_entry *e, size_t n, const sq_entry *base, size_t nbase);
/* The entry of e[0..n) for channel at version v[0..len), or NULL. */
const sq_entry *sq_list_find(const sq_entry *e, size_t n, int64_t channel,
                             const unsigned char *v, size_t len);
/* Entries packed as a full list, or with delta as a delta (0x00 first, len 0
 * entries as 0x05); equal versions after the first as 0x04. 0 or -1. */
int sq_list_pack(const sq_entry *e, size_t n, int delta, unsigned char **out, size_t *outlen);

/* Registers on db the SQL functions the layout's statements and migrations use:
 * convo_id(text), convo_version(text), the aggregate convo_channels(channel
 * number, version) and the table-valued convo_channel_list(channels) with
 * columns channel (number), version (stored form), version_text, type and value
 * (layout 11: the value the entry holds; NULL type: none). SQLITE_OK or
 * SQLite's error. */
int sq_compact_register(sqlite3 *db);

#endif
