-- migrate-27.sql: schema version 27 — a write finds its checkpoint by the
-- primary key also in a table never analyzed (issue 24). Without statistics
-- (a new store before autovacuum's first analyze, or autovacuum off) the
-- planner costs a lookup by (tid, checkpoint_ns, checkpoint_id) the same on
-- checkpoints_pkey and on checkpoints_by_ns_put (tid, checkpoint_ns, put_seq)
-- with checkpoint_id as a filter, and the smaller index wins: every write read
-- every checkpoint of its thread, and since version 24 each through its HOT
-- chain (a 300-turn LangGraph run: twice the wall time of version 22). A row
-- comparison that only the primary key can take as an index condition,
-- (tid, checkpoint_ns, checkpoint_id) <= (the same values), true whenever the
-- equalities are, makes the other plan a filter over the thread and the
-- primary key the cheaper one. checkpoint_put_writes and the swaps and raises
-- of checkpoint_put_refs (the lookups by id a put and its write make);
-- nothing stored changes.
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).

-- version 25's checkpoint_put_writes: the row comparison
CREATE OR REPLACE FUNCTION @S.checkpoint_put_writes(p_thread text, p_ns text, p_id text,
    p_task text, p_path text, p_idx bigint[], p_channels text[], p_types text[],
    p_values bytea[], p_ttl interval) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    v_tid bigint;
    v_id bytea := @S.id_pack(p_id);
    v_task bytea := @S.id_pack(p_task);
    n integer := coalesce(cardinality(p_idx), 0);
    names integer[];
    added @S.pending_write[];
BEGIN
    -- a key-share lock: a concurrent delete or prune either ran first (and the
    -- checkpoint is gone) or waits for these writes and sees them
    v_tid := @S.thread_live(p_thread, p_ttl, true);
    IF v_tid IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'CV404', MESSAGE = 'checkpoint not found';
    END IF;
    names := @S.name_nums(coalesce(p_channels, '{}') || coalesce(p_types, '{}') || p_path);
    added := ARRAY(SELECT ROW(u.i, names[2 * n + 1], names[u.o], names[n + u.o], v_task,
                             u.b)::@S.pending_write
                     FROM unnest(p_idx, p_values) WITH ORDINALITY AS u(i, b, o));
    -- READ COMMITTED: a write that waited for another's row lock evaluates this
    -- against the row that one committed
    UPDATE @S.checkpoints c SET writes = CASE
        WHEN c.writes IS NULL THEN added
        WHEN NOT (v_task = ANY (SELECT o.task_id FROM unnest(c.writes) AS o))
        THEN c.writes || added
        ELSE ARRAY(
            SELECT o FROM unnest(c.writes) AS o
             WHERE o.task_id <> v_task OR o.idx >= 0 OR NOT (o.idx = ANY (p_idx))
            UNION ALL
            SELECT a FROM unnest(added) AS a
             WHERE a.idx < 0 OR NOT EXISTS (
                   SELECT 1 FROM unnest(c.writes) AS o
                    WHERE o.task_id = v_task AND o.idx = a.idx)) END
     WHERE c.tid = v_tid AND c.checkpoint_ns = p_ns AND c.checkpoint_id = v_id
       AND (c.tid, c.checkpoint_ns, c.checkpoint_id) <= (v_tid, p_ns, v_id);
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'CV404', MESSAGE = 'checkpoint not found';
    END IF;
END
$fn$;

-- version 24's checkpoint_put_refs: the row comparison
CREATE OR REPLACE FUNCTION @S.checkpoint_put_refs(p_thread text, p_ns text, p_id text,
    p_parent text, p_metadata json, p_body_type text, p_body bytea,
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
    v_id bytea;
    v_task bytea;
    n integer := coalesce(cardinality(p_sw_ids), 0);
    names integer[];
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
    IF n = 0 THEN
        RETURN;
    END IF;
    -- an old type no row has names nothing: its number is NULL and no row matches
    names := @S.name_nums(p_sw_old_types || p_sw_new_types || p_sw_channels);
    -- each value changes only while it is exactly the old one (type and
    -- bytes); the checkpoint of one that changed covers what it refers to
    -- (log_length is in no index: the raise is a HOT update)
    FOR i IN 1 .. n LOOP
        v_id := @S.id_pack(p_sw_ids[i]);
        IF p_sw_tasks[i] IS NOT NULL THEN
            v_task := @S.id_pack(p_sw_tasks[i]);
            UPDATE @S.checkpoints k SET log_length = greatest(k.log_length, p_sw_log[i]),
                writes = ARRAY(
                    SELECT CASE WHEN o.task_id = v_task AND o.idx = p_sw_idx[i]
                                 AND o.type = names[i] AND o.value = p_sw_old[i]
                           THEN ROW(o.idx, o.task_path, o.channel, names[n + i], o.task_id,
                                    p_sw_new[i])::@S.pending_write
                           ELSE ROW(o.idx, o.task_path, o.channel, o.type, o.task_id,
                                    o.value)::@S.pending_write END
                      FROM unnest(k.writes) WITH ORDINALITY AS o(idx, task_path, channel,
                           type, task_id, value, ord)
                     ORDER BY o.ord)
             WHERE k.tid = v_tid AND k.checkpoint_ns = p_ns AND k.checkpoint_id = v_id
               AND (k.tid, k.checkpoint_ns, k.checkpoint_id) <= (v_tid, p_ns, v_id)
               AND EXISTS (SELECT 1 FROM unnest(k.writes) AS o
                            WHERE o.task_id = v_task AND o.idx = p_sw_idx[i]
                              AND o.type = names[i] AND o.value = p_sw_old[i]);
        ELSE
            UPDATE @S.checkpoint_blobs x SET type = names[n + i], value = p_sw_new[i]
             WHERE x.tid = v_tid AND x.checkpoint_ns = p_ns AND x.channel = names[2 * n + i]
               AND x.version = @S.ver_pack(p_sw_versions[i])
               AND x.type = names[i] AND x.value = p_sw_old[i]
               AND EXISTS (SELECT 1 FROM @S.checkpoints k WHERE k.tid = v_tid
                             AND k.checkpoint_ns = p_ns AND k.checkpoint_id = v_id
                             AND (k.tid, k.checkpoint_ns, k.checkpoint_id)
                                 <= (v_tid, p_ns, v_id));
            IF FOUND THEN
                UPDATE @S.checkpoints k SET log_length = p_sw_log[i]
                 WHERE k.tid = v_tid AND k.checkpoint_ns = p_ns AND k.checkpoint_id = v_id
                   AND (k.tid, k.checkpoint_ns, k.checkpoint_id) <= (v_tid, p_ns, v_id)
                   AND k.log_length < p_sw_log[i];
            END IF;
        END IF;
    END LOOP;
END
$fn$;
