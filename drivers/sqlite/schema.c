/* schema.c — the SQLite driver's stored layout: the version a file records
 * and the migrations that bring it to SCHEMA_VERSION, each the text of one
 * migrate-V-W.sql file run whole, all of them in one write transaction (see
 * "Schema version and migrations" in docs/sqlite.md). */
#include "config.h"
#include "sqlite_int.h"

/* migrations[v] turns a version-v layout into version v+1. */
static const char *const migrations[SCHEMA_VERSION] = {
    SQL_MIGRATE_0_1,
    SQL_MIGRATE_1_2,
    SQL_MIGRATE_2_3,
    SQL_MIGRATE_3_4,
    SQL_MIGRATE_4_5,
    SQL_MIGRATE_5_6,
    SQL_MIGRATE_6_7,
    SQL_MIGRATE_7_8,
    SQL_MIGRATE_8_9,
    SQL_MIGRATE_9_10,
    SQL_MIGRATE_10_11,
    SQL_MIGRATE_11_12,
    SQL_MIGRATE_12_13,
    SQL_MIGRATE_13_14,
    SQL_MIGRATE_14_15,
    SQL_MIGRATE_15_16,
    SQL_MIGRATE_16_17,
};

/* The layout version stored in the file; 0 for a file convo never touched. */
static int schema_version(sq_conn *c, int *version, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(c->db, SQL_SCHEMA_HAS_META, -1, &st, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(st)) == SQLITE_ROW)
        rc = SQLITE_OK;
    int has_meta = rc == SQLITE_OK && sqlite3_column_int(st, 0) > 0;
    sqlite3_finalize(st);
    *version = 0;
    if (rc != SQLITE_OK || !has_meta)
        return rc == SQLITE_OK ? 0 : sq_conn_error(c, rc, err, "reading the schema version");
    if ((rc = sqlite3_prepare_v2(c->db, SQL_SCHEMA_VERSION_GET, -1, &st, NULL)) == SQLITE_OK) {
        rc = sqlite3_step(st);
        if (rc == SQLITE_ROW)
            *version = sqlite3_column_int(st, 0);
        rc = rc == SQLITE_ROW || rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    sqlite3_finalize(st);
    if (rc == SQLITE_OK && *version < 0)
        return convo__error(err, CONVO_ECORRUPT, NULL,
                            "sqlite: the database records convo schema version %d; versions"
                            " start at 1", *version);
    return rc == SQLITE_OK ? 0 : sq_conn_error(c, rc, err, "reading the schema version");
}

/* Records SCHEMA_VERSION as the file's layout version. */
static int schema_version_set(sq_conn *c, convo_error *err)
{
    sqlite3_stmt *st;
    int rc = sqlite3_prepare_v2(c->db, SQL_SCHEMA_VERSION_SET, -1, &st, NULL);
    if (rc == SQLITE_OK) {
        sqlite3_bind_int(st, 1, SCHEMA_VERSION); /* stored as text: value is TEXT */
        rc = sqlite3_step(st);
        rc = rc == SQLITE_DONE ? SQLITE_OK : rc;
    }
    sqlite3_finalize(st);
    return rc == SQLITE_OK ? 0 : sq_conn_error(c, rc, err, "recording the schema version");
}

static int too_new(int version, convo_error *err)
{
    return convo__error(err, CONVO_ENOTSUP, NULL,
                        "sqlite: the database has convo schema version %d, newer than the %d this"
                        " libconvo understands; use a newer libconvo",
                        version, SCHEMA_VERSION);
}

/* Applies the missing migrations under the write lock; another process may
 * have done it meanwhile, so the version is read again once locked. */
static int migrate_locked(sq_conn *c, convo_error *err)
{
    int version;
    int rc = schema_version(c, &version, err);
    if (rc)
        return rc;
    if (version > SCHEMA_VERSION)
        return too_new(version, err);
    for (; version < SCHEMA_VERSION && rc == 0; version++)
        rc = sq_exec_sql(c, migrations[version], "migrating the schema", err);
    return rc ? rc : schema_version_set(c, err);
}

int sq_migrate(sq_conn *c, convo_error *err)
{
    int version;
    int rc = schema_version(c, &version, err);
    if (rc || version == SCHEMA_VERSION)
        return rc;
    if (version > SCHEMA_VERSION)
        return too_new(version, err);
    if ((rc = sq_exec_sql(c, SQL_BEGIN_IMMEDIATE,
                          "locking the database to migrate it", err)) != 0)
        return rc;
    rc = migrate_locked(c, err);
    rc = rc ? rc : sq_exec_sql(c, SQL_COMMIT, "committing the migration", err);
    if (rc)
        sqlite3_exec(c->db, SQL_ROLLBACK, NULL, NULL, NULL);
    return rc;
}
