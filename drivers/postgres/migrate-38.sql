-- migrate-38.sql: schema version 38 — a put's look-up of a version its
-- parent does not list, bounded (issue 24). Since version 34 such a version
-- was searched for in every row put after the parent (without a parent, or
-- when it is gone, in every row of the namespace) until a row held a value for
-- it: a put listing a version every row lists without a value (or one nobody
-- stored) decoded or read the whole namespace, O(rows) a put (~233 M server
-- instructions a put+write at 1,000 rows, growing). Now: the parent's
-- position is read with its row, not from its channels (a parent listing no
-- channel no longer opens the whole namespace); the rows after the parent are
-- read oldest first, those of a put without a parent newest first, at most
-- 64, and the first row listing the version answers, with its value or
-- without one. Narrower, documented in docs/postgres.md (schema 38): a
-- version held only by a row further than 64 rows away, or behind a nearer
-- row listing it without a value, reads back without a value. LangGraph's
-- puts never ask for either: a run's parent is the newest row (the range is
-- empty) and the sibling a '__copy__' put looks for is its parent's child. Only
-- checkpoint_put changes; no row does. tests/postgres_lookup.c.
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).

-- version 37's checkpoint_put with the look-up bounded
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
    par_found boolean := false;
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
                -- (v38) and its position read apart: a parent listing no
                -- channel still bounds the search below to the rows after it
                SELECT k.put_seq, l.ch, l.ver, l.type, l.value
                  INTO par_seq, par_ch, par_ver, par_type, par_val
                  FROM @S.checkpoints k,
                       LATERAL (SELECT array_agg(u.ch ORDER BY u.o) AS ch,
                                       array_agg(u.ver ORDER BY u.o) AS ver,
                                       array_agg(coalesce(u.type, 0) ORDER BY u.o) AS type,
                                       array_agg(u.value ORDER BY u.o) AS value
                                  FROM @S.channel_vals(k.channel_set, k.versions, k.vals)
                                       WITH ORDINALITY AS u(ch, ver, type, value, o)) l
                 WHERE v_parent IS NOT NULL AND k.tid = v_tid AND k.checkpoint_ns = p_ns
                   AND k.checkpoint_id = v_parent
                   AND (k.tid, k.checkpoint_ns, k.checkpoint_id) <= (v_tid, p_ns, v_parent);
                par_found := FOUND;
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
            IF t IS NULL AND par_found THEN
                -- (v34) a version the parent does not list: a row put after the
                -- parent may hold it (a sibling: LangGraph's '__copy__' puts a
                -- saved checkpoint again as a child of the saved one's parent).
                -- (v38) bounded: the rows after the parent oldest first (the
                -- sibling is the parent's child), at most 64 of them, and the
                -- first row listing the version answers, with its value or
                -- without one. After a parent that is the newest row (every put
                -- of a run) the range is empty: one probe of checkpoints_by_ns_put.
                SELECT u.type, u.value INTO t, b
                  FROM (SELECT k.put_seq, k.channel_set, k.versions, k.vals
                          FROM @S.checkpoints k
                         WHERE k.tid = v_tid AND k.checkpoint_ns = p_ns
                           AND k.put_seq > par_seq
                         ORDER BY k.put_seq
                         LIMIT 64) k,
                       @S.channel_vals(k.channel_set, k.versions, k.vals)
                       AS u(ch, ver, type, value)
                 WHERE position(v IN k.versions) > 0 AND u.ch = names[i] AND u.ver = v
                 ORDER BY k.put_seq
                 LIMIT 1;
            ELSIF t IS NULL THEN
                -- (v38) without a parent, or when it is gone: the namespace's
                -- newest 64 rows, newest first, the first listing the version
                -- answering (schema 34 to 37 read every row)
                SELECT u.type, u.value INTO t, b
                  FROM (SELECT k.put_seq, k.channel_set, k.versions, k.vals
                          FROM @S.checkpoints k
                         WHERE k.tid = v_tid AND k.checkpoint_ns = p_ns
                         ORDER BY k.put_seq DESC
                         LIMIT 64) k,
                       @S.channel_vals(k.channel_set, k.versions, k.vals)
                       AS u(ch, ver, type, value)
                 WHERE position(v IN k.versions) > 0 AND u.ch = names[i] AND u.ver = v
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
