-- migrate-14.sql: schema version 14 — checkpoint_put_refs(): a checkpoint put
-- with log references (docs/checkpoints.md, Log references) in the caller's
-- one statement, so in one transaction: the put (with or without messages)
-- and the swaps of its parent's values are all written or none. No table
-- changes: a reference is a value of type convo/items like any other.
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).

-- checkpoint_put_log's arguments (p_bodies empty: checkpoint_put's), then the
-- swaps, one array element each: the checkpoint (in p_ns) whose value it
-- names, that value — a pending write (task, idx) when p_sw_tasks[i] is not
-- NULL, else the value of (channel, version) — the old type and bytes it must
-- still have, the new ones, and the log length the new one needs.
CREATE FUNCTION @S.checkpoint_put_refs(p_thread text, p_ns text, p_id text,
    p_parent text, p_metadata jsonb, p_body_type text, p_body bytea,
    p_log_length bigint, p_channels text[], p_versions text[], p_types text[],
    p_values bytea[], p_bodies bytea[], p_roles text[], p_expected bigint,
    p_generation bigint, p_at timestamptz, p_ttl interval, p_sw_ids text[],
    p_sw_tasks text[], p_sw_idx bigint[], p_sw_channels text[], p_sw_versions text[],
    p_sw_old_types text[], p_sw_old bytea[], p_sw_new_types text[], p_sw_new bytea[],
    p_sw_log bigint[]) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    v_tid bigint;
    gen bigint;
BEGIN
    IF coalesce(cardinality(p_bodies), 0) > 0 THEN
        -- append() checks the length and the generation before it writes
        PERFORM @S.checkpoint_put_log(p_thread, p_ns, p_id, p_parent, p_metadata,
            p_body_type, p_body, p_log_length, p_channels, p_versions, p_types, p_values,
            p_bodies, p_roles, p_expected, p_generation, p_at, p_ttl);
    ELSE
        PERFORM @S.checkpoint_put(p_thread, p_ns, p_id, p_parent, p_metadata, p_body_type,
            p_body, p_log_length, p_channels, p_versions, p_types, p_values, p_at, p_ttl);
    END IF;
    -- the put holds the thread's row lock from its claim on: the generation
    -- read here is the one it wrote under; a mismatch undoes the put with the
    -- rest of the statement (a thread the put created is at 0)
    SELECT t.tid, t.generation INTO v_tid, gen FROM @S.threads t WHERE t.thread_id = p_thread;
    IF p_generation >= 0 AND gen <> p_generation THEN
        RAISE EXCEPTION USING ERRCODE = 'CV409', MESSAGE = format(
            'thread is at generation %s, expected %s', gen, p_generation);
    END IF;
    IF coalesce(cardinality(p_sw_ids), 0) = 0 THEN
        RETURN;
    END IF;
    -- each value changes only while it is exactly the old one (type and
    -- bytes); the checkpoints of those that changed cover what they refer to
    WITH s AS (
        SELECT * FROM unnest(p_sw_ids, p_sw_tasks, p_sw_idx, p_sw_channels, p_sw_versions,
            p_sw_old_types, p_sw_old, p_sw_new_types, p_sw_new, p_sw_log)
            AS s(id, task, idx, ch, ver, old_type, old_value, new_type, new_value, log_length)),
    w AS (
        UPDATE @S.checkpoint_writes x SET type = s.new_type, value = s.new_value FROM s
         WHERE s.task IS NOT NULL AND x.tid = v_tid AND x.checkpoint_ns = p_ns
           AND x.checkpoint_id = s.id AND x.task_id = s.task AND x.idx = s.idx
           AND x.type = s.old_type AND x.value = s.old_value
        RETURNING s.id, s.log_length),
    b AS (
        UPDATE @S.checkpoint_blobs x SET type = s.new_type, value = s.new_value FROM s
         WHERE s.task IS NULL AND x.tid = v_tid AND x.checkpoint_ns = p_ns
           AND x.channel = s.ch AND x.version = s.ver
           AND x.type = s.old_type AND x.value = s.old_value
           AND EXISTS (SELECT 1 FROM @S.checkpoints k WHERE k.tid = v_tid
                         AND k.checkpoint_ns = p_ns AND k.checkpoint_id = s.id)
        RETURNING s.id, s.log_length),
    raised AS (
        SELECT u.id, max(u.log_length) AS log_length
          FROM (SELECT * FROM w UNION ALL SELECT * FROM b) u GROUP BY u.id)
    UPDATE @S.checkpoints k SET log_length = r.log_length FROM raised r
     WHERE k.tid = v_tid AND k.checkpoint_ns = p_ns AND k.checkpoint_id = r.id
       AND k.log_length < r.log_length;
END
$fn$;
