-- migrate-15.sql: schema version 15 — checkpoint_put_refs() replaced (same
-- signature, same effect): each swap is now two statements by primary key in
-- a loop instead of one statement of data-modifying CTEs over unnest(). The
-- CTE was planned anew on every call: 4.4 ms a put with two swaps against 1.0
-- ms for the loop (of which 0.5 ms the put), in one session of 400 puts on a
-- thread of 2,000 checkpoints. Nothing else changes.
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).

CREATE OR REPLACE FUNCTION @S.checkpoint_put_refs(p_thread text, p_ns text, p_id text,
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
    -- each value changes only while it is exactly the old one (type and
    -- bytes); the checkpoint of one that changed covers what it refers to
    FOR i IN 1 .. coalesce(cardinality(p_sw_ids), 0) LOOP
        IF p_sw_tasks[i] IS NOT NULL THEN
            UPDATE @S.checkpoint_writes x SET type = p_sw_new_types[i], value = p_sw_new[i]
             WHERE x.tid = v_tid AND x.checkpoint_ns = p_ns AND x.checkpoint_id = p_sw_ids[i]
               AND x.task_id = p_sw_tasks[i] AND x.idx = p_sw_idx[i]
               AND x.type = p_sw_old_types[i] AND x.value = p_sw_old[i];
        ELSE
            UPDATE @S.checkpoint_blobs x SET type = p_sw_new_types[i], value = p_sw_new[i]
             WHERE x.tid = v_tid AND x.checkpoint_ns = p_ns AND x.channel = p_sw_channels[i]
               AND x.version = p_sw_versions[i]
               AND x.type = p_sw_old_types[i] AND x.value = p_sw_old[i]
               AND EXISTS (SELECT 1 FROM @S.checkpoints k WHERE k.tid = v_tid
                             AND k.checkpoint_ns = p_ns AND k.checkpoint_id = p_sw_ids[i]);
        END IF;
        IF FOUND THEN
            UPDATE @S.checkpoints k SET log_length = p_sw_log[i]
             WHERE k.tid = v_tid AND k.checkpoint_ns = p_ns AND k.checkpoint_id = p_sw_ids[i]
               AND k.log_length < p_sw_log[i];
        END IF;
    END LOOP;
END
$fn$;
