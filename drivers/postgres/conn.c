/* conn.c — the PostgreSQL driver's connections: the pool's connect and
 * disconnect, reconnecting after the server dropped an idle one, SQLSTATEs
 * turned into convo codes, and prepared statements run in one round trip,
 * retried when PostgreSQL asks for it. */
#include "config.h"
#include "pg_int.h"
#include "drivers/postgres/sql.h"
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_RETRIES 5
#define FRESH_MICROS 1000 /* see convo__pg_conn_get */

/* The prepared statements: a name on the connection, the number of
 * parameters, the text (drivers/postgres/NAME.sql, @S the schema). */
static const struct {
    const char *name;
    int nparams;
    const char *sql;
} statements[ST_COUNT] = {
    [ST_APPEND_ONE] = {"convo_append_one", 8, SQL_APPEND_ONE},
    [ST_APPEND_MANY] = {"convo_append_many", 8, SQL_APPEND_MANY},
    [ST_APPEND] = {"convo_append", 8, SQL_APPEND},
    [ST_LOAD] = {"convo_load", 5, SQL_LOAD},
    [ST_SAVE_EXTRA] = {"convo_save_extra", 5, SQL_SAVE_EXTRA},
    [ST_DELETE] = {"convo_delete", 1, SQL_THREAD_DELETE},
    [ST_LIST] = {"convo_list", 2, SQL_THREAD_LIST},
    [ST_FORK] = {"convo_fork", 6, SQL_THREAD_FORK},
    [ST_CP_PUT] = {"convo_cp_put", 14, SQL_CHECKPOINT_PUT},
    [ST_CP_WRITES] = {"convo_cp_writes", 10, SQL_CHECKPOINT_PUT_WRITES},
    [ST_CP_GET] = {"convo_cp_get", 3, SQL_CHECKPOINT_GET},
    [ST_CP_LATEST] = {"convo_cp_latest", 2, SQL_CHECKPOINT_LATEST},
    [ST_CP_LIST] = {"convo_cp_list", 7, SQL_CHECKPOINT_LIST},
    [ST_CP_PRUNE] = {"convo_cp_prune", 3, SQL_CHECKPOINT_PRUNE},
    [ST_IMPORT] = {"convo_import", 7, SQL_THREAD_IMPORT},
    [ST_SWEEP] = {"convo_sweep", 1, SQL_SWEEP},
    [ST_CP_PUT_LOG] = {"convo_cp_put_log", 18, SQL_CHECKPOINT_PUT_LOG},
    [ST_REPLACE_TAIL] = {"convo_replace_tail", 10, SQL_REPLACE_TAIL},
    [ST_REPLACE_TAIL_FAST] = {"convo_replace_tail_fast", 8, SQL_REPLACE_TAIL_FAST},
    [ST_CP_DELETE] = {"convo_cp_delete", 4, SQL_CHECKPOINT_DELETE},
    [ST_COPY] = {"convo_copy", 6, SQL_THREAD_COPY},
    [ST_CP_PUT_REFS] = {"convo_cp_put_refs", 28, SQL_CHECKPOINT_PUT_REFS},
    [ST_APPEND_PLAIN] = {"convo_append_plain", 5, SQL_APPEND_PLAIN},
    [ST_CP_LIST_CHANNEL] = {"convo_cp_list_channel", 7, SQL_CHECKPOINT_LIST_CHANNEL},
    [ST_CP_NAMES] = {"convo_cp_names", 4, SQL_CHECKPOINT_NAMES_GET},
    [ST_CP_BLOBS] = {"convo_cp_blobs", 8, SQL_CHECKPOINT_BLOBS_GET},
    [ST_CP_SEAL_ROWS] = {"convo_cp_seal_rows", 4, SQL_CHECKPOINT_SEAL_ROWS},
    [ST_CP_SEAL] = {"convo_cp_seal", 10, SQL_CHECKPOINT_SEAL},
    [ST_CP_UNSEAL_ROWS] = {"convo_cp_unseal_rows", 1, SQL_CHECKPOINT_UNSEAL_ROWS},
    [ST_CP_UNSEAL] = {"convo_cp_unseal", 17, SQL_CHECKPOINT_UNSEAL},
};

/* What replaces @X in a .sql file (NULL: X is no placeholder). */
static const char *placeholder(const convo_backend *b, char x, const char *table)
{
    return x == 'S' ? b->qschema : x == 'N' ? b->schema : x == 'T' ? table : NULL;
}

char *convo__pg_fill(const convo_backend *b, const char *template, const char *table)
{
    size_t n = 0;
    for (const char *p = template; *p; p++) {
        const char *with = p[0] == '@' ? placeholder(b, p[1], table) : NULL;
        n += with ? (p++, strlen(with)) : 1;
    }
    char *out = malloc(n + 1), *o = out;
    if (!out)
        return NULL;
    for (const char *p = template; *p; p++) {
        const char *with = p[0] == '@' ? placeholder(b, p[1], table) : NULL;
        if (with) {
            memcpy(o, with, strlen(with));
            o += strlen(with);
            p++;
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
    return out;
}

int convo__pg_statements_init(convo_backend *b)
{
    for (int i = 0; i < ST_COUNT; i++)
        if (!(b->sql[i] = convo__pg_fill(b, statements[i].sql, NULL)))
            return CONVO_ENOMEM;
    return 0;
}

/* SQLSTATE to convo code. CVxxx are raised by convo's own functions. */
static int code_for_state(const char *state, int broken)
{
    if (broken || !state)
        return CONVO_EIO;
    if (strcmp(state, "CV409") == 0)
        return CONVO_ECONFLICT;
    if (strcmp(state, "CV404") == 0)
        return CONVO_ENOTFOUND;
    if (strcmp(state, "CV413") == 0 || strcmp(state, "54000") == 0)
        return CONVO_ETOOLARGE;
    if (strcmp(state, "CV400") == 0)
        return CONVO_EINVAL;
    if (strcmp(state, "57014") == 0 || strcmp(state, "55P03") == 0)
        return CONVO_ETIMEOUT; /* statement or lock timeout */
    if (strcmp(state, "53200") == 0)
        return CONVO_ENOMEM;
    if (strncmp(state, "08", 2) == 0 || strncmp(state, "57P", 3) == 0 ||
        strncmp(state, "53", 2) == 0 || strncmp(state, "58", 2) == 0 ||
        strncmp(state, "40", 2) == 0)
        return CONVO_EIO; /* connection, shutdown, resources, retries used up */
    if (strncmp(state, "22", 2) == 0)
        return CONVO_EINVAL; /* data the server cannot store, e.g. in jsonb */
    return CONVO_ERROR;
}

int convo__pg_fail(const convo_backend *b, PGconn *pg, const PGresult *r, convo_error *err)
{
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    int broken = !pg || PQstatus(pg) != CONNECTION_OK;
    if (!msg || broken)
        msg = pg ? PQerrorMessage(pg) : "out of memory";
    int code = code_for_state(state, broken); /* the core masks passwords in msg */
    if (state && state[0] == 'C' && state[1] == 'V')
        return convo__error(err, code, state, "%s", msg);
    return convo__error(err, code, state, "postgres: %s", msg);
}

/* Notices are not printed (no "schema already exists, skipping" on stderr);
 * a FATAL one, sent to an idle session, means the server is closing it. */
static void on_notice(void *arg, const PGresult *r)
{
    pg_conn *c = arg;
    const char *severity = PQresultErrorField(r, PG_DIAG_SEVERITY_NONLOCALIZED);
    if (severity && (strcmp(severity, "FATAL") == 0 || strcmp(severity, "PANIC") == 0))
        c->fatal = 1;
}

/* session.sql: READ COMMITTED, whatever the role's or server's default. */
static int session_setup(const convo_backend *b, PGconn *pg, convo_error *err)
{
    PGresult *r = PQexec(pg, SQL_SESSION);
    int rc = r && PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : convo__pg_fail(b, pg, r, err);
    PQclear(r);
    return rc;
}

static int pg_connect(void *ctx, void **out, convo_error *err)
{
    convo_backend *b = ctx;
    /* Later entries win over the URL (client_encoding); earlier ones are
     * defaults the URL may override (connect_timeout). */
    const char *keys[] = {"connect_timeout", "dbname", "client_encoding",
                          "fallback_application_name", NULL};
    const char *values[] = {"10", b->conninfo, "UTF8", "convo", NULL};
    pg_conn *c = calloc(1, sizeof *c);
    if (!c)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    c->pg = PQconnectdbParams(keys, values, 1);
    if (!c->pg || PQstatus(c->pg) != CONNECTION_OK) {
        int rc = convo__pg_fail(b, c->pg, NULL, err);
        PQfinish(c->pg);
        free(c);
        return rc;
    }
    PQsetNoticeReceiver(c->pg, on_notice, c);
    int rc = session_setup(b, c->pg, err);
    if (rc != 0) {
        PQfinish(c->pg);
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

static void pg_disconnect(void *ctx, void *conn)
{
    (void)ctx;
    pg_conn *c = conn;
    PQfinish(c->pg);
    free(c);
}

const convo_pool_ops convo__pg_pool_ops = {pg_connect, pg_disconnect};

/* An idle connection has nothing to read: if it does, the server is closing
 * it (restart, pg_terminate_backend, idle timeout: a FATAL message, then end
 * of file) or sent a notification. Consume and look. */
static int conn_alive(pg_conn *c)
{
    struct pollfd pfd = {PQsocket(c->pg), POLLIN, 0};
    for (int i = 0; i < 4; i++) {
        if (c->fatal || PQstatus(c->pg) != CONNECTION_OK || pfd.fd < 0)
            return 0;
        if (poll(&pfd, 1, 0) <= 0)
            return 1;
        if (!PQconsumeInput(c->pg))
            return 0;
        PGnotify *note;
        while ((note = PQnotifies(c->pg)) != NULL)
            PQfreemem(note);
    }
    return !c->fatal && PQstatus(c->pg) == CONNECTION_OK;
}

static int64_t monotonic_micros(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* A connection from the pool, reconnected when the server dropped it idle.
 * One that answered less than FRESH_MICROS ago is not polled: a server
 * closing it in that moment is no different from one closing it during the
 * call (CONVO_EIO), and back-to-back calls save a system call each. */
int convo__pg_conn_get(convo_backend *b, pg_conn **out, convo_error *err)
{
    void *conn;
    int rc = convo__pool_acquire(b->pool, &conn, err);
    if (rc != 0)
        return rc;
    pg_conn *c = conn;
    int fresh = c->done_at && monotonic_micros() - c->done_at < FRESH_MICROS && !c->fatal &&
                PQstatus(c->pg) == CONNECTION_OK;
    if (!fresh && !conn_alive(c)) {
        PQreset(c->pg);
        memset(c->prepared, 0, sizeof c->prepared);
        c->fatal = 0;
        rc = PQstatus(c->pg) == CONNECTION_OK ? session_setup(b, c->pg, err)
                                              : convo__pg_fail(b, c->pg, NULL, err);
        if (rc != 0) {
            convo__pool_release(b->pool, c, true);
            return rc;
        }
    }
    *out = c;
    return 0;
}

int convo__pg_is_state(const PGresult *r, const char *state)
{
    const char *s = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    return s && strcmp(s, state) == 0;
}

int convo__pg_exec(const convo_backend *b, PGconn *pg, const char *sql, convo_error *err)
{
    PGresult *r = PQexec(pg, sql);
    ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    int rc = (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) ? 0 : convo__pg_fail(b, pg, r, err);
    PQclear(r);
    return rc;
}

/* Formats of every parameter: binary. At least as many as the longest statement
 * (ST_CP_PUT_REFS, 28). */
static const int binary[28] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                               1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

/* Reads results up to the NULL that ends the current query's. */
static void drain(PGconn *pg)
{
    PGresult *r;
    while ((r = PQgetResult(pg)) != NULL)
        PQclear(r);
}

/* What a run needs to know of a statement: its name on the connection, its
 * text, its parameters (types NULL: the server infers them) and its bit in
 * pg_conn.prepared (slot). */
typedef struct statement {
    const char *name;
    const char *sql;
    int nparams;
    const Oid *types;
    int slot;
} statement;

static int is_prepared(const pg_conn *c, int slot)
{
    return (c->prepared[slot / 32] >> (slot % 32)) & 1u;
}

static void set_prepared(pg_conn *c, int slot, int on)
{
    if (on)
        c->prepared[slot / 32] |= 1u << (slot % 32);
    else
        c->prepared[slot / 32] &= ~(1u << (slot % 32));
}

/* The first run of a statement on a connection: Parse, Bind, Execute and one
 * Sync in one round trip (libpq pipeline mode) instead of a PQprepare round
 * trip first. Returns the Execute's result, or the Parse's when that failed
 * (the Execute is then skipped by the server); NULL when the connection broke
 * or could not leave pipeline mode (then c->fatal is set: it is not reused). */
static PGresult *exec_first(pg_conn *c, const statement *st, const char *const *values,
                            const int *lengths)
{
    PGconn *pg = c->pg;
    if (!PQenterPipelineMode(pg))
        return NULL;
    PGresult *parse = NULL, *exec = NULL, *sync = NULL;
    if (PQsendPrepare(pg, st->name, st->sql, st->nparams, st->types) &&
        PQsendQueryPrepared(pg, st->name, st->nparams, values, lengths, binary, 1) &&
        PQpipelineSync(pg)) {
        if ((parse = PQgetResult(pg)) != NULL)
            drain(pg);
        if ((exec = PQgetResult(pg)) != NULL)
            drain(pg);
        sync = PQgetResult(pg);
    }
    int synced = sync && PQresultStatus(sync) == PGRES_PIPELINE_SYNC;
    PQclear(sync);
    if (!synced || !PQexitPipelineMode(pg)) {
        c->fatal = 1; /* out of step with the server: never reuse it */
        PQclear(parse);
        PQclear(exec);
        return NULL;
    }
    ExecStatusType ps = parse ? PQresultStatus(parse) : PGRES_FATAL_ERROR;
    /* 42P05: it exists already */
    if (ps == PGRES_COMMAND_OK || convo__pg_is_state(parse, "42P05")) {
        set_prepared(c, st->slot, 1);
        PQclear(parse);
        if (ps == PGRES_COMMAND_OK)
            return exec;
        PQclear(exec); /* skipped: run it now */
        return PQexecPrepared(pg, st->name, st->nparams, values, lengths, binary, 1);
    }
    PQclear(exec);
    return parse;
}

/* Runs a prepared statement with binary parameters and a binary result.
 * Serialization failures and deadlocks are retried: every statement is one
 * transaction, so a retry is safe. A dead connection is dropped. */
static int run(convo_backend *b, const statement *st, const char *const *values,
               const int *lengths, PGresult **out, convo_error *err)
{
    for (int attempt = 0;; attempt++) {
        pg_conn *c;
        int rc = convo__pg_conn_get(b, &c, err);
        if (rc != 0)
            return rc;
        PGresult *r = is_prepared(c, st->slot)
                          ? PQexecPrepared(c->pg, st->name, st->nparams, values, lengths,
                                           binary, 1)
                          : exec_first(c, st, values, lengths);
        ExecStatusType status = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
        if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) {
            c->done_at = monotonic_micros();
            convo__pool_release(b->pool, c, false);
            *out = r;
            return 0;
        }
        int broken = PQstatus(c->pg) != CONNECTION_OK || c->fatal;
        int retry = !broken && attempt < MAX_RETRIES &&
                    (convo__pg_is_state(r, "40001") || convo__pg_is_state(r, "40P01") ||
                     convo__pg_is_state(r, "26000"));
        if (convo__pg_is_state(r, "26000")) /* prepared statement gone (DISCARD ALL, a pooler) */
            set_prepared(c, st->slot, 0);
        if (!retry)
            rc = convo__pg_fail(b, c->pg, r, err);
        PQclear(r);
        convo__pool_release(b->pool, c, broken);
        if (!retry)
            return rc;
    }
}

int convo__pg_run(convo_backend *b, int st, const char *const *values, const int *lengths,
                  PGresult **out, convo_error *err)
{
    const statement s = {statements[st].name, b->sql[st], statements[st].nparams, NULL, st};
    return run(b, &s, values, lengths, out, err);
}

/* SQLSTATEs of a stored value that does not decode: get_byte() or substring()
 * past its end (2202E, 22011; channel_list() raises 2202E for a versions value
 * that does not check) and bytes that are not UTF-8 (22021, convert_from() in
 * id_text() and ver_text()). */
static int does_not_decode(const char *state, int utf8)
{
    return strcmp(state, "2202E") == 0 || strcmp(state, "22011") == 0 ||
           (utf8 && strcmp(state, "22021") == 0);
}

/* utf8: 22021 also means stored bytes (the statement takes no text the core
 * did not check). */
static int run_stored(convo_backend *b, int st, const char *const *values, const int *lengths,
                      int utf8, PGresult **out, convo_error *err)
{
    convo_error e = {0}; /* the SQLSTATE even when err is NULL */
    int rc = convo__pg_run(b, st, values, lengths, out, &e);
    if (rc == 0)
        return 0;
    if (!does_not_decode(e.backend_code, utf8))
        return convo__error(err, rc, e.backend_code, "%s", e.message);
    const char *why = strncmp(e.message, "postgres: ", 10) == 0 ? e.message + 10 : e.message;
    return convo__error(err, CONVO_ECORRUPT, e.backend_code,
                        "postgres: a stored checkpoint does not decode (%.200s)", why);
}

int convo__pg_run_stored(convo_backend *b, int st, const char *const *values,
                         const int *lengths, PGresult **out, convo_error *err)
{
    return run_stored(b, st, values, lengths, 1, out, err);
}

int convo__pg_run_stored_bytes(convo_backend *b, int st, const char *const *values,
                               const int *lengths, PGresult **out, convo_error *err)
{
    return run_stored(b, st, values, lengths, 0, out, err);
}

/* The parameters of the thread_list_*.sql shapes, typed: a shape uses some. */
static const Oid list_types[LIST_NPARAMS] = {OID_TEXT, OID_TIMESTAMPTZ, OID_INT8, OID_BOOL,
                                             OID_BOOL, OID_TEXT, OID_BOOL};

int convo__pg_run_list(convo_backend *b, int shape, const char *const *values,
                       const int *lengths, PGresult **out, convo_error *err)
{
    char name[32];
    snprintf(name, sizeof name, "convo_list_%d", shape);
    const statement s = {name, b->list_sql[shape], LIST_NPARAMS, list_types, ST_COUNT + shape};
    return run(b, &s, values, lengths, out, err);
}
