/* internal.h — what lib/ shares between its files: the layouts behind the
 * opaque handles, URL parsing, validation and the driver registry. */
#ifndef CONVO_INTERNAL_H
#define CONVO_INTERNAL_H

#include "config.h"
#include <convo/driver.h>

typedef struct convo_history_msg {
    char *bytes; /* NUL-terminated copy */
    size_t len;
    char *role;
    int64_t seq;
    int64_t created_at;
} convo_history_msg;

struct convo_history {
    convo_history_msg *msgs;
    size_t count, cap;
    int64_t length;
    int64_t generation;
    char *extra;
};

/* A row of the thread index (convo_thread_list_ex); rows[i] goes with ids[i]. */
typedef struct convo_thread_row {
    int64_t created_at, updated_at, length;
    char *extra;  /* NULL unless asked for */
    char *last;   /* the last message, NUL-terminated copy, or NULL */
    size_t last_len;
    char *cursor; /* made by the core */
} convo_thread_row;

struct convo_thread_page {
    char **ids;
    size_t count, cap;
    char *next;
    convo_thread_row *rows; /* NULL for convo_thread_list's pages */
    size_t rows_cap;
};

struct convo_store {
    const convo_driver *driver;
    convo_backend *backend;
    convo_limits limits;
    char **roles; /* NULL or NULL-terminated allow list */
    char **indexed_keys; /* limits.indexed_keys: NULL or NULL-terminated, sorted */
    char **secrets; /* convo__url_secrets() of the URL */
};

/* The objects behind convo_checkpoint and convo_checkpoint_set (checkpoint.c). */
/* A list of items resolved from a log reference (lib/items.c). */
typedef struct cp_items {
    convo_items pub; /* points into the fields below */
    char **texts;
    size_t *lengths;
    int64_t *seqs;
    char *key, *rest_type;
    void *rest;
} cp_items;

typedef struct cp_channel {
    char *channel, *version, *type;
    void *bytes;
    size_t len;
    cp_items *items; /* NULL unless the value is a resolved "convo/items" */
} cp_channel;

typedef struct cp_write {
    char *task_id, *task_path, *channel, *type;
    int64_t idx;
    void *bytes;
    size_t len;
    cp_items *items;
} cp_write;

struct convo_checkpoint {
    char *thread_id, *ns, *id, *parent_id, *metadata, *body_type;
    void *body;
    size_t body_len;
    int64_t log_length, created_at;
    int64_t generation; /* read with the log by convo__items_resolve; -1 = none */
    int64_t origin;     /* created_at of the log's message 0, read with it; -1 = none */
    cp_channel *channels;
    size_t nchannels, ccap;
    cp_write *writes;
    size_t nwrites, wcap;
};

struct convo_checkpoint_set {
    convo_checkpoint **items;
    size_t count, cap;
};

/* items.c: log references. The blob type of a stored reference. */
#define CONVO_ITEMS_TYPE "convo/items"
/* Resolves every "convo/items" value of cp with one load of the log; with
 * without_channel_items its channels' lists get their key and rest only (the
 * log is read for its writes alone). */
/* What a caller holds of a thread's log (convo_checkpoint_get_opts): length 0 = nothing. */
typedef struct convo__known {
    int64_t generation, length, origin;
} convo__known;
int convo__items_resolve(convo_store *s, convo_checkpoint *cp, const convo__known *known,
                         int without_channel_items, convo_error *err);
/* The same for n checkpoints listed together: when they are of one thread and
 * the caller knows its log, the log is read once for them all (its last
 * message they name and message 0, to check the generation and origin known,
 * and the texts past what is known), not twice per checkpoint; otherwise, or
 * when the check fails, each is resolved on its own. */
int convo__items_resolve_many(convo_store *s, convo_checkpoint *const *cps, size_t n,
                              const convo__known *known, int without_channel_items,
                              convo_error *err);
void convo__items_free(cp_items *it);
/* 0 when b (type CONVO_ITEMS_TYPE) is a well-formed reference, else CONVO_EINVAL;
 * *end is 1 + its highest seq (0 when none). */
int convo__items_check(const void *bytes, size_t len, int64_t *end, convo_error *err);
/* A pending write's list of items, encoded as a reference (its fresh items
 * inline, validated): *bytes malloc'd. */
/* Every seq the caller gave in lists[0..n) names a message the thread has:
 * below `covered` (what a parent is known to cover) without a read, else after
 * one read of the thread's length; CONVO_ECONFLICT naming the item when not
 * (the caller's view of the log is older than a rewrite or a delete). */
int convo__items_check_seqs(convo_store *s, const char *thread_id, const char *what,
                            const convo_items_in *const *lists, size_t n, int64_t covered,
                            convo_error *err);
int convo__items_encode_write(convo_store *s, const convo_items_in *it, void **bytes,
                              size_t *len, convo_error *err);
/* convo_checkpoint_put with channel_items: cp validated, metadata compact. */
int convo__items_put(convo_store *s, const convo_checkpoint_in *cp, convo_error *err);
#include "body.h"
/* The driver's get, without resolving references (export copies them as stored). */
int convo__checkpoint_get_raw(convo_store *s, const char *thread_id, const char *ns,
                              const char *checkpoint_id, convo_checkpoint **out,
                              convo_error *err);

/* url.c */
int convo__url_parse(convo_url **out, const char *text, convo_error *err);
void convo__url_free(convo_url *url);
/* The texts no message may show for URL text: its password and the values of
 * its *password parameters, each as written and decoded. NULL-terminated
 * (maybe empty); NULL when out of memory. */
char **convo__url_secrets(const char *text);
void convo__secrets_free(char **secrets);
/* Masks with "***", in msg (a string in a buffer of size bytes), the password
 * field of any URL (scheme://user:PASSWORD@...), the value of any password=
 * parameter, and each secret where it stands as a whole word; nothing else
 * (a short password inside another word stays, as masking it would show it). */
void convo__scrub(char *msg, size_t size, char *const *secrets);

/* store.c: rc, after masking the store's secrets in err (every driver call
 * returns through it, so no driver can show a password). */
int convo__scrubbed(const convo_store *s, int rc, convo_error *err);
/* error.c: "thread ID: " before an error's message unless it names the thread */
void convo__error_name_thread(convo_error *err, const char *thread_id);

/* store.c */
int convo__messages_in(const convo_store *s, const char *const *messages, const size_t *lengths,
                       size_t n, convo_message_in **out, convo_error *err);
void convo__messages_free(convo_message_in *in, size_t n);
/* A replayed idempotency key must name the same batch: messages [first_seq,
 * first_seq + count) must be in
 * the thread, byte for byte as in[]: 0, else CONVO_ECONFLICT. */
int convo__check_replay(convo_store *s, const char *thread_id, const convo_message_in *in,
                        size_t n, const char *key, int64_t first_seq, size_t count,
                        convo_error *err);
/* NULL, or 1..256 bytes of UTF-8; else CONVO_EINVAL. */
int convo__check_idempotency_key(const char *key, convo_error *err);

/* threads.c: the declared index keys, checked, sorted, without duplicates
 * (NULL-terminated; *out NULL when keys is NULL). */
int convo__index_keys_copy(const char *const *keys, char ***out, convo_error *err);
void convo__index_keys_free(char **keys);

/* thread_copy.c: thread_fork with the checkpoints (arguments checked). */
int convo__thread_copy(convo_store *s, const char *src, const char *dst, int64_t upto,
                       int64_t expected_generation, convo_error *err);

/* registry.c */
const convo_driver *convo__driver_find(const char *scheme);

/* validate.c */
int convo__check_thread_id(const char *id, convo_error *err);
int convo__check_key(const char *what, const char *s, int may_be_empty, convo_error *err);
/* Validates one message; fills *role (malloc'd) on success. */
int convo__check_message(const char *bytes, size_t len, const convo_limits *limits,
                         char *const *roles, char **role, convo_error *err);
/* The same; restoring (import) also keeps integers outside 64 bits, which a store
 * may hold from before they were refused. */
int convo__check_message_ex(const char *bytes, size_t len, const convo_limits *limits,
                            char *const *roles, int restoring, char **role, convo_error *err);
/* Parses and checks an extra patch; *compact gets the compact text, *obj the json_t. */
int convo__check_extra_patch(const char *json, const convo_limits *limits, char **compact,
                             void **obj, convo_error *err);
int convo__check_utf8(const char *s, size_t len);
/* 1 when sure that jansson accepts the message and that its "role" is the
 * plain string [*role, *role + *role_len) of 1..CONVO_MAX_ROLE_BYTES bytes;
 * 0 when not sure (convo__check_message then asks jansson). */
int convo__scan_message(const char *bytes, size_t len, const char **role, size_t *role_len);

#endif
