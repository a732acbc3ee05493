-- migrate-26.sql: schema version 26 — threads_by_expiry only in a store a
-- ttl opener has opened. The partial index on the deadline (version 4) serves
-- only sweep, and only a store with ttl has deadlines; yet every update of a
-- thread row opens, locks and closes each index of threads, HOT or not: this
-- one cost every append about 3,000 server instructions in a store without
-- ttl (docs/postgres.md "Costs"). The driver calls expiry_index() when a store
-- is opened with a ttl (expiry_index.sql), before its first write; only such
-- an opener writes a deadline (an opener without ttl clears one). Here the
-- index goes unless a thread has a deadline. Without it sweep reads every
-- thread row (and finds none with a deadline).
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).

-- Makes threads_by_expiry when missing, under the migrations' advisory lock
-- (migrate-begin.sql) so two ttl openers do not both build it; true when it
-- did. The check comes first: CREATE INDEX locks threads against writes even
-- when the index exists.
CREATE FUNCTION @S.expiry_index() RETURNS boolean
LANGUAGE plpgsql AS $fn$
BEGIN
    IF to_regclass('@S.threads_by_expiry') IS NOT NULL THEN
        RETURN false;
    END IF;
    PERFORM pg_advisory_xact_lock(1668247158, hashtext('@N'));
    CREATE INDEX IF NOT EXISTS threads_by_expiry ON @S.threads (expires_at)
     WHERE expires_at IS NOT NULL;
    RETURN true;
END
$fn$;

DO $do$
BEGIN
    IF NOT EXISTS (SELECT 1 FROM @S.threads WHERE expires_at IS NOT NULL) THEN
        DROP INDEX @S.threads_by_expiry;
    END IF;
END
$do$;
