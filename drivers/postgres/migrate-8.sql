-- migrate-8.sql: schema version 8 — the tail rewrite and the thread generation.
-- threads.generation counts a thread's tail rewrites (0 for every thread stored
-- before: a column with a constant default, so no row is rewritten now).
-- replace_tail() is the rewrite; append, checkpoint_put_log, thread_fork and
-- thread_import take the generation as a condition (or, import, as a value):
-- each is dropped and created with the new parameter before the ttl.
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).
ALTER TABLE @S.threads ADD COLUMN generation bigint NOT NULL DEFAULT 0;

DROP FUNCTION @S.checkpoint_put_log(text, text, text, text, jsonb, text, bytea, bigint,
    text[], text[], text[], bytea[], bytea[], text[], bigint, timestamptz, interval);
DROP FUNCTION @S.append(text, bytea[], text[], timestamptz, text, bigint, interval);
DROP FUNCTION @S.thread_fork(text, text, bigint, interval);
DROP FUNCTION @S.thread_import(text, bigint, bytea[], text[], timestamptz[], interval);

-- version 6's append, then p_generation (below 0: any) checked after the key
-- and the length; a thread created (or started afresh) here is at 0
CREATE FUNCTION @S.append(p_thread text, p_bodies bytea[], p_roles text[],
    p_at timestamptz, p_key text, p_expected bigint, p_generation bigint, p_ttl interval,
    OUT first_seq bigint, OUT count integer, OUT replayed boolean)
LANGUAGE plpgsql AS $fn$
DECLARE
    n integer := cardinality(p_bodies);
    v_tid bigint;
    len bigint;
    gen bigint;
BEGIN
    SELECT c.tid, c.length INTO v_tid, len FROM @S.thread_claim(p_thread, p_ttl, p_at) c;
    -- the row lock is held: this statement's snapshot sees every
    -- committed key of the thread
    IF p_key IS NOT NULL THEN
        SELECT k.first_seq, k.count INTO first_seq, count
          FROM @S.idempotency_keys k WHERE k.tid = v_tid AND k.key = p_key;
        IF FOUND THEN
            replayed := true;
            RETURN;
        END IF;
    END IF;
    IF p_expected >= 0 AND p_expected <> len THEN
        RAISE EXCEPTION USING ERRCODE = 'CV409',
            MESSAGE = format('thread has %s messages, expected %s', len, p_expected);
    END IF;
    IF p_generation >= 0 THEN
        SELECT t.generation INTO gen FROM @S.threads t WHERE t.tid = v_tid;
        IF gen <> p_generation THEN
            RAISE EXCEPTION USING ERRCODE = 'CV409', MESSAGE = format(
                'thread is at generation %s, expected %s', gen, p_generation);
        END IF;
    END IF;
    UPDATE @S.threads t SET length = len + n WHERE t.tid = v_tid;
    INSERT INTO @S.messages (tid, seq, created_at, role, body)
    SELECT v_tid, len + u.o - 1, p_at, u.r, u.b
      FROM unnest(p_bodies, p_roles) WITH ORDINALITY AS u(b, r, o);
    IF p_key IS NOT NULL THEN
        INSERT INTO @S.idempotency_keys (tid, key, first_seq, count)
        VALUES (v_tid, p_key, len, n);
    END IF;
    first_seq := len;
    count := n;
    replayed := false;
END
$fn$;

CREATE FUNCTION @S.checkpoint_put_log(p_thread text, p_ns text, p_id text,
    p_parent text, p_metadata jsonb, p_body_type text, p_body bytea,
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

-- version 6's fork, then: the source's generation is checked (p_generation,
-- below 0: any) and given to the destination. The source's row is held FOR
-- SHARE from the first statement on, so no rewrite (FOR UPDATE) runs between
-- reading its generation and copying its messages.
CREATE FUNCTION @S.thread_fork(p_src text, p_dst text, p_upto bigint, p_generation bigint,
    p_ttl interval) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    src bigint;
    dst bigint;
    len bigint;
    gen bigint;
    deadline timestamptz;
    n bigint;
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
        INSERT INTO @S.threads AS t (thread_id, length, generation, expires_at)
        VALUES (p_dst, n, gen, now() + p_ttl) ON CONFLICT (thread_id) DO NOTHING
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
    SELECT dst, x.extra FROM @S.thread_extra x WHERE x.tid = src;
    INSERT INTO @S.messages (tid, seq, created_at, role, body)
    SELECT dst, m.seq, m.created_at, m.role, m.body FROM @S.messages m
     WHERE m.tid = src AND m.seq < n;
END
$fn$;

-- version 6's import, with the dump's generation: a thread without messages
-- takes it when the dump starts at seq 0; any other must be at it (checked
-- before the "imported before" answer, so an old dump never skips over, or
-- continues, a tail rewritten since)
CREATE FUNCTION @S.thread_import(p_thread text, p_first bigint, p_bodies bytea[],
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
        updated_at = greatest(t.updated_at, p_at[n]) WHERE t.tid = v_tid;
    INSERT INTO @S.messages (tid, seq, created_at, role, body)
    SELECT v_tid, len + u.o - 1, u.a, u.r, u.b
      FROM unnest(p_bodies, p_roles, p_at) WITH ORDINALITY AS u(b, r, a, o);
    RETURN false;
END
$fn$;

-- The tail rewrite, one transaction under the thread's row lock (FOR UPDATE:
-- it also waits for, and keeps out, a fork's FOR SHARE and put_writes' FOR KEY
-- SHARE): keep messages [0, p_keep), store p_bodies after them. In order:
-- missing or expired thread CV404; a known key answers what it stored;
-- expected length and generation (below 0: any) CV409; p_keep past the end
-- CV400; a checkpoint that refers to a message past p_keep CV409, unless
-- p_drop, which removes those checkpoints, their pending writes and the
-- values only they referred to. Then the messages, generation + 1, the key as
-- (p_keep, n), the deadline.
CREATE FUNCTION @S.replace_tail(p_thread text, p_keep bigint, p_bodies bytea[],
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
        candidates AS (
            SELECT DISTINCT d.checkpoint_ns AS ns, u.ch, u.ver
              FROM doomed d, @S.channel_versions(d.channel_versions) AS u)
        DELETE FROM @S.checkpoint_blobs b USING candidates x
         WHERE b.tid = v_tid AND b.checkpoint_ns = x.ns AND b.channel = x.ch
           AND b.version = x.ver
           AND NOT EXISTS (
               SELECT 1 FROM @S.checkpoints c, @S.channel_versions(c.channel_versions) AS u
                WHERE c.tid = v_tid AND c.checkpoint_ns = x.ns AND c.log_length <= p_keep
                  AND u.ch = x.ch AND u.ver = x.ver);
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
        expires_at = now() + p_ttl WHERE t.tid = v_tid;
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
