-- migrate-41.sql: schema version 41 — channel_vals_proc(), channel_vals()
-- written as PL/pgSQL for the statements that read one checkpoint
-- (checkpoint_latest.sql, checkpoint_get.sql; issue 28). channel_vals() is SQL
-- that the planner inlines: its window functions and levels are planned again in
-- every statement that calls it, in every new connection (a fresh process's
-- get_state plans it twice: latest, then the snapshot's get). A PL/pgSQL
-- function is compiled once per connection and its expressions' plans are kept
-- there, so the second statement reuses them: a fresh get_state's statements
-- cost a new backend 6.3 M fewer instructions of 76.2 M (docs/performance.md,
-- "A fresh get_state on PostgreSQL: cold plans"). It reads the same forms
-- (versions: migrate-37.sql's 1, 2, 4; vals: migrate-31.sql's 1, 2) and raises
-- where channel_vals() does, with get_byte(.., -1) (SQLSTATE 2202E: the driver's
-- CONVO_ECORRUPT): lengths that do not fill versions or vals, a first channel
-- marked 255 (a repeat of nothing), a negative type, a length on a channel
-- without a value, a read past either's end. The listings keep channel_vals():
-- called once per row of a page, its per-call cost and its planner estimate
-- (1,000 rows a call here) would cost more than the plan (a page of 149
-- checkpoints took 34 times the instructions). tests/postgres_cold.c.
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).
CREATE FUNCTION @S.channel_vals_proc(p_set integer, p_versions bytea, p_vals bytea,
    OUT ch integer, OUT ver bytea, OUT type integer, OUT value bytea)
RETURNS SETOF record
LANGUAGE plpgsql STABLE ROWS 8 AS $fn$
DECLARE
    chs integer[]; n integer; w integer; vw integer; h integer := 0; lw integer := 1;
    lens bigint[]; same boolean[]; ts integer[]; vlens integer[];
    total bigint := 0; vtotal bigint := 0; pos bigint; vpos bigint;
    lstart bigint; llen bigint; lit integer := 0;
BEGIN
    SELECT s.channels INTO chs FROM @S.checkpoint_channel_sets s WHERE s.num = p_set;
    n := coalesce(cardinality(chs), 0);
    IF n = 0 THEN
        RETURN;
    END IF;
    w := get_byte(p_versions, 0);
    vw := CASE WHEN w = 4 THEN 4 ELSE 1 END;
    IF octet_length(p_vals) > 0 AND get_byte(p_vals, 0) = 2 THEN
        h := 1;
        lw := 2;
    END IF;
    -- each channel's version length (0: the one before it again, form 2's
    -- 255), type and value length, as channel_vals() reads them
    FOR o IN 1 .. n LOOP
        same[o] := w = 2 AND get_byte(p_versions, o) = 255;
        lens[o] := CASE WHEN same[o] THEN 0
                        WHEN w <> 4 THEN get_byte(p_versions, o)
                        ELSE (get_byte(p_versions, 4 * o - 3) << 24)
                             | (get_byte(p_versions, 4 * o - 2) << 16)
                             | (get_byte(p_versions, 4 * o - 1) << 8)
                             | get_byte(p_versions, 4 * o) END;
        IF p_vals IS NULL THEN
            ts[o] := 0;
            vlens[o] := 0;
        ELSE
            ts[o] := (get_byte(p_vals, h + 4 * o - 4) << 24) | (get_byte(p_vals, h + 4 * o - 3) << 16)
                     | (get_byte(p_vals, h + 4 * o - 2) << 8) | get_byte(p_vals, h + 4 * o - 1);
            vlens[o] := CASE WHEN lw = 1 THEN get_byte(p_vals, 4 * n + o - 1)
                             ELSE (get_byte(p_vals, 1 + 4 * n + 2 * o - 2) << 8)
                                  | get_byte(p_vals, 1 + 4 * n + 2 * o - 1) END;
        END IF;
        total := total + lens[o];
        vtotal := vtotal + vlens[o];
    END LOOP;
    pos := 1 + vw * n;
    vpos := h + (4 + lw) * n;
    FOR o IN 1 .. n LOOP
        IF NOT same[o] THEN
            lit := lit + 1;
            lstart := pos;
            llen := lens[o];
        END IF;
        ch := chs[o];
        IF w IN (1, 2, 4) AND 1 + vw * n + total = octet_length(p_versions) AND lit > 0 THEN
            ver := substring(p_versions FROM (lstart + 1)::integer FOR llen::integer);
        ELSE
            ver := int4send(get_byte(p_versions, -1));
        END IF;
        type := CASE WHEN p_vals IS NULL OR ts[o] = 0 THEN NULL ELSE ts[o] END;
        IF p_vals IS NULL THEN
            value := NULL;
        ELSIF h + (4 + lw) * n + vtotal <> octet_length(p_vals) OR ts[o] < 0
              OR (ts[o] = 0 AND vlens[o] <> 0) THEN
            value := int4send(get_byte(p_vals, -1));
        ELSIF ts[o] = 0 THEN
            value := NULL;
        ELSE
            value := substring(p_vals FROM (vpos + 1)::integer FOR vlens[o]);
        END IF;
        pos := pos + lens[o];
        vpos := vpos + vlens[o];
        RETURN NEXT;
    END LOOP;
END
$fn$;
