-- migrate-31.sql: schema version 31 — a put's input value in its row too
-- (issue 24). With version 29 a LangGraph input checkpoint's __start__ value,
-- the user's message before the next put moves it into the log (about 300
-- bytes), went to checkpoint_blobs (over 255), and the swap that turned it
-- into a 21-byte reference left that row and its key entry there: 1,002 of a
-- 1,000-turn run's values, about 90 bytes a checkpoint. Now vals has lengths
-- of 2 bytes behind a first byte 2 (versions 29-30's form, lengths of 1 byte,
-- is still read); a value the put brings is inline up to 1,024 bytes; a
-- value a put copies from its parent stays inline up to 255 bytes, and a
-- larger one goes to checkpoint_blobs then (so a large value kept unchanged
-- is in at most two places, not in every row); and checkpoint_put_refs runs
-- its swaps before the put, under the thread's row lock, so the put copies
-- its parent's input as the reference it has just become.
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).

-- version 29's channel_vals, reading both forms of vals: version 31's (a
-- first byte 2, lengths of 2 bytes) and versions 29-30's (lengths of 1 byte;
-- its first byte is the first type number's highest, 0: names are numbered
-- from 1 and never reach 2^24)
CREATE OR REPLACE FUNCTION @S.channel_vals(p_set integer, p_versions bytea, p_vals bytea,
    OUT ch integer, OUT ver bytea, OUT type integer, OUT value bytea)
RETURNS SETOF record
LANGUAGE sql STABLE AS $fn$
    SELECT x.ch,
           CASE WHEN x.w IN (1, 4) AND 1 + x.w * x.n + x.total = octet_length(p_versions)
                THEN substring(p_versions FROM x.start + 1 FOR x.len)
                ELSE int4send(get_byte(p_versions, -1)) END,
           CASE WHEN p_vals IS NULL OR x.t = 0 THEN NULL ELSE x.t END,
           CASE WHEN p_vals IS NULL THEN NULL
                WHEN x.h + (4 + x.lw) * x.n + x.vtotal <> octet_length(p_vals) OR x.t < 0
                     OR (x.t = 0 AND x.vlen <> 0)
                THEN int4send(get_byte(p_vals, -1))
                WHEN x.t = 0 THEN NULL
                ELSE substring(p_vals FROM x.vstart + 1 FOR x.vlen) END
      FROM (SELECT l.ch, l.o, l.len, l.w, l.n, l.t, l.vlen, l.h, l.lw,
                   sum(l.len) OVER () AS total,
                   (1 + l.w * l.n + sum(l.len) OVER (ORDER BY l.o) - l.len)::int AS start,
                   sum(l.vlen) OVER () AS vtotal,
                   (l.h + (4 + l.lw) * l.n + sum(l.vlen) OVER (ORDER BY l.o) - l.vlen)::int
                       AS vstart
              FROM (SELECT u.ch, u.o, w, f.h, f.lw, cardinality(s.channels) AS n,
                           CASE w WHEN 1 THEN get_byte(p_versions, u.o::int)
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
                           (SELECT CASE WHEN octet_length(p_vals) > 0
                                         AND get_byte(p_vals, 0) = 2 THEN 1 ELSE 0 END AS h,
                                   CASE WHEN octet_length(p_vals) > 0
                                         AND get_byte(p_vals, 0) = 2 THEN 2 ELSE 1 END AS lw)
                           AS f,
                           unnest(s.channels) WITH ORDINALITY AS u(ch, o)
                     WHERE s.num = p_set) l) x
     ORDER BY x.o
$fn$;

-- version 29's vals_swap, in version 31's form: a row's vals with the value
-- of (channel, version) swapped from the old one to the new (a new value over
-- 1,024 bytes, or a type without a number: NULL);
-- NULL when the row does not hold exactly the old one inline
CREATE OR REPLACE FUNCTION @S.vals_swap(p_set integer, p_versions bytea, p_vals bytea, p_ch integer,
    p_ver bytea, p_old_type integer, p_old bytea, p_new_type integer, p_new bytea)
RETURNS bytea
LANGUAGE sql STABLE AS $fn$
    SELECT CASE WHEN bool_or(u.ch = p_ch AND u.ver = p_ver AND u.type = p_old_type
                             AND u.value = p_old)
                     AND p_new_type IS NOT NULL AND octet_length(p_new) <= 1024
           THEN '\x02'::bytea
                || string_agg(int4send(coalesce(x.type, 0)), ''::bytea ORDER BY x.o)
                || string_agg(substring(int4send(coalesce(octet_length(x.value), 0)) FROM 3),
                              ''::bytea ORDER BY x.o)
                || coalesce(string_agg(x.value, ''::bytea ORDER BY x.o), ''::bytea) END
      FROM @S.channel_vals(p_set, p_versions, p_vals) WITH ORDINALITY AS u(ch, ver, type,
           value, o)
     CROSS JOIN LATERAL (SELECT u.o,
               CASE WHEN u.ch = p_ch AND u.ver = p_ver THEN p_new_type ELSE u.type END,
               CASE WHEN u.ch = p_ch AND u.ver = p_ver THEN p_new ELSE u.value END) AS x(o,
           type, value)
$fn$;

-- version 25's checkpoint_put: a value of at most 255 bytes in vals, one the
-- put does not bring copied from the parent's row
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
                       array_agg(u.value ORDER BY u.o)
                  INTO par_ch, par_ver, par_type, par_val
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
        END IF;
        IF t IS NULL AND p_types[i] IS NULL AND NOT EXISTS (
               SELECT 1 FROM @S.checkpoint_blobs x WHERE x.tid = v_tid
                  AND x.checkpoint_ns = p_ns AND x.channel = names[i] AND x.version = v) THEN
            -- not its parent's (a put naming another parent, or none): one of
            -- the namespace's 16 newest checkpoints holding it inline; a
            -- version in none of them is taken as empty (the scan is bounded:
            -- a LangGraph channel at a new version without a value is empty,
            -- and every put lists it)
            SELECT u.type, u.value INTO t, b
              FROM (SELECT k.channel_set, k.versions, k.vals FROM @S.checkpoints k
                     WHERE k.tid = v_tid AND k.checkpoint_ns = p_ns
                     ORDER BY k.put_seq DESC LIMIT 16) k,
                   @S.channel_vals(k.channel_set, k.versions, k.vals) AS u
             WHERE k.vals IS NOT NULL AND position(v IN k.versions) > 0
               AND u.ch = names[i] AND u.ver = v AND u.type IS NOT NULL
             LIMIT 1;
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
        v_parent, p_metadata, joined, p_body, '\x02'::bytea || vtypes || vlens || vdata)
    ON CONFLICT (tid, checkpoint_ns, checkpoint_id) DO UPDATE SET
        parent_id = excluded.parent_id, metadata = excluded.metadata,
        body_type = excluded.body_type, body = excluded.body,
        log_length = excluded.log_length, channel_set = excluded.channel_set,
        versions = excluded.versions, vals = excluded.vals;
END
$fn$;

-- version 30's checkpoint_put_refs: the swaps before the put, under the
-- thread's row lock, so that the put copies the values as swapped
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
    n integer := coalesce(cardinality(p_sw_ids), 0);
    names integer[];
BEGIN
    IF n > 0 THEN
        -- the thread's row lock first (the put's claim takes it again), then
        -- the swaps: the put below copies its parent's values as swapped
        SELECT t.tid INTO v_tid FROM @S.threads t
         WHERE t.thread_id = p_thread AND (t.expires_at IS NULL OR t.expires_at > now())
           FOR NO KEY UPDATE;
    END IF;
    IF v_tid IS NOT NULL THEN
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
                 WHERE k.tid = v_tid AND k.checkpoint_ns = p_ns AND k.checkpoint_id = v_id
                   AND (k.tid, k.checkpoint_ns, k.checkpoint_id)
                       <= (v_tid, p_ns, v_id)
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
    END IF;
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
END
$fn$;
