-- migrate-35.sql: schema version 35 — a put's swaps update each row they
-- name once (issue 24 bytes). Version 31's checkpoint_put_refs ran one
-- UPDATE per swap: a LangGraph input checkpoint's row was updated twice by
-- its child's put (its pending write, then its __start__ input, each turned
-- into a log reference), and every update leaves the old version of the row
-- (here with the user's message, twice) as dead space on its page, which
-- PostgreSQL prunes only while the page is still read, and which inserts
-- reuse only while the page is still where they go. Now the rows the swaps
-- name are read once, locked (FOR NO KEY UPDATE: a concurrent put_writes to
-- one of them either committed first, and its write is read, or waits), every
-- swap is applied to that copy, and a row some swap changed is written back
-- by one UPDATE (writes, vals and log_length together). Same signature, same
-- effect: a swap changes a value only while it is exactly the old one; a
-- value over 1,024 bytes in checkpoint_blobs is swapped there and raises the
-- row's log_length with the rest. tests/postgres_swaps.c.
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).

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
    v_put bytea := @S.id_pack(p_id);
    n integer := coalesce(cardinality(p_sw_ids), 0);
    names integer[];
    ids bytea[];
    vers bytea[];
    tasks bytea[];
    r record;
    w bytea[];
    nw bytea[];
    vs bytea;
    nv bytea;
    lg bigint;
    changed boolean;
    top bytea;
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
        ids := ARRAY(SELECT @S.id_pack(x) FROM unnest(p_sw_ids) AS x);
        vers := ARRAY(SELECT @S.ver_pack(x) FROM unnest(p_sw_versions) AS x);
        tasks := ARRAY(SELECT @S.id_pack(x) FROM unnest(p_sw_tasks) AS x);
        top := (SELECT x FROM unnest(ids || v_put) AS x ORDER BY x DESC LIMIT 1);
        -- each row a swap names (a value swap also names the put's own row,
        -- when it is put again), once, locked, by its primary key
        FOR r IN SELECT k.checkpoint_id, k.channel_set, k.versions, k.vals, k.writes,
                        k.log_length
                   FROM @S.checkpoints k
                  WHERE k.tid = v_tid AND k.checkpoint_ns = p_ns
                    AND k.checkpoint_id = ANY (ids || v_put)
                    AND (k.tid, k.checkpoint_ns, k.checkpoint_id)
                        <= (v_tid, p_ns, top)
                  ORDER BY k.checkpoint_id
                    FOR NO KEY UPDATE OF k LOOP
            w := r.writes;
            vs := r.vals;
            lg := r.log_length;
            changed := false;
            FOR i IN 1 .. n LOOP
                IF tasks[i] IS NOT NULL THEN
                    CONTINUE WHEN r.checkpoint_id <> ids[i];
                    -- each value changes only while it is exactly the old one
                    nw := ARRAY(
                        SELECT CASE WHEN o.task_id = tasks[i] AND o.idx = p_sw_idx[i]
                                     AND o.type = names[i] AND o.value = p_sw_old[i]
                               THEN @S.write_pack(o.idx, o.task_path, o.channel,
                                                  names[n + i], o.task_id, p_sw_new[i])
                               ELSE x.e END
                          FROM unnest(w) WITH ORDINALITY AS x(e, ord),
                               @S.write_fields(x.e) AS o
                         ORDER BY x.ord);
                    IF EXISTS (SELECT 1 FROM unnest(w) AS e, @S.write_fields(e) AS o
                                WHERE o.task_id = tasks[i] AND o.idx = p_sw_idx[i]
                                  AND o.type = names[i] AND o.value = p_sw_old[i]) THEN
                        w := nw;
                        lg := greatest(lg, p_sw_log[i]);
                        changed := true;
                    END IF;
                ELSE
                    CONTINUE WHEN r.checkpoint_id <> ids[i] AND r.checkpoint_id <> v_put;
                    IF vs IS NOT NULL THEN
                        nv := @S.vals_swap(r.channel_set, r.versions, vs, names[2 * n + i],
                                           vers[i], names[i], p_sw_old[i], names[n + i],
                                           p_sw_new[i]);
                        IF nv IS NOT NULL THEN
                            vs := nv;
                            lg := greatest(lg, p_sw_log[i]);
                            changed := true;
                        END IF;
                    END IF;
                    IF r.checkpoint_id = ids[i] THEN
                        -- a value over 1,024 bytes: swapped where it is
                        UPDATE @S.checkpoint_blobs x SET type = names[n + i], value = p_sw_new[i]
                         WHERE x.tid = v_tid AND x.checkpoint_ns = p_ns
                           AND x.channel = names[2 * n + i] AND x.version = vers[i]
                           AND x.type = names[i] AND x.value = p_sw_old[i];
                        IF FOUND THEN
                            lg := greatest(lg, p_sw_log[i]);
                            changed := true;
                        END IF;
                    END IF;
                END IF;
            END LOOP;
            IF changed THEN
                -- one update of the row (log_length is in no index: HOT when the page has room)
                UPDATE @S.checkpoints k SET writes = w, vals = vs, log_length = lg
                 WHERE k.tid = v_tid AND k.checkpoint_ns = p_ns
                   AND k.checkpoint_id = r.checkpoint_id
                   AND (k.tid, k.checkpoint_ns, k.checkpoint_id)
                       <= (v_tid, p_ns, r.checkpoint_id);
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

