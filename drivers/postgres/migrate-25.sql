-- migrate-25.sql: schema version 25 — a put and a pending write at version 24's
-- server cost or less (issue 24). Counted with scripts/pg-statement-cost.sh (a
-- LangGraph-shaped put and its write, docs/performance.md), version 24 ran
-- 2.70 M instructions against version 22's 1.97 M: checkpoint_put called
-- ver_join(), an SQL function with an aggregate the planner cannot inline, so
-- it was planned again on every put; checkpoint_put_writes rebuilt the row's
-- array through a UNION and a sort on every write. Now the put joins the
-- versions in its PL/pgSQL loop (simple expressions), and a write appends its
-- elements to the array unless the task already has writes there (the merge
-- of version 24 then, which a retry or a negative idx needs). The array is in
-- no order: the library sorts a checkpoint's writes by (task_id, idx) when it
-- reads them. Nothing stored changes.
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).

-- version 23's checkpoint_put: the versions joined as ver_join() joins them
CREATE OR REPLACE FUNCTION @S.checkpoint_put(p_thread text, p_ns text, p_id text,
    p_parent text, p_metadata json, p_body_type text, p_body bytea,
    p_log_length bigint, p_channels text[], p_versions text[], p_types text[],
    p_values bytea[], p_at timestamptz, p_ttl interval) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    v_tid bigint;
    names integer[] := @S.name_nums(coalesce(p_channels, '{}') || p_types || p_body_type);
    n integer := coalesce(cardinality(p_channels), 0);
    vers bytea[] := '{}';
    v bytea;
    lens bytea := '';
    wide bytea := '';
    joined bytea := '';
    longest integer := 0;
BEGIN
    FOR i IN 1 .. n LOOP
        v := @S.ver_pack(p_versions[i]);
        IF v IS NULL THEN
            RAISE EXCEPTION USING ERRCODE = 'CV400', MESSAGE = 'a channel without a version';
        END IF;
        vers := vers || v;
        lens := lens || set_byte('\x00'::bytea, 0, least(octet_length(v), 255));
        wide := wide || int4send(octet_length(v));
        joined := joined || v;
        longest := greatest(longest, octet_length(v));
    END LOOP;
    IF longest <= 255 THEN
        joined := '\x01'::bytea || lens || joined;
    ELSE
        joined := '\x04'::bytea || wide || joined;
    END IF;
    -- the thread's row lock keeps prune and delete out; the position is taken
    -- under it, so a later put of the same thread always gets a higher one
    SELECT c.tid INTO v_tid FROM @S.thread_claim(p_thread, p_ttl, p_at) c;
    INSERT INTO @S.checkpoint_blobs (tid, channel, type, checkpoint_ns, version, value)
    SELECT v_tid, names[u.o], names[n + u.o], p_ns, vers[u.o], u.b
      FROM unnest(p_types, p_values) WITH ORDINALITY AS u(t, b, o)
     WHERE u.t IS NOT NULL
    ON CONFLICT DO NOTHING;
    INSERT INTO @S.checkpoints AS c (tid, put_seq, log_length, created_at, channel_set,
        body_type, checkpoint_ns, checkpoint_id, parent_id, metadata, versions, body)
    VALUES (v_tid, nextval('@S.checkpoint_put_seq'), p_log_length, p_at,
        @S.channel_set(names[1:n]), names[2 * n + 1], p_ns, @S.id_pack(p_id),
        @S.id_pack(p_parent), p_metadata, joined, p_body)
    ON CONFLICT (tid, checkpoint_ns, checkpoint_id) DO UPDATE SET
        parent_id = excluded.parent_id, metadata = excluded.metadata,
        body_type = excluded.body_type, body = excluded.body,
        log_length = excluded.log_length, channel_set = excluded.channel_set,
        versions = excluded.versions;
END
$fn$;

-- version 24's checkpoint_put_writes: a task's first writes to a checkpoint
-- appended to its array; the merge only when the task has writes there
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
     WHERE c.tid = v_tid AND c.checkpoint_ns = p_ns AND c.checkpoint_id = v_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'CV404', MESSAGE = 'checkpoint not found';
    END IF;
END
$fn$;
