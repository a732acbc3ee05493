-- migrate-17.sql: schema version 17 — an append updates its thread row in
-- place again (a HOT update: no index entry written) unless it moves the
-- thread in the activity order. The activity indexes (threads_by_updated and
-- each threads_by_key_n) ordered threads by updated_at, which every write
-- changes, so since version 11 no update of a thread row was HOT. They now
-- order by threads.listed_at, which trails updated_at by less than
-- listed_window() (listed_at <= updated_at < listed_at + window): a write
-- within the window of the thread's listed_at leaves it (and every index
-- entry) alone; a later one (or one whose time is earlier) sets it to
-- updated_at. Every writer sets it with listed_at() (the functions that write
-- threads are replaced here with it; a trigger would lock each row before its
-- update, and a CHECK constraint is rebuilt from its stored text by every
-- statement: each cost an append about as much as the index entries saved).
-- A listing in
-- activity order reads the index up to one window past its page and sorts by
-- updated_at (thread_list_recent*.sql), so its order and cursors are exact as
-- before. The appends no longer upsert (no identity value drawn per append):
-- a missing thread goes to @S.append().
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).

-- How far listed_at may trail updated_at: the appends to one thread within it
-- write no index entry; a page in activity order reads the threads whose
-- listed_at lies within it past the page.
CREATE FUNCTION @S.listed_window() RETURNS interval
LANGUAGE sql IMMUTABLE AS $fn$ SELECT interval '1 second' $fn$;

-- A thread's listed_at after a write that sets updated_at to p_updated: kept
-- while p_updated is within the window from it, else p_updated (also when
-- p_updated is earlier: a clock stepped back). Inlined where it is used.
CREATE FUNCTION @S.listed_at(p_listed timestamptz, p_updated timestamptz) RETURNS timestamptz
LANGUAGE sql STABLE AS $fn$
SELECT CASE WHEN p_updated >= p_listed AND p_updated < p_listed + @S.listed_window()
            THEN p_listed ELSE p_updated END
$fn$;

ALTER TABLE @S.threads ADD COLUMN listed_at timestamptz;
UPDATE @S.threads SET listed_at = updated_at;
ALTER TABLE @S.threads ALTER COLUMN listed_at SET NOT NULL;

-- the functions that set updated_at, each as its last version with listed_at

-- version 6's thread_claim
CREATE OR REPLACE FUNCTION @S.thread_claim(p_thread text, p_ttl interval, p_at timestamptz,
    OUT tid bigint, OUT length bigint)
LANGUAGE plpgsql AS $fn$
BEGIN
    -- a row that is not updated (its deadline passed) is locked all the same
    INSERT INTO @S.threads AS t (thread_id, created_at, updated_at, listed_at, expires_at)
    VALUES (p_thread, p_at, p_at, p_at, now() + p_ttl)
    ON CONFLICT (thread_id) DO UPDATE SET
        updated_at = greatest(t.updated_at, excluded.updated_at),
        listed_at = @S.listed_at(t.listed_at, greatest(t.updated_at, excluded.updated_at)),
        expires_at = excluded.expires_at
     WHERE t.expires_at IS NULL OR t.expires_at > now()
    RETURNING t.tid, t.length INTO tid, length;
    IF NOT FOUND THEN
        PERFORM @S.threads_purge(ARRAY[p_thread]);
        INSERT INTO @S.threads AS t (thread_id, created_at, updated_at, listed_at, expires_at)
        VALUES (p_thread, p_at, p_at, p_at, now() + p_ttl)
        RETURNING t.tid, t.length INTO tid, length;
    END IF;
END
$fn$;

-- version 8's thread_import
CREATE OR REPLACE FUNCTION @S.thread_import(p_thread text, p_first bigint, p_bodies bytea[],
    p_roles text[], p_at timestamptz[], p_generation bigint, p_ttl interval) RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    n integer := cardinality(p_bodies);
    v_tid bigint;
    len bigint;
    gen bigint;
BEGIN
    SELECT c.tid, c.length INTO v_tid, len FROM @S.thread_claim(p_thread, p_ttl, p_at[1]) c;
    SELECT t.generation INTO gen FROM @S.threads t WHERE t.tid = v_tid;
    IF NOT (len = 0 AND p_first = 0) AND gen <> p_generation THEN
        RAISE EXCEPTION USING ERRCODE = 'CV409', MESSAGE = format(
            'thread %s is at generation %s, the dump at %s: its tail was rewritten since '
            'it was imported', p_thread, gen, p_generation);
    END IF;
    IF len >= p_first + n THEN
        RETURN true; -- imported before: skipped
    END IF;
    IF len <> p_first THEN
        RAISE EXCEPTION USING ERRCODE = 'CV409', MESSAGE = format(
            'thread has %s messages, the dump continues at %s', len, p_first);
    END IF;
    UPDATE @S.threads t SET length = len + n, generation = p_generation,
        updated_at = greatest(t.updated_at, p_at[n]),
        listed_at = @S.listed_at(t.listed_at, greatest(t.updated_at, p_at[n]))
     WHERE t.tid = v_tid;
    INSERT INTO @S.messages (tid, seq, created_at, role, body)
    SELECT v_tid, len + u.o - 1, u.a, u.r, u.b
      FROM unnest(p_bodies, p_roles, p_at) WITH ORDINALITY AS u(b, r, a, o);
    RETURN false;
END
$fn$;

-- version 10's replace_tail
CREATE OR REPLACE FUNCTION @S.replace_tail(p_thread text, p_keep bigint, p_bodies bytea[],
    p_roles text[], p_at timestamptz, p_key text, p_expected bigint, p_generation bigint,
    p_drop boolean, p_ttl interval,
    OUT first_seq bigint, OUT count integer, OUT removed bigint, OUT generation bigint,
    OUT replayed boolean)
LANGUAGE plpgsql AS $fn$
DECLARE
    n integer := coalesce(cardinality(p_bodies), 0);
    v_tid bigint;
    len bigint;
    gen bigint;
    deadline timestamptz;
    cp_ns text;
    cp_id text;
    cp_len bigint;
BEGIN
    SELECT t.tid, t.length, t.generation, t.expires_at INTO v_tid, len, gen, deadline
      FROM @S.threads t WHERE t.thread_id = p_thread FOR UPDATE;
    IF NOT FOUND OR deadline <= now() THEN
        RAISE EXCEPTION USING ERRCODE = 'CV404', MESSAGE = 'thread not found';
    END IF;
    IF p_key IS NOT NULL THEN
        SELECT k.first_seq, k.count INTO first_seq, count
          FROM @S.idempotency_keys k WHERE k.tid = v_tid AND k.key = p_key;
        IF FOUND THEN
            removed := 0;
            generation := gen;
            replayed := true;
            RETURN;
        END IF;
    END IF;
    IF (p_expected >= 0 AND p_expected <> len) OR (p_generation >= 0 AND p_generation <> gen)
    THEN
        RAISE EXCEPTION USING ERRCODE = 'CV409', MESSAGE = format(
            'thread has %s messages at generation %s: not the expected tail', len, gen);
    END IF;
    IF p_keep > len THEN
        RAISE EXCEPTION USING ERRCODE = 'CV400',
            MESSAGE = format('keep %s is past the %s messages', p_keep, len);
    END IF;
    IF p_drop THEN
        WITH doomed AS (
            DELETE FROM @S.checkpoints c WHERE c.tid = v_tid AND c.log_length > p_keep
            RETURNING c.checkpoint_ns, c.checkpoint_id, c.channel_versions),
        writes AS (
            DELETE FROM @S.checkpoint_writes w USING doomed d
             WHERE w.tid = v_tid AND w.checkpoint_ns = d.checkpoint_ns
               AND w.checkpoint_id = d.checkpoint_id),
        freed AS (
            SELECT d.checkpoint_ns AS ns, u.ch, u.ver
              FROM doomed d, @S.channel_versions(d.channel_versions) AS u
            EXCEPT
            SELECT c.checkpoint_ns, u.ch, u.ver
              FROM @S.checkpoints c, @S.channel_versions(c.channel_versions) AS u
             WHERE c.tid = v_tid AND c.log_length <= p_keep)
        DELETE FROM @S.checkpoint_blobs b USING freed x
         WHERE b.tid = v_tid AND b.checkpoint_ns = x.ns AND b.channel = x.ch
           AND b.version = x.ver;
    ELSE
        SELECT c.checkpoint_ns, c.checkpoint_id, c.log_length INTO cp_ns, cp_id, cp_len
          FROM @S.checkpoints c WHERE c.tid = v_tid AND c.log_length > p_keep
         ORDER BY c.put_seq LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'CV409', MESSAGE = format(
                'checkpoint %s (namespace ''%s'') refers to %s messages; the rewrite keeps '
                '%s: nothing written (drop_checkpoints removes such checkpoints)',
                cp_id, cp_ns, cp_len, p_keep);
        END IF;
    END IF;
    -- the new messages over [p_keep, p_keep + n), replacing a row where there
    -- is one (an update, kept on its page when there is room: no index entry),
    -- and what is left past them deleted (both ends given: a plan cached for
    -- any values still takes the index)
    IF p_keep + n < len THEN
        DELETE FROM @S.messages m WHERE m.tid = v_tid AND m.seq >= p_keep + n
           AND m.seq < len;
    END IF;
    IF n > 0 THEN
        INSERT INTO @S.messages AS m (tid, seq, created_at, role, body)
        SELECT v_tid, p_keep + u.o - 1, p_at, u.r, u.b
          FROM unnest(p_bodies, p_roles) WITH ORDINALITY AS u(b, r, o)
        ON CONFLICT (tid, seq) DO UPDATE SET created_at = excluded.created_at,
            role = excluded.role, body = excluded.body;
    END IF;
    UPDATE @S.threads t SET length = p_keep + n, generation = gen + 1, updated_at = p_at,
        listed_at = @S.listed_at(t.listed_at, p_at), expires_at = now() + p_ttl
     WHERE t.tid = v_tid;
    IF p_key IS NOT NULL THEN
        INSERT INTO @S.idempotency_keys (tid, key, first_seq, count)
        VALUES (v_tid, p_key, p_keep, n);
    END IF;
    first_seq := p_keep;
    count := n;
    removed := len - p_keep;
    generation := gen + 1;
    replayed := false;
END
$fn$;

-- version 11's thread_fork
CREATE OR REPLACE FUNCTION @S.thread_fork(p_src text, p_dst text, p_upto bigint, p_generation bigint,
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
            listed_at, expires_at)
        VALUES (p_dst, n, gen, p_at, p_at, p_at, now() + p_ttl) ON CONFLICT (thread_id) DO NOTHING
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

DROP INDEX @S.threads_by_updated;
CREATE INDEX threads_by_listed ON @S.threads (listed_at, thread_id);

-- each declared key's index again, on listed_at
DO $do$
DECLARE
    k record;
BEGIN
    FOR k IN SELECT i.key, i.slot FROM @S.indexed_keys i ORDER BY i.slot LOOP
        EXECUTE format('DROP INDEX @S.threads_by_key_%s', k.slot);
        EXECUTE format('CREATE INDEX threads_by_key_%s ON @S.threads '
            '((keyvals -> %L), listed_at, thread_id)', k.slot, k.key);
    END LOOP;
END
$do$;

-- version 12's index_keys with the key indexes on listed_at
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
                    '((keyvals -> %L), listed_at, thread_id)', n, p_keys[n]);
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
