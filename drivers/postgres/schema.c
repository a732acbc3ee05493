/* schema.c — the PostgreSQL driver's schema, brought up to date when a store
 * opens: migrate-N.sql takes a schema from version N-1 to N, in order, in one
 * transaction that one opener at a time runs (docs/postgres.md: Layout). */
#include "config.h"
#include "pg_int.h"
#include "drivers/postgres/sql.h"
#include <stdio.h>
#include <stdlib.h>

/* Never edit a released migration: a change of layout is a new one. */
static const char *const migrations[] = {
    SQL_MIGRATE_1, SQL_MIGRATE_2, SQL_MIGRATE_3, SQL_MIGRATE_4, SQL_MIGRATE_5,
    SQL_MIGRATE_6, SQL_MIGRATE_7, SQL_MIGRATE_8, SQL_MIGRATE_9, SQL_MIGRATE_10,
    SQL_MIGRATE_11, SQL_MIGRATE_12, SQL_MIGRATE_13, SQL_MIGRATE_14, SQL_MIGRATE_15,
    SQL_MIGRATE_16, SQL_MIGRATE_17, SQL_MIGRATE_18, SQL_MIGRATE_19,
    SQL_MIGRATE_20, SQL_MIGRATE_21, SQL_MIGRATE_22, SQL_MIGRATE_23, SQL_MIGRATE_24, SQL_MIGRATE_25,
    SQL_MIGRATE_26, SQL_MIGRATE_27, SQL_MIGRATE_28, SQL_MIGRATE_29,
    SQL_MIGRATE_30, SQL_MIGRATE_31, SQL_MIGRATE_32, SQL_MIGRATE_33, SQL_MIGRATE_34,
    SQL_MIGRATE_35, SQL_MIGRATE_36, SQL_MIGRATE_37, SQL_MIGRATE_38, SQL_MIGRATE_39, SQL_MIGRATE_40,
    SQL_MIGRATE_41, SQL_MIGRATE_42,
};
#define SCHEMA_VERSION ((int)(sizeof migrations / sizeof *migrations))

/* The schema's version: 0 when it has no version table yet. */
static int read_version(const convo_backend *b, PGconn *pg, int *version, convo_error *err)
{
    char *sql = convo__pg_fill(b, SQL_VERSION, NULL);
    if (!sql)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    PGresult *r = PQexec(pg, sql);
    free(sql);
    int rc = 0;
    if (convo__pg_is_state(r, "42P01") || convo__pg_is_state(r, "3F000"))
        *version = 0; /* no table, or no schema */
    else if (r && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
        *version = atoi(PQgetvalue(r, 0, 0));
    else
        rc = convo__pg_fail(b, pg, r, err);
    PQclear(r);
    if (rc == 0 && *version < 0)
        rc = convo__error(err, CONVO_ECORRUPT, NULL,
                          "postgres: schema %s records version %d; versions start at 1",
                          b->schema, *version);
    return rc;
}

/* The .sql file text for this schema run on pg: 0 or an error. */
static int exec_file(const convo_backend *b, PGconn *pg, const char *text, convo_error *err)
{
    char *sql = convo__pg_fill(b, text, NULL);
    if (!sql)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    int rc = convo__pg_exec(b, pg, sql, err);
    free(sql);
    return rc;
}

/* migrate-record.sql: migration v ran, in the migrations' transaction. */
static int record_version(const convo_backend *b, PGconn *pg, int v, convo_error *err)
{
    char *sql = convo__pg_fill(b, SQL_MIGRATE_RECORD, NULL), number[16];
    if (!sql)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    snprintf(number, sizeof number, "%d", v);
    const char *values[1] = {number};
    PGresult *r = PQexecParams(pg, sql, 1, NULL, values, NULL, NULL, 0);
    free(sql);
    int rc = r && PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : convo__pg_fail(b, pg, r, err);
    PQclear(r);
    return rc;
}

/* In one transaction under the schema's migration lock (migrate-begin.sql):
 * the migrations after the version found there, each recorded. */
static int apply_migrations(convo_backend *b, PGconn *pg, convo_error *err)
{
    int version = 0, rc = exec_file(b, pg, SQL_MIGRATE_BEGIN, err);
    if (rc == 0)
        rc = read_version(b, pg, &version, err); /* again: another opener may have won */
    if (rc == 0 && version > SCHEMA_VERSION)
        rc = convo__error(err, CONVO_ENOTSUP, NULL,
                          "postgres: schema %s is at version %d, newer than this libconvo (%d)",
                          b->schema, version, SCHEMA_VERSION);
    for (int v = version + 1; rc == 0 && v <= SCHEMA_VERSION; v++) {
        rc = exec_file(b, pg, migrations[v - 1], err);
        if (rc == 0)
            rc = record_version(b, pg, v, err);
    }
    if (rc == 0)
        return exec_file(b, pg, SQL_MIGRATE_COMMIT, err);
    if (PQstatus(pg) == CONNECTION_OK)
        PQclear(PQexec(pg, SQL_MIGRATE_ROLLBACK));
    return rc;
}

int convo__pg_migrate(convo_backend *b, convo_error *err)
{
    pg_conn *c;
    int rc = convo__pg_conn_get(b, &c, err);
    if (rc != 0)
        return rc;
    int version = 0;
    rc = read_version(b, c->pg, &version, err);
    if (rc == 0 && version > SCHEMA_VERSION)
        rc = convo__error(err, CONVO_ENOTSUP, NULL,
                          "postgres: schema %s is at version %d, newer than this libconvo (%d)",
                          b->schema, version, SCHEMA_VERSION);
    else if (rc == 0 && version < SCHEMA_VERSION)
        rc = apply_migrations(b, c->pg, err);
    convo__pool_release(b->pool, c, PQstatus(c->pg) != CONNECTION_OK || rc != 0);
    return rc;
}
