-- migrate-36.sql: schema version 36 — a checkpoint's metadata with
-- LangGraph's usual keys as one byte each (issue 24 bytes). Version 23 kept
-- the compact JSON text put: 43 bytes of a LangGraph loop checkpoint's
-- {"source":"loop","step":N,"parents":{}}, and with DeltaChannel about 126
-- ("delta_writes_versioned":true and "counters_since_delta_snapshot":
-- {"messages":[a,b]} besides). Now checkpoints.metadata is text: the compact
-- JSON with each of ten fixed fragments (meta_pack() lists them, in the order
-- they are tried) replaced by one control byte (0x01-0x08, 0x0b, 0x0c) that compact JSON
-- never holds (a control character in a JSON string is escaped as \uXXXX);
-- meta_text() puts them back, which every read and the metadata filter do
-- (meta_text(metadata)::jsonb @> filter). A text that holds such a byte
-- anyway (a json value put by hand, with a raw tab or newline between its
-- tokens) is kept as it is behind a first byte 0x1f. The rows stored before
-- are JSON text without those bytes: they read back as they are, and the
-- column changes type in place (json to text, a rewrite of the table, once).
-- Full: 43 -> 11 bytes; DeltaChannel: 126 -> 26.
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).

-- the compact JSON text a put gives, with the fragments as their bytes
CREATE FUNCTION @S.meta_pack(p json) RETURNS text
LANGUAGE sql IMMUTABLE AS $fn$
    SELECT CASE WHEN p::text ~ '[\x01-\x1f]' THEN E'\x1f' || p::text ELSE
        replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(
            p::text,
            '"counters_since_delta_snapshot":{"messages":[', E'\x01'),
            '"counters_since_delta_snapshot":', E'\x02'),
            '"delta_writes_versioned":true', E'\x03'),
            '"parents":{}', E'\x04'),
            '"parents":', E'\x05'),
            '"source":"loop"', E'\x06'),
            '"source":"input"', E'\x07'),
            '"source":"update"', E'\x08'),
            '"source":"fork"', E'\x0b'),
            '"step":', E'\x0c') END
$fn$;

-- the text a row keeps, back as the JSON text put
CREATE FUNCTION @S.meta_text(p text) RETURNS text
LANGUAGE sql IMMUTABLE AS $fn$
    SELECT CASE WHEN left(p, 1) = E'\x1f' THEN substring(p FROM 2) ELSE
        replace(replace(replace(replace(replace(replace(replace(replace(replace(replace(
            p,
            E'\x01', '"counters_since_delta_snapshot":{"messages":['),
            E'\x02', '"counters_since_delta_snapshot":'),
            E'\x03', '"delta_writes_versioned":true'),
            E'\x04', '"parents":{}'),
            E'\x05', '"parents":'),
            E'\x06', '"source":"loop"'),
            E'\x07', '"source":"input"'),
            E'\x08', '"source":"update"'),
            E'\x0b', '"source":"fork"'),
            E'\x0c', '"step":') END
$fn$;

-- the list's filter: meta_text() as jsonb, costed like version 35's cast
-- (a plpgsql function is not inlined: the planner takes COST 1, not the ten
-- replace() calls, and keeps its backward scan of checkpoints_by_ns_put that
-- stops at the page's limit instead of sorting the thread's checkpoints)
CREATE FUNCTION @S.meta_jsonb(p text) RETURNS jsonb
LANGUAGE plpgsql IMMUTABLE COST 1 AS $fn$
BEGIN
    RETURN @S.meta_text(p)::jsonb;
END
$fn$;

ALTER TABLE @S.checkpoints ALTER COLUMN metadata TYPE text USING metadata::text;

-- version 34's checkpoint_put: the metadata packed
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
    vtypes bytea := '';
    vlens bytea := '';
    vdata bytea := '';
    t integer;
    b bytea;
    blobs integer[] := '{}';
    v_parent bytea := @S.id_pack(p_parent);
    parent_read boolean := false;
    par_ch integer[];
    par_ver bytea[];
    par_type integer[];
    par_val bytea[];
    par_seq bigint;
BEGIN
    -- the thread's row lock keeps prune and delete out; the position is taken
    -- under it, so a later put of the same thread always gets a higher one
    SELECT c.tid INTO v_tid FROM @S.thread_claim(p_thread, p_ttl, p_at) c;
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
        t := NULL;
        b := NULL;
        IF p_types[i] IS NOT NULL THEN
            IF octet_length(p_values[i]) <= 1024 THEN
                t := names[n + i];
                b := p_values[i];
            ELSE
                blobs := blobs || i;
            END IF;
        ELSE
            IF NOT parent_read THEN
                -- the parent's list, once: (channel, version, type or 0, value)
                SELECT array_agg(u.ch ORDER BY u.o), array_agg(u.ver ORDER BY u.o),
                       array_agg(coalesce(u.type, 0) ORDER BY u.o),
                       array_agg(u.value ORDER BY u.o), max(k.put_seq)
                  INTO par_ch, par_ver, par_type, par_val, par_seq
                  FROM @S.checkpoints k,
                       @S.channel_vals(k.channel_set, k.versions, k.vals)
                       WITH ORDINALITY AS u(ch, ver, type, value, o)
                 WHERE v_parent IS NOT NULL AND k.tid = v_tid AND k.checkpoint_ns = p_ns
                   AND k.checkpoint_id = v_parent
                   AND (k.tid, k.checkpoint_ns, k.checkpoint_id) <= (v_tid, p_ns, v_parent);
                parent_read := true;
            END IF;
            -- the parent's value when it lists this version (inline or not)
            FOR j IN 1 .. coalesce(cardinality(par_ch), 0) LOOP
                IF par_ch[j] = names[i] AND par_ver[j] = v THEN
                    t := par_type[j];
                    b := par_val[j];
                    EXIT;
                END IF;
            END LOOP;
            IF t IS NULL THEN
                -- (v34) a version the parent does not list: a row put after the
                -- parent may hold it (a sibling: LangGraph's '__copy__' puts a
                -- saved checkpoint again as a child of the saved one's parent),
                -- or, without a parent or when it is gone, any row of the
                -- namespace. After a parent that is the newest row (every put of
                -- a run) the range is empty: one probe of checkpoints_by_ns_put.
                SELECT u.type, u.value INTO t, b
                  FROM @S.checkpoints k,
                       @S.channel_vals(k.channel_set, k.versions, k.vals)
                       AS u(ch, ver, type, value)
                 WHERE k.tid = v_tid AND k.checkpoint_ns = p_ns
                   AND k.put_seq > coalesce(par_seq, 0)
                   AND position(v IN k.versions) > 0
                   AND u.ch = names[i] AND u.ver = v AND u.type > 0
                 ORDER BY k.put_seq DESC
                 LIMIT 1;
            END IF;
        END IF;
        IF t > 0 AND p_types[i] IS NULL AND octet_length(b) > 255 THEN
            -- a copy over 255 bytes: shared in checkpoint_blobs, not copied on
            INSERT INTO @S.checkpoint_blobs (tid, channel, type, checkpoint_ns, version, value)
            VALUES (v_tid, names[i], t, p_ns, v, b)
            ON CONFLICT DO NOTHING;
            t := 0;
        END IF;
        IF t IS NULL OR t = 0 THEN
            vtypes := vtypes || '\x00000000'::bytea;
            vlens := vlens || '\x0000'::bytea;
        ELSE
            vtypes := vtypes || int4send(t);
            vlens := vlens || substring(int4send(octet_length(b)) FROM 3);
            vdata := vdata || b;
        END IF;
    END LOOP;
    IF longest <= 255 THEN
        joined := '\x01'::bytea || lens || joined;
    ELSE
        joined := '\x04'::bytea || wide || joined;
    END IF;
    IF cardinality(blobs) > 0 THEN
        INSERT INTO @S.checkpoint_blobs (tid, channel, type, checkpoint_ns, version, value)
        SELECT v_tid, names[i], names[n + i], p_ns, vers[i], p_values[i]
          FROM unnest(blobs) AS i
        ON CONFLICT DO NOTHING;
    END IF;
    INSERT INTO @S.checkpoints AS c (tid, put_seq, log_length, created_at, channel_set,
        body_type, checkpoint_ns, checkpoint_id, parent_id, metadata, versions, body, vals)
    VALUES (v_tid, nextval('@S.checkpoint_put_seq'), p_log_length, p_at,
        @S.channel_set(names[1:n]), names[2 * n + 1], p_ns, @S.id_pack(p_id),
        v_parent, @S.meta_pack(p_metadata), joined, p_body, '\x02'::bytea || vtypes || vlens || vdata)
    ON CONFLICT (tid, checkpoint_ns, checkpoint_id) DO UPDATE SET
        parent_id = excluded.parent_id, metadata = excluded.metadata,
        body_type = excluded.body_type, body = excluded.body,
        log_length = excluded.log_length, channel_set = excluded.channel_set,
        versions = excluded.versions, vals = excluded.vals;
END
$fn$;
