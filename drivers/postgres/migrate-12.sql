-- migrate-12.sql: schema version 12 — index_keys() (version 11) replaced, same
-- signature: a first declaration of index keys locks threads (SHARE ROW
-- EXCLUSIVE) before thread_extra. Version 11 locked thread_extra first and then
-- updated every thread row: a save_extra that held its thread's row and came
-- to write the extra waited for it while it waited for that row, a deadlock
-- that undid one of the two. Nothing else changes.
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).

-- The declared index keys (sorted, C order) of the store. p_keys NULL: the
-- recorded ones (none: an empty result). Otherwise they must be the recorded
-- ones, else CV400; when none are recorded yet, the first declaration records
-- them, one opener at a time (the migrations' lock), fills keyvals from every
-- extra and builds threads_by_key_n for key n: ((keyvals -> key), updated_at,
-- thread_id), not partial (version 11 says why). Writes to threads wait from
-- the start (a SHARE ROW EXCLUSIVE lock: a writer that holds a thread row
-- finishes first, its extra and all); thread_extra is held in SHARE mode too:
-- no extra changes between the fill and the commit.
CREATE OR REPLACE FUNCTION @S.index_keys(p_keys text[]) RETURNS SETOF text
LANGUAGE plpgsql AS $fn$
DECLARE
    recorded text[];
BEGIN
    SELECT array_agg(k.key ORDER BY k.slot) INTO recorded FROM @S.indexed_keys k;
    IF p_keys IS NOT NULL AND recorded IS NULL THEN
        PERFORM pg_advisory_xact_lock(1668247158, hashtext('@N'));
        -- threads first, as every writer of an extra locks its thread row first
        LOCK TABLE @S.threads IN SHARE ROW EXCLUSIVE MODE;
        LOCK TABLE @S.thread_extra IN SHARE MODE;
        SELECT array_agg(k.key ORDER BY k.slot) INTO recorded FROM @S.indexed_keys k;
        IF recorded IS NULL THEN
            INSERT INTO @S.indexed_keys (key, slot)
            SELECT u.k, u.n FROM unnest(p_keys) WITH ORDINALITY AS u(k, n);
            UPDATE @S.threads t SET keyvals = v.keyvals
              FROM (SELECT x.tid, (SELECT jsonb_object_agg(u.k, x.extra -> u.k)
                                     FROM unnest(p_keys) AS u(k) WHERE x.extra ? u.k) AS keyvals
                      FROM @S.thread_extra x WHERE x.extra ?| p_keys) v
             WHERE t.tid = v.tid;
            FOR n IN 1 .. cardinality(p_keys) LOOP
                EXECUTE format('CREATE INDEX threads_by_key_%s ON @S.threads '
                    '((keyvals -> %L), updated_at, thread_id)', n, p_keys[n]);
            END LOOP;
            recorded := p_keys;
        END IF;
    END IF;
    IF p_keys IS NOT NULL AND p_keys IS DISTINCT FROM recorded THEN
        RAISE EXCEPTION USING ERRCODE = 'CV400', MESSAGE = format(
            'the store indexes the extra keys %s; this opener declares %s',
            array_to_string(recorded, ', '), array_to_string(p_keys, ', '));
    END IF;
    RETURN QUERY SELECT u.k FROM unnest(recorded) AS u(k);
END
$fn$;
