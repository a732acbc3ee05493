-- migrate-3.sql: schema version 3 — restoring dumps (convo import, convo copy).
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).
CREATE FUNCTION @S.thread_import(p_thread text, p_first bigint, p_bodies bytea[],
    p_roles text[], p_at timestamptz[]) RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    n integer := cardinality(p_bodies);
    len bigint;
BEGIN
    LOOP
        SELECT t.length INTO len FROM @S.threads t
         WHERE t.thread_id = p_thread FOR UPDATE;
        EXIT WHEN FOUND;
        INSERT INTO @S.threads (thread_id, created_at, updated_at)
        VALUES (p_thread, p_at[1], p_at[1]) ON CONFLICT (thread_id) DO NOTHING;
    END LOOP;
    IF len >= p_first + n THEN
        RETURN true; -- imported before: skipped
    END IF;
    IF len <> p_first THEN
        RAISE EXCEPTION USING ERRCODE = 'CV409', MESSAGE = format(
            'thread has %s messages, the dump continues at %s', len, p_first);
    END IF;
    UPDATE @S.threads t SET length = len + n,
        updated_at = greatest(t.updated_at, p_at[n]) WHERE t.thread_id = p_thread;
    INSERT INTO @S.messages (thread_id, seq, role, created_at, body)
    SELECT p_thread, len + u.o - 1, u.r, u.a, u.b
      FROM unnest(p_bodies, p_roles, p_at) WITH ORDINALITY AS u(b, r, a, o);
    RETURN false;
END
$fn$;
