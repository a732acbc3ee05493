-- migrate-11.sql: schema version 11 — the thread index (convo_thread_list_ex).
-- threads already has created_at, updated_at and length (version 1); this adds
-- the indexes that order them (threads_by_updated, threads_by_created), a GIN
-- index over every extra object for containment (thread_extra_contains), the
-- declared index keys (indexed_keys) and, per thread, the values of those keys
-- (threads.keyvals), which index_keys() indexes with updated_at when the keys
-- are first declared. save_extra and thread_fork take the client's time (as
-- every other write does) and keep keyvals: each is dropped and created with
-- p_at before the ttl. updated_at of threads whose last checkpoint is newer
-- (versions 2 and 3 did not move it on a put) is set to that checkpoint's time.
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).
ALTER TABLE @S.threads ADD COLUMN keyvals jsonb;

-- one row per declared key, recorded once (index_keys()); slot n is indexed
-- by threads_by_key_n
CREATE TABLE @S.indexed_keys (
    key         text COLLATE "C" NOT NULL,
    slot        integer NOT NULL,
    declared_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (key),
    CONSTRAINT indexed_keys_slot_key UNIQUE (slot));

UPDATE @S.threads t SET updated_at = c.last
  FROM (SELECT k.tid, max(k.created_at) AS last FROM @S.checkpoints k GROUP BY k.tid) c
 WHERE c.tid = t.tid AND c.last > t.updated_at;

CREATE INDEX threads_by_updated ON @S.threads (updated_at, thread_id);
CREATE INDEX threads_by_created ON @S.threads (created_at, thread_id);
CREATE INDEX thread_extra_contains ON @S.thread_extra USING gin (extra jsonb_path_ops);

DROP FUNCTION @S.save_extra(text, jsonb, bigint, interval);
DROP FUNCTION @S.thread_fork(text, text, bigint, bigint, interval);

-- threads.keyvals of thread p_tid from its extra: the declared keys it has,
-- with their values (NULL: none). Read after the extra was written: a first
-- declaration (index_keys) holds thread_extra in SHARE mode while it fills
-- keyvals, so a write either came before it (and was filled) or sees the keys.
CREATE FUNCTION @S.keyvals_set(p_tid bigint, p_extra jsonb, p_changed jsonb) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    keys text[];
BEGIN
    SELECT array_agg(k.key) INTO keys FROM @S.indexed_keys k;
    IF keys IS NOT NULL AND p_changed ?| keys THEN
        UPDATE @S.threads t SET keyvals = (
            SELECT jsonb_object_agg(u.k, p_extra -> u.k) FROM unnest(keys) AS u(k)
             WHERE p_extra ? u.k)
         WHERE t.tid = p_tid;
    END IF;
END
$fn$;

-- version 6's save_extra with the write's time (p_at, the client's clock, as
-- appends and puts have) and keyvals kept
CREATE FUNCTION @S.save_extra(p_thread text, p_patch jsonb, p_max bigint, p_at timestamptz,
    p_ttl interval) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    v_tid bigint;
    merged jsonb;
    size bigint;
BEGIN
    SELECT c.tid INTO v_tid FROM @S.thread_claim(p_thread, p_ttl, p_at) c;
    INSERT INTO @S.thread_extra AS x (tid, extra) VALUES (v_tid, p_patch)
    ON CONFLICT (tid) DO UPDATE SET extra = x.extra || excluded.extra
    RETURNING x.extra INTO merged;
    -- jsonb's text is never shorter than the compact form: count only when needed
    IF octet_length(merged::text) > p_max THEN
        size := @S.json_compact_size(merged);
        IF size > p_max THEN
            RAISE EXCEPTION USING ERRCODE = 'CV413', MESSAGE = format(
                'merged extra of %s bytes would exceed the limit of %s bytes', size, p_max);
        END IF;
    END IF;
    PERFORM @S.keyvals_set(v_tid, merged, p_patch);
END
$fn$;

-- version 8's fork; the new thread is created at p_at (created_at and
-- updated_at: its own times, not the source's) and gets keyvals from the
-- extra it copied
CREATE FUNCTION @S.thread_fork(p_src text, p_dst text, p_upto bigint, p_generation bigint,
    p_at timestamptz, p_ttl interval) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    src bigint;
    dst bigint;
    len bigint;
    gen bigint;
    deadline timestamptz;
    n bigint;
    copied jsonb;
BEGIN
    SELECT t.tid, t.length, t.generation, t.expires_at INTO src, len, gen, deadline
      FROM @S.threads t WHERE t.thread_id = p_src FOR SHARE;
    IF NOT FOUND OR deadline <= now() THEN
        RAISE EXCEPTION USING ERRCODE = 'CV404', MESSAGE = 'source thread not found';
    END IF;
    IF p_generation >= 0 AND gen <> p_generation THEN
        RAISE EXCEPTION USING ERRCODE = 'CV409', MESSAGE = format(
            'source thread is at generation %s, expected %s', gen, p_generation);
    END IF;
    n := CASE WHEN p_upto < 0 THEN len ELSE least(p_upto, len) END;
    LOOP
        INSERT INTO @S.threads AS t (thread_id, length, generation, created_at, updated_at,
            expires_at)
        VALUES (p_dst, n, gen, p_at, p_at, now() + p_ttl) ON CONFLICT (thread_id) DO NOTHING
        RETURNING t.tid INTO dst;
        EXIT WHEN FOUND;
        -- a destination whose deadline has passed is not there: its remains go
        SELECT t.expires_at INTO deadline FROM @S.threads t
         WHERE t.thread_id = p_dst FOR UPDATE;
        IF FOUND AND (deadline IS NULL OR deadline > now()) THEN
            RAISE EXCEPTION USING ERRCODE = 'CV409',
                MESSAGE = 'destination thread already exists';
        END IF;
        IF FOUND THEN
            PERFORM @S.threads_purge(ARRAY[p_dst]);
        END IF;
    END LOOP;
    IF p_upto > len THEN
        RAISE EXCEPTION USING ERRCODE = 'CV400',
            MESSAGE = format('fork upto %s is past the end (%s)', p_upto, len);
    END IF;
    INSERT INTO @S.thread_extra (tid, extra)
    SELECT dst, x.extra FROM @S.thread_extra x WHERE x.tid = src
    RETURNING extra INTO copied;
    IF copied IS NOT NULL THEN
        PERFORM @S.keyvals_set(dst, copied, copied);
    END IF;
    INSERT INTO @S.messages (tid, seq, created_at, role, body)
    SELECT dst, m.seq, m.created_at, m.role, m.body FROM @S.messages m
     WHERE m.tid = src AND m.seq < n;
END
$fn$;

-- The declared index keys (sorted, C order) of the store. p_keys NULL: the
-- recorded ones (none: an empty result). Otherwise they must be the recorded
-- ones, else CV400; when none are recorded yet, the first declaration records
-- them, one opener at a time (the migrations' lock), fills keyvals from every
-- extra and builds threads_by_key_n for key n: ((keyvals -> key), updated_at,
-- thread_id). Not a partial index (of the threads that have the key): the
-- planner keeps statistics of an index's expression only when the index has
-- no predicate, and without them it takes a key's value for rare (0.5% of the
-- threads) and sorts all of a user's threads instead of reading the index in
-- order. thread_extra is held in SHARE mode meanwhile: no extra changes
-- between the fill and the commit.
CREATE FUNCTION @S.index_keys(p_keys text[]) RETURNS SETOF text
LANGUAGE plpgsql AS $fn$
DECLARE
    recorded text[];
BEGIN
    SELECT array_agg(k.key ORDER BY k.slot) INTO recorded FROM @S.indexed_keys k;
    IF p_keys IS NOT NULL AND recorded IS NULL THEN
        PERFORM pg_advisory_xact_lock(1668247158, hashtext('@N'));
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

-- The threads whose extra contains p_where, from thread_extra_contains (GIN).
-- The planner's estimate for @> (about a tenth of the rows for any object)
-- would have it read every extra instead; a plan made with sequential and
-- plain index scans off can only be the bitmap scan of the GIN index, whose
-- cost grows with the matching threads.
CREATE FUNCTION @S.threads_matching(p_where jsonb, OUT tid bigint, OUT extra jsonb)
RETURNS SETOF record
LANGUAGE plpgsql STABLE ROWS 100 SET enable_seqscan = off SET enable_indexscan = off AS $fn$
BEGIN
    RETURN QUERY SELECT x.tid, x.extra FROM @S.thread_extra x WHERE x.extra @> p_where;
END
$fn$;
