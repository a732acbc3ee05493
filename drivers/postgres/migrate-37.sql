-- migrate-37.sql: schema version 37 — a checkpoint's versions without the
-- repeats (issue 24 bytes). A LangGraph checkpoint lists its channels at the
-- version they last changed, and channels written by one step have the same
-- one: in a 1,000-turn chatbot run 1.3 of a row's 4 versions (16-17 bytes
-- each) equal the version of the channel before them in the channel set's
-- order. versions gains a third form, its first byte 2: each length in one
-- byte, 255 meaning "the version of the channel before" (whose bytes are not
-- repeated), then the other versions' bytes; a put uses it when some version
-- repeats the one before and none is over 254 bytes, forms 1 and 4 otherwise
-- (so a row without repeats is stored as version 36 stored it). Rows stored
-- before keep their form; channel_vals() and channel_list() read all three and
-- check the third against itself like the others (a first channel marked 255,
-- or lengths that do not fill the value: SQLSTATE 2202E, CONVO_ECORRUPT).
-- position(version IN versions), version 34's look-up filter, still holds:
-- a repeated version's bytes are in the row once. tests/postgres_repeats.c.
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).

-- version 28's channel_list, reading the third form
CREATE OR REPLACE FUNCTION @S.channel_list(p_set integer, p_versions bytea, OUT ch integer,
    OUT ver bytea)
RETURNS SETOF record
LANGUAGE sql STABLE AS $fn$
    SELECT y.ch,
           CASE WHEN y.w IN (1, 2, 4) AND 1 + y.vw * y.n + y.total = octet_length(p_versions)
                     AND y.lit > 0
                THEN substring(p_versions FROM y.lstart + 1 FOR y.llen)
                ELSE int4send(get_byte(p_versions, -1)) END
      FROM (SELECT x.*, first_value(x.start) OVER (PARTITION BY x.lit ORDER BY x.o) AS lstart,
                   first_value(x.len) OVER (PARTITION BY x.lit ORDER BY x.o) AS llen
              FROM (SELECT l.ch, l.o, l.len, l.w, l.vw, l.n, sum(l.len) OVER () AS total,
                           (1 + l.vw * l.n + sum(l.len) OVER (ORDER BY l.o) - l.len)::int AS start,
                           count(*) FILTER (WHERE NOT l.same) OVER (ORDER BY l.o) AS lit
                      FROM (SELECT u.ch, u.o, w, v.vw, cardinality(s.channels) AS n,
                                   w = 2 AND get_byte(p_versions, u.o::int) = 255 AS same,
                                   CASE WHEN w = 2 AND get_byte(p_versions, u.o::int) = 255 THEN 0
                                        WHEN w <> 4 THEN get_byte(p_versions, u.o::int)
                                        ELSE (get_byte(p_versions, 4 * u.o::int - 3) << 24)
                                             | (get_byte(p_versions, 4 * u.o::int - 2) << 16)
                                             | (get_byte(p_versions, 4 * u.o::int - 1) << 8)
                                             | get_byte(p_versions, 4 * u.o::int) END AS len
                              FROM @S.checkpoint_channel_sets s,
                                   get_byte(p_versions, 0) AS w,
                                   (SELECT CASE get_byte(p_versions, 0) WHEN 4 THEN 4 ELSE 1 END
                                           AS vw) AS v,
                                   unnest(s.channels) WITH ORDINALITY AS u(ch, o)
                             WHERE s.num = p_set) l) x) y
     ORDER BY y.o
$fn$;

-- version 31's channel_vals, reading the third form of versions
CREATE OR REPLACE FUNCTION @S.channel_vals(p_set integer, p_versions bytea, p_vals bytea,
    OUT ch integer, OUT ver bytea, OUT type integer, OUT value bytea)
RETURNS SETOF record
LANGUAGE sql STABLE AS $fn$
    SELECT y.ch,
           CASE WHEN y.w IN (1, 2, 4) AND 1 + y.vw * y.n + y.total = octet_length(p_versions)
                     AND y.lit > 0
                THEN substring(p_versions FROM y.lstart + 1 FOR y.llen)
                ELSE int4send(get_byte(p_versions, -1)) END,
           CASE WHEN p_vals IS NULL OR y.t = 0 THEN NULL ELSE y.t END,
           CASE WHEN p_vals IS NULL THEN NULL
                WHEN y.h + (4 + y.lw) * y.n + y.vtotal <> octet_length(p_vals) OR y.t < 0
                     OR (y.t = 0 AND y.vlen <> 0)
                THEN int4send(get_byte(p_vals, -1))
                WHEN y.t = 0 THEN NULL
                ELSE substring(p_vals FROM y.vstart + 1 FOR y.vlen) END
      FROM (SELECT x.*, first_value(x.start) OVER (PARTITION BY x.lit ORDER BY x.o) AS lstart,
                   first_value(x.len) OVER (PARTITION BY x.lit ORDER BY x.o) AS llen
              FROM (SELECT l.ch, l.o, l.len, l.w, l.vw, l.n, l.t, l.vlen, l.h, l.lw,
                           sum(l.len) OVER () AS total,
                           (1 + l.vw * l.n + sum(l.len) OVER (ORDER BY l.o) - l.len)::int AS start,
                           count(*) FILTER (WHERE NOT l.same) OVER (ORDER BY l.o) AS lit,
                           sum(l.vlen) OVER () AS vtotal,
                           (l.h + (4 + l.lw) * l.n + sum(l.vlen) OVER (ORDER BY l.o) - l.vlen)::int
                               AS vstart
                      FROM (SELECT u.ch, u.o, w, v.vw, f.h, f.lw, cardinality(s.channels) AS n,
                                   w = 2 AND get_byte(p_versions, u.o::int) = 255 AS same,
                                   CASE WHEN w = 2 AND get_byte(p_versions, u.o::int) = 255 THEN 0
                                        WHEN w <> 4 THEN get_byte(p_versions, u.o::int)
                                        ELSE (get_byte(p_versions, 4 * u.o::int - 3) << 24)
                                             | (get_byte(p_versions, 4 * u.o::int - 2) << 16)
                                             | (get_byte(p_versions, 4 * u.o::int - 1) << 8)
                                             | get_byte(p_versions, 4 * u.o::int) END AS len,
                                   CASE WHEN p_vals IS NULL THEN 0
                                        ELSE (get_byte(p_vals, f.h + 4 * u.o::int - 4) << 24)
                                             | (get_byte(p_vals, f.h + 4 * u.o::int - 3) << 16)
                                             | (get_byte(p_vals, f.h + 4 * u.o::int - 2) << 8)
                                             | get_byte(p_vals, f.h + 4 * u.o::int - 1) END AS t,
                                   CASE WHEN p_vals IS NULL THEN 0
                                        WHEN f.lw = 1
                                        THEN get_byte(p_vals, 4 * cardinality(s.channels)
                                                              + u.o::int - 1)
                                        ELSE (get_byte(p_vals, 1 + 4 * cardinality(s.channels)
                                                               + 2 * u.o::int - 2) << 8)
                                             | get_byte(p_vals, 1 + 4 * cardinality(s.channels)
                                                                + 2 * u.o::int - 1) END AS vlen
                              FROM @S.checkpoint_channel_sets s,
                                   get_byte(p_versions, 0) AS w,
                                   (SELECT CASE get_byte(p_versions, 0) WHEN 4 THEN 4 ELSE 1 END
                                           AS vw) AS v,
                                   (SELECT CASE WHEN octet_length(p_vals) > 0
                                                 AND get_byte(p_vals, 0) = 2 THEN 1 ELSE 0 END AS h,
                                           CASE WHEN octet_length(p_vals) > 0
                                                 AND get_byte(p_vals, 0) = 2 THEN 2 ELSE 1 END AS lw)
                                   AS f,
                                   unnest(s.channels) WITH ORDINALITY AS u(ch, o)
                             WHERE s.num = p_set) l) x) y
     ORDER BY y.o
$fn$;

-- version 36's checkpoint_put: a version equal to the one before it not repeated
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
    same bytea := '';
    literal bytea := '';
    dups integer := 0;
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
        -- (v37) a version equal to the channel's before: one byte 255, no bytes
        IF i > 1 AND v = vers[i - 1] THEN
            same := same || '\xff'::bytea;
            dups := dups + 1;
        ELSE
            same := same || set_byte('\x00'::bytea, 0, least(octet_length(v), 255));
            literal := literal || v;
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
    IF dups > 0 AND longest <= 254 THEN
        joined := '\x02'::bytea || same || literal;
    ELSIF longest <= 255 THEN
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
