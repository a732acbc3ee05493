-- migrate-42.sql: schema version 42 — sealed checkpoint segments (issues 24
-- and 28: bytes a checkpoint). A thread's older checkpoints of one namespace,
-- N at a time in put order, leave their rows for one row of
-- checkpoint_segments: their columns as stored, packed by the driver with
-- lib/segment (column by column, zlib). The newest stay rows (the put's swaps
-- and pending writes change them). Sealing is the driver's, after a put
-- (checkpoint_seal_rows.sql, then checkpoint_seal() here). A segment holds
-- a range of ids (first the least, last the greatest) above every earlier
-- segment's of its namespace, so a look-up by id reads the segment with the
-- greatest first id at or below it (checkpoint_get.sql); a row whose id is
-- below that (ids out of put order) stays a row. Rows of schema 41 stay rows until a later put of their
-- namespace seals them.
--
-- Reads decode segments in C (readback.c). A call that changes checkpoints
-- in place or reads every row of a thread (prune, delete by id, a tail
-- rewrite dropping or checking checkpoints, a copy with checkpoints) first
-- meets segments_none(): with segments it raises CV042 and the driver
-- unseals the thread (the segments back to rows) and runs the call again, in
-- one transaction. A whole thread's purge deletes its segments.
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).
CREATE TABLE @S.checkpoint_segments (
    tid           bigint NOT NULL,
    first_seq     bigint NOT NULL,   -- put_seq of its first checkpoint
    last_seq      bigint NOT NULL,   -- and of its last
    max_log       bigint NOT NULL,   -- the greatest log_length inside (tail rewrites)
    checkpoint_ns text COLLATE "C" NOT NULL,
    first_id      bytea NOT NULL,    -- the least id_pack() id inside
    last_id       bytea NOT NULL,    -- the greatest
    data          bytea NOT NULL,    -- lib/segment: the checkpoints' columns
    PRIMARY KEY (tid, checkpoint_ns, first_id) WITH (fillfactor = 100))
    WITH (fillfactor = 100);
-- compressed by the driver already: kept in the row, not compressed again
ALTER TABLE @S.checkpoint_segments ALTER COLUMN data SET STORAGE MAIN;

-- Locks thread p_thread's row and raises CV042 when the thread has a segment
-- (p_log NULL) or one with a checkpoint whose log_length is past p_log. The
-- lock keeps a sealer (checkpoint_seal() takes it too) out until the
-- caller's transaction ends.
CREATE FUNCTION @S.segments_none(p_thread text, p_log bigint) RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    v_tid bigint;
BEGIN
    SELECT t.tid INTO v_tid FROM @S.threads t WHERE t.thread_id = p_thread FOR UPDATE;
    IF FOUND AND EXISTS (SELECT 1 FROM @S.checkpoint_segments s
                          WHERE s.tid = v_tid AND (p_log IS NULL OR s.max_log > p_log)) THEN
        RAISE EXCEPTION USING ERRCODE = 'CV042',
            MESSAGE = 'the thread has sealed checkpoints: unseal first';
    END IF;
    RETURN true;
END
$fn$;

-- One or more segments of thread p_tid, namespace p_ns: the rows named (ids
-- and the xmin each had when read) are deleted only while unchanged, and the
-- segments inserted; CV043 (nothing done) when a row changed or went, or a
-- segment would not come after the namespace's last. How many rows back.
CREATE FUNCTION @S.checkpoint_seal(p_tid bigint, p_ns text, p_ids bytea[], p_xmins text[],
    p_first_seq bigint[], p_last_seq bigint[], p_max_log bigint[], p_first_id bytea[],
    p_last_id bytea[], p_data bytea[]) RETURNS integer
LANGUAGE plpgsql AS $fn$
DECLARE
    n integer;
BEGIN
    PERFORM 1 FROM @S.threads t WHERE t.tid = p_tid FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'CV043', MESSAGE = 'the thread went';
    END IF;
    IF EXISTS (SELECT 1 FROM @S.checkpoint_segments s
                WHERE s.tid = p_tid AND s.checkpoint_ns = p_ns
                  AND s.last_id >= p_first_id[1]) THEN
        RAISE EXCEPTION USING ERRCODE = 'CV043', MESSAGE = 'a segment is there already';
    END IF;
    DELETE FROM @S.checkpoints c USING unnest(p_ids, p_xmins) AS u(id, x)
     WHERE c.tid = p_tid AND c.checkpoint_ns = p_ns AND c.checkpoint_id = u.id
       AND c.xmin::text = u.x;
    GET DIAGNOSTICS n = ROW_COUNT;
    IF n <> cardinality(p_ids) THEN
        RAISE EXCEPTION USING ERRCODE = 'CV043', MESSAGE = 'a row changed';
    END IF;
    INSERT INTO @S.checkpoint_segments (tid, first_seq, last_seq, max_log, checkpoint_ns,
        first_id, last_id, data)
    SELECT p_tid, u.fs, u.ls, u.ml, p_ns, u.fi, u.li, u.d
      FROM unnest(p_first_seq, p_last_seq, p_max_log, p_first_id, p_last_id, p_data)
           AS u(fs, ls, ml, fi, li, d);
    RETURN n;
END
$fn$;

CREATE OR REPLACE FUNCTION @S.threads_purge(p_threads text[]) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    keys bigint[];
BEGIN
    SELECT array_agg(t.tid) INTO keys FROM @S.threads t WHERE t.thread_id = ANY (p_threads);
    IF keys IS NULL THEN
        RETURN;
    END IF;
    DELETE FROM @S.messages m WHERE m.tid = ANY (keys);
    DELETE FROM @S.idempotency_keys k WHERE k.tid = ANY (keys);
    DELETE FROM @S.checkpoint_blobs b WHERE b.tid = ANY (keys);
    DELETE FROM @S.checkpoints c WHERE c.tid = ANY (keys);
    DELETE FROM @S.checkpoint_segments s WHERE s.tid = ANY (keys);
    DELETE FROM @S.thread_extra x WHERE x.tid = ANY (keys);
    DELETE FROM @S.threads t WHERE t.tid = ANY (keys);
END
$fn$;

-- The calls that read or change every checkpoint row of a thread, behind
-- segments_none(): the functions of schema 41 renamed, same signatures.
ALTER FUNCTION @S.checkpoint_prune(text, bigint, interval) RENAME TO checkpoint_prune_rows;
CREATE FUNCTION @S.checkpoint_prune(p_thread text, p_keep bigint, p_ttl interval)
RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM @S.segments_none(p_thread, NULL);
    PERFORM @S.checkpoint_prune_rows(p_thread, p_keep, p_ttl);
END
$fn$;

ALTER FUNCTION @S.thread_copy(text, text, bigint, bigint, timestamptz, interval)
    RENAME TO thread_copy_rows;
CREATE FUNCTION @S.thread_copy(p_src text, p_dst text, p_upto bigint, p_generation bigint,
    p_at timestamptz, p_ttl interval) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM @S.segments_none(p_src, NULL);
    PERFORM @S.thread_copy_rows(p_src, p_dst, p_upto, p_generation, p_at, p_ttl);
END
$fn$;

-- A rewrite that drops checkpoints frees values no remaining row lists: every
-- segment is unsealed first; one that keeps them only needs none past keep.
ALTER FUNCTION @S.replace_tail(text, bigint, bytea[], text[], timestamptz, text, bigint,
    bigint, boolean, interval) RENAME TO replace_tail_rows;
CREATE FUNCTION @S.replace_tail(p_thread text, p_keep bigint, p_bodies bytea[],
    p_roles text[], p_at timestamptz, p_key text, p_expected bigint, p_generation bigint,
    p_drop boolean, p_ttl interval,
    OUT first_seq bigint, OUT count integer, OUT removed bigint, OUT generation bigint,
    OUT replayed boolean)
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM @S.segments_none(p_thread, CASE WHEN p_drop THEN NULL ELSE p_keep END);
    SELECT r.first_seq, r.count, r.removed, r.generation, r.replayed
      INTO first_seq, count, removed, generation, replayed
      FROM @S.replace_tail_rows(p_thread, p_keep, p_bodies, p_roles, p_at, p_key,
                                p_expected, p_generation, p_drop, p_ttl) AS r;
END
$fn$;

-- A put finds the values of versions it does not carry in its parent's row
-- and the rows after it (migrate-38.sql), and replaces a checkpoint put
-- again in its row: a parent or an id that is not a row but in a segment's
-- range (a fork from an old checkpoint, an old one put again) is unsealed
-- first (CV042). checkpoint_put_log() and checkpoint_put_refs() put through
-- this one.
-- (PL/pgSQL: its plan is kept by the connection; an SQL function holding a
-- sub-select was planned again at every call, 1 M instructions a put)
CREATE FUNCTION @S.sealed_range(p_thread text, p_ns text, p_id bytea) RETURNS boolean
LANGUAGE plpgsql STABLE AS $fn$
BEGIN
    RETURN EXISTS (SELECT 1 FROM @S.threads t
                    CROSS JOIN LATERAL (SELECT k.last_id FROM @S.checkpoint_segments k
                                         WHERE k.tid = t.tid AND k.checkpoint_ns = p_ns
                                           AND k.first_id <= p_id
                                         ORDER BY k.first_id DESC LIMIT 1) s
                   WHERE t.thread_id = p_thread AND s.last_id >= p_id
                     AND NOT EXISTS (SELECT 1 FROM @S.checkpoints c
                                      WHERE c.tid = t.tid AND c.checkpoint_ns = p_ns
                                        AND c.checkpoint_id = p_id));
END
$fn$;
ALTER FUNCTION @S.checkpoint_put(text, text, text, text, json, text, bytea, bigint, text[],
    text[], text[], bytea[], timestamptz, interval) RENAME TO checkpoint_put_rows;
CREATE FUNCTION @S.checkpoint_put(p_thread text, p_ns text, p_id text,
    p_parent text, p_metadata json, p_body_type text, p_body bytea,
    p_log_length bigint, p_channels text[], p_versions text[], p_types text[],
    p_values bytea[], p_at timestamptz, p_ttl interval) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    IF @S.sealed_range(p_thread, p_ns, @S.id_pack(p_id))
       OR (p_parent IS NOT NULL AND @S.sealed_range(p_thread, p_ns, @S.id_pack(p_parent))) THEN
        PERFORM @S.segments_none(p_thread, NULL);
    END IF;
    PERFORM @S.checkpoint_put_rows(p_thread, p_ns, p_id, p_parent, p_metadata, p_body_type,
        p_body, p_log_length, p_channels, p_versions, p_types, p_values, p_at, p_ttl);
END
$fn$;

-- migrate-30.sql's checkpoint_put_writes(), the same but for its last lines: a
-- checkpoint that is no row but in a segment's range is CV042 (unsealed by
-- the driver, then written), not CV404. A write that comes before its
-- checkpoint's put (LangGraph's loop does not wait) stays CV404 with no more
-- work than a look-up of the segment before it.
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
    added bytea[];
BEGIN
    -- a key-share lock: a concurrent delete or prune either ran first (and the
    -- checkpoint is gone) or waits for these writes and sees them
    v_tid := @S.thread_live(p_thread, p_ttl, true);
    IF v_tid IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'CV404', MESSAGE = 'checkpoint not found';
    END IF;
    names := @S.name_nums(coalesce(p_channels, '{}') || coalesce(p_types, '{}') || p_path);
    added := ARRAY(SELECT @S.write_pack(u.i, names[2 * n + 1], names[u.o], names[n + u.o],
                                        v_task, u.b)
                     FROM unnest(p_idx, p_values) WITH ORDINALITY AS u(i, b, o));
    -- READ COMMITTED: a write that waited for another's row lock evaluates this
    -- against the row that one committed
    UPDATE @S.checkpoints c SET writes = CASE
        WHEN c.writes IS NULL THEN added
        WHEN NOT (v_task = ANY (SELECT o.task_id FROM unnest(c.writes) AS e,
                                       @S.write_fields(e) AS o))
        THEN c.writes || added
        ELSE ARRAY(
            SELECT e FROM unnest(c.writes) AS e, @S.write_fields(e) AS o
             WHERE o.task_id <> v_task OR o.idx >= 0 OR NOT (o.idx = ANY (p_idx))
            UNION ALL
            SELECT a FROM unnest(added) AS a, @S.write_fields(a) AS f
             WHERE f.idx < 0 OR NOT EXISTS (
                   SELECT 1 FROM unnest(c.writes) AS e, @S.write_fields(e) AS o
                    WHERE o.task_id = v_task AND o.idx = f.idx)) END
     WHERE c.tid = v_tid AND c.checkpoint_ns = p_ns AND c.checkpoint_id = v_id
       AND (c.tid, c.checkpoint_ns, c.checkpoint_id) <= (v_tid, p_ns, v_id);
    IF NOT FOUND THEN
        -- (v42) a sealed checkpoint: the driver unseals the thread and writes again
        IF @S.sealed_range(p_thread, p_ns, v_id) THEN
            PERFORM @S.segments_none(p_thread, NULL);
        END IF;
        RAISE EXCEPTION USING ERRCODE = 'CV404', MESSAGE = 'checkpoint not found';
    END IF;
END
$fn$;
