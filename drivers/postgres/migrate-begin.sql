-- migrate-begin.sql: opens the transaction in which schema.c brings schema @S
-- (@N: its bare name) up to date. One opener at a time: a two-key advisory
-- lock, "conv" (1668247158) and the schema's name, held to the end of the
-- transaction; then the version table, where each migration records itself.
BEGIN ISOLATION LEVEL READ COMMITTED;
SELECT pg_advisory_xact_lock(1668247158, hashtext('@N'));
CREATE SCHEMA IF NOT EXISTS @S;
CREATE TABLE IF NOT EXISTS @S.schema_version (version integer PRIMARY KEY,
    applied_at timestamptz NOT NULL DEFAULT now())
