-- migrate-23.sql: schema version 23 — a checkpoint's versions in one bytea
-- and its metadata as the json text it was put as (issue 24, after 18-22).
-- A bytea[] of four versions cost 24 bytes of array header and 4 of length a
-- version (106 bytes for a LangGraph checkpoint); ver_join() writes them as one
-- value: the width of a length (1, or 4 when one is over 255 bytes), each
-- version's length, then the versions, in the channel set's order (71 bytes).
-- Metadata as jsonb cost about 1.4 times its compact text (66 bytes for 46;
-- LangGraph's DeltaChannel metadata 181); the filter casts a row's text to
-- jsonb when it tests it (`metadata::jsonb @> filter`), which only a filtered
-- list does. checkpoint_put, checkpoint_put_log and checkpoint_put_refs take
-- the metadata as json (the statements pass the client's compact text).
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).

-- Versions in their stored forms (ver_pack), none NULL, as one value.
CREATE FUNCTION @S.ver_join(p bytea[]) RETURNS bytea
LANGUAGE sql IMMUTABLE AS $fn$
SELECT CASE WHEN coalesce(max(octet_length(u.v)), 0) <= 255
            THEN '\x01'::bytea
                 || coalesce(string_agg(set_byte('\x00'::bytea, 0, octet_length(u.v)),
                                        ''::bytea ORDER BY u.o), ''::bytea)
            ELSE '\x04'::bytea
                 || string_agg(int4send(octet_length(u.v)), ''::bytea ORDER BY u.o) END
       || coalesce(string_agg(u.v, ''::bytea ORDER BY u.o), ''::bytea)
  FROM unnest(p) WITH ORDINALITY AS u(v, o)
$fn$;

-- The (channel, version) pairs of a checkpoint in their stored forms, in its
-- set's order (the values' key). One SQL query: the planner inlines it.
CREATE FUNCTION @S.channel_list(p_set integer, p_versions bytea, OUT ch integer,
    OUT ver bytea)
RETURNS SETOF record
LANGUAGE sql STABLE AS $fn$
    SELECT x.ch, substring(p_versions FROM x.start + 1 FOR x.len)
      FROM (SELECT l.ch, l.len,
                   (1 + l.w * l.n + sum(l.len) OVER (ORDER BY l.o) - l.len)::int AS start
              FROM (SELECT s.channels[o] AS ch, o, w, cardinality(s.channels) AS n,
                           CASE w WHEN 1 THEN get_byte(p_versions, o)
                                  ELSE (get_byte(p_versions, 4 * o - 3) << 24)
                                       | (get_byte(p_versions, 4 * o - 2) << 16)
                                       | (get_byte(p_versions, 4 * o - 1) << 8)
                                       | get_byte(p_versions, 4 * o) END AS len
                      FROM @S.checkpoint_channel_sets s,
                           get_byte(p_versions, 0) AS w,
                           generate_series(1, cardinality(s.channels)) AS o
                     WHERE s.num = p_set) l) x
     ORDER BY x.start
$fn$;

ALTER TABLE @S.checkpoints
    ALTER COLUMN versions TYPE bytea USING @S.ver_join(versions),
    ALTER COLUMN metadata TYPE json USING metadata::text::json;

DROP FUNCTION @S.channel_list(integer, bytea[]);
DROP FUNCTION @S.checkpoint_put_refs(text, text, text, text, jsonb, text, bytea, bigint,
    text[], text[], text[], bytea[], bytea[], text[], bigint, bigint, timestamptz,
    interval, text[], text[], bigint[], text[], text[], text[], bytea[], text[], bytea[],
    bigint[]);
DROP FUNCTION @S.checkpoint_put_log(text, text, text, text, jsonb, text, bytea, bigint,
    text[], text[], text[], bytea[], bytea[], text[], bigint, bigint, timestamptz,
    interval);
DROP FUNCTION @S.checkpoint_put(text, text, text, text, jsonb, text, bytea, bigint,
    text[], text[], text[], bytea[], timestamptz, interval);

-- version 19's checkpoint_put: the metadata as json, the versions joined
CREATE FUNCTION @S.checkpoint_put(p_thread text, p_ns text, p_id text,
    p_parent text, p_metadata json, p_body_type text, p_body bytea,
    p_log_length bigint, p_channels text[], p_versions text[], p_types text[],
    p_values bytea[], p_at timestamptz, p_ttl interval) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    v_tid bigint;
    names integer[] := @S.name_nums(coalesce(p_channels, '{}') || p_types || p_body_type);
    n integer := coalesce(cardinality(p_channels), 0);
    vers bytea[] := '{}';
BEGIN
    FOR i IN 1 .. n LOOP
        vers := vers || @S.ver_pack(p_versions[i]);
    END LOOP;
    IF array_position(vers, NULL) IS NOT NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'CV400', MESSAGE = 'a channel without a version';
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
        @S.id_pack(p_parent), p_metadata, @S.ver_join(vers), p_body)
    ON CONFLICT (tid, checkpoint_ns, checkpoint_id) DO UPDATE SET
        parent_id = excluded.parent_id, metadata = excluded.metadata,
        body_type = excluded.body_type, body = excluded.body,
        log_length = excluded.log_length, channel_set = excluded.channel_set,
        versions = excluded.versions;
END
$fn$;

-- version 8's checkpoint_put_log: the metadata as json
CREATE FUNCTION @S.checkpoint_put_log(p_thread text, p_ns text, p_id text,
    p_parent text, p_metadata json, p_body_type text, p_body bytea,
    p_log_length bigint, p_channels text[], p_versions text[], p_types text[],
    p_values bytea[], p_bodies bytea[], p_roles text[], p_expected bigint,
    p_generation bigint, p_at timestamptz, p_ttl interval) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM @S.append(p_thread, p_bodies, p_roles, p_at, NULL, p_expected, p_generation,
        p_ttl);
    PERFORM @S.checkpoint_put(p_thread, p_ns, p_id, p_parent, p_metadata, p_body_type,
        p_body, p_log_length, p_channels, p_versions, p_types, p_values, p_at, p_ttl);
END
$fn$;

-- version 19's checkpoint_put_refs: the metadata as json
CREATE FUNCTION @S.checkpoint_put_refs(p_thread text, p_ns text, p_id text,
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
            UPDATE @S.checkpoint_writes x SET type = names[n + i], value = p_sw_new[i]
             WHERE x.tid = v_tid AND x.checkpoint_ns = p_ns AND x.checkpoint_id = v_id
               AND x.task_id = @S.id_pack(p_sw_tasks[i]) AND x.idx = p_sw_idx[i]
               AND x.type = names[i] AND x.value = p_sw_old[i];
        ELSE
            UPDATE @S.checkpoint_blobs x SET type = names[n + i], value = p_sw_new[i]
             WHERE x.tid = v_tid AND x.checkpoint_ns = p_ns AND x.channel = names[2 * n + i]
               AND x.version = @S.ver_pack(p_sw_versions[i])
               AND x.type = names[i] AND x.value = p_sw_old[i]
               AND EXISTS (SELECT 1 FROM @S.checkpoints k WHERE k.tid = v_tid
                             AND k.checkpoint_ns = p_ns AND k.checkpoint_id = v_id);
        END IF;
        IF FOUND THEN
            UPDATE @S.checkpoints k SET log_length = p_sw_log[i]
             WHERE k.tid = v_tid AND k.checkpoint_ns = p_ns AND k.checkpoint_id = v_id
               AND k.log_length < p_sw_log[i];
        END IF;
    END LOOP;
END
$fn$;
