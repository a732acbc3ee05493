-- migrate-5.sql: schema version 5 — one put order for the whole store, so
-- that a list `before` a checkpoint of one thread compares with every thread's
-- checkpoints: put_seq comes from a sequence, started above every position the
-- per-thread counters gave (a thread's old checkpoints keep their order and
-- come before its new ones; threads.checkpoint_seq is no longer used).
-- checkpoint_put_log: messages and a checkpoint in one transaction.
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).
CREATE SEQUENCE @S.checkpoint_put_seq AS bigint;
SELECT setval('@S.checkpoint_put_seq', greatest(
    (SELECT max(c.put_seq) FROM @S.checkpoints c),
    (SELECT max(t.checkpoint_seq) FROM @S.threads t), 0) + 1, false);
CREATE OR REPLACE FUNCTION @S.checkpoint_put(p_thread text, p_ns text, p_id text,
    p_parent text, p_metadata jsonb, p_body_type text, p_body bytea,
    p_log_length bigint, p_channels text[], p_versions text[], p_types text[],
    p_values bytea[], p_at timestamptz, p_ttl interval) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    -- the thread's row lock keeps prune and delete out; the position is taken
    -- under it, so a later put of the same thread always gets a higher one
    PERFORM @S.thread_claim(p_thread, p_ttl, p_at, false);
    INSERT INTO @S.checkpoint_blobs
        (thread_id, checkpoint_ns, channel, version, type, value)
    SELECT p_thread, p_ns, u.c, u.v, u.t, u.b
      FROM unnest(p_channels, p_versions, p_types, p_values) AS u(c, v, t, b)
     WHERE u.t IS NOT NULL
    ON CONFLICT DO NOTHING;
    INSERT INTO @S.checkpoints AS c (thread_id, checkpoint_ns, checkpoint_id, put_seq,
        parent_id, metadata, body_type, body, log_length, channels, versions, created_at)
    VALUES (p_thread, p_ns, p_id, nextval('@S.checkpoint_put_seq'), p_parent,
        p_metadata, p_body_type, p_body, p_log_length, p_channels, p_versions, p_at)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
        parent_id = excluded.parent_id, metadata = excluded.metadata,
        body_type = excluded.body_type, body = excluded.body,
        log_length = excluded.log_length, channels = excluded.channels,
        versions = excluded.versions;
END
$fn$;
-- The append (no idempotency key, an expected length) and the put, in the
-- caller's one transaction: append's CV409 undoes both, a thread it created
-- included.
CREATE FUNCTION @S.checkpoint_put_log(p_thread text, p_ns text, p_id text,
    p_parent text, p_metadata jsonb, p_body_type text, p_body bytea,
    p_log_length bigint, p_channels text[], p_versions text[], p_types text[],
    p_values bytea[], p_bodies bytea[], p_roles text[], p_expected bigint,
    p_at timestamptz, p_ttl interval) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM @S.append(p_thread, p_bodies, p_roles, p_at, NULL, p_expected, p_ttl);
    PERFORM @S.checkpoint_put(p_thread, p_ns, p_id, p_parent, p_metadata, p_body_type,
        p_body, p_log_length, p_channels, p_versions, p_types, p_values, p_at, p_ttl);
END
$fn$;
