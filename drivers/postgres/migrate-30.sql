-- migrate-30.sql: schema version 30 — a checkpoint's pending writes as packed
-- elements (issue 24). Each element of version 24's pending_write[] was a
-- composite value with its own 24-byte tuple header and the idx padded to 8:
-- about 92 bytes a write of a LangGraph run (a 16-byte task id, a 12-byte
-- value). Now `writes` is a bytea[], each element write_pack(): the idx (8
-- bytes), the task path, channel and type numbers (4 each), the task id's
-- length (4), the task id and the value: 24 bytes and the two. write_fields()
-- reads one back and raises SQLSTATE 2202E (CONVO_ECORRUPT) on an element
-- shorter than its own header and lengths; a NULL element reads as NULL
-- fields (CONVO_ECORRUPT, as a NULL field of version 24's). The existing
-- arrays are converted in place; the type pending_write is dropped.
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).

CREATE FUNCTION @S.write_pack(p_idx bigint, p_path integer, p_channel integer,
    p_type integer, p_task bytea, p_value bytea) RETURNS bytea
LANGUAGE sql IMMUTABLE AS $fn$
    SELECT int8send(p_idx) || int4send(p_path) || int4send(p_channel) || int4send(p_type)
           || int4send(octet_length(p_task)) || p_task || p_value
$fn$;

-- one element's fields; an element too short for its header or its task id
-- reads get_byte(p, -1), which raises
CREATE FUNCTION @S.write_fields(p bytea, OUT idx bigint, OUT task_path integer,
    OUT channel integer, OUT type integer, OUT task_id bytea, OUT value bytea)
LANGUAGE sql IMMUTABLE AS $fn$
    SELECT ('x' || encode(substring(p FROM 1 FOR 8), 'hex'))::bit(64)::bigint,
           ('x' || encode(substring(p FROM 9 FOR 4), 'hex'))::bit(32)::integer,
           ('x' || encode(substring(p FROM 13 FOR 4), 'hex'))::bit(32)::integer,
           ('x' || encode(substring(p FROM 17 FOR 4), 'hex'))::bit(32)::integer,
           substring(p FROM 25 FOR x.tlen),
           substring(p FROM 25 + x.tlen)
      FROM (SELECT CASE WHEN octet_length(p) >= 24 AND t.len >= 0
                             AND 24 + t.len <= octet_length(p)
                        THEN t.len ELSE get_byte(p, -1) END AS tlen
              FROM (SELECT ('x' || encode(substring(p FROM 21 FOR 4), 'hex'))::bit(32)::integer
                           AS len) t) x
$fn$;

CREATE FUNCTION @S.writes_packed(p @S.pending_write[]) RETURNS bytea[]
LANGUAGE sql IMMUTABLE AS $fn$
    SELECT CASE WHEN p IS NOT NULL THEN ARRAY(
        SELECT @S.write_pack(w.idx, w.task_path, w.channel, w.type, w.task_id, w.value)
          FROM unnest(p) WITH ORDINALITY AS w(idx, task_path, channel, type, task_id,
               value, o)
         ORDER BY w.o) END
$fn$;

ALTER TABLE @S.checkpoints ALTER COLUMN writes TYPE bytea[] USING @S.writes_packed(writes);
DROP FUNCTION @S.writes_packed(@S.pending_write[]);
DROP TYPE @S.pending_write;

-- version 27's checkpoint_put_writes: packed elements
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
        RAISE EXCEPTION USING ERRCODE = 'CV404', MESSAGE = 'checkpoint not found';
    END IF;
END
$fn$;

-- version 29's checkpoint_put_refs: packed write elements
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
    v_ver bytea;
    v_put bytea := @S.id_pack(p_id);
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
                           THEN @S.write_pack(o.idx, o.task_path, o.channel, names[n + i],
                                              o.task_id, p_sw_new[i])
                           ELSE x.e END
                      FROM unnest(k.writes) WITH ORDINALITY AS x(e, ord),
                           @S.write_fields(x.e) AS o
                     ORDER BY x.ord)
             WHERE k.tid = v_tid AND k.checkpoint_ns = p_ns AND k.checkpoint_id = v_id
               AND (k.tid, k.checkpoint_ns, k.checkpoint_id) <= (v_tid, p_ns, v_id)
               AND EXISTS (SELECT 1 FROM unnest(k.writes) AS e, @S.write_fields(e) AS o
                            WHERE o.task_id = v_task AND o.idx = p_sw_idx[i]
                              AND o.type = names[i] AND o.value = p_sw_old[i]);
        ELSE
            v_ver := @S.ver_pack(p_sw_versions[i]);
            UPDATE @S.checkpoints k SET log_length = greatest(k.log_length, p_sw_log[i]),
                vals = @S.vals_swap(k.channel_set, k.versions, k.vals, names[2 * n + i],
                                    v_ver, names[i], p_sw_old[i], names[n + i], p_sw_new[i])
             WHERE k.tid = v_tid AND k.checkpoint_ns = p_ns AND k.checkpoint_id IN (v_id, v_put)
               AND (k.tid, k.checkpoint_ns, k.checkpoint_id)
                   <= (v_tid, p_ns, greatest(v_id, v_put))
               AND k.vals IS NOT NULL
               AND @S.vals_swap(k.channel_set, k.versions, k.vals, names[2 * n + i], v_ver,
                                names[i], p_sw_old[i], names[n + i], p_sw_new[i]) IS NOT NULL;
            UPDATE @S.checkpoint_blobs x SET type = names[n + i], value = p_sw_new[i]
             WHERE x.tid = v_tid AND x.checkpoint_ns = p_ns AND x.channel = names[2 * n + i]
               AND x.version = v_ver
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
