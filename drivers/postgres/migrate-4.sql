-- migrate-4.sql: schema version 4 — ttl (threads.expires_at, sweep). extra
-- moves to a table of its own, so that the row every append rewrites is
-- narrow; fillfactor 50 leaves room on its page for that new version (a HOT
-- update: no index touched). The functions that write take the store's ttl
-- (p_ttl; NULL: none).
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).
CREATE TABLE @S.thread_extra (
    thread_id text COLLATE "C" NOT NULL,
    extra     jsonb NOT NULL,
    PRIMARY KEY (thread_id));
INSERT INTO @S.thread_extra (thread_id, extra)
SELECT t.thread_id, t.extra FROM @S.threads t WHERE t.extra <> '{}'::jsonb;
DROP FUNCTION @S.append(text, bytea[], text[], timestamptz, text, bigint);
DROP FUNCTION @S.save_extra(text, jsonb, bigint);
DROP FUNCTION @S.thread_delete(text);
DROP FUNCTION @S.thread_fork(text, text, bigint);
DROP FUNCTION @S.checkpoint_put(text, text, text, text, jsonb, text, bytea, bigint,
    text[], text[], text[], bytea[], timestamptz);
DROP FUNCTION @S.checkpoint_put_writes(text, text, text, text, text, bigint[], text[],
    text[], bytea[]);
DROP FUNCTION @S.checkpoint_prune(text, bigint);
DROP FUNCTION @S.thread_import(text, bigint, bytea[], text[], timestamptz[]);
ALTER TABLE @S.threads DROP COLUMN extra, ADD COLUMN expires_at timestamptz;
ALTER TABLE @S.threads SET (fillfactor = 50);
-- partial: a write without ttl leaves it NULL, unchanged, so HOT stays possible
CREATE INDEX threads_by_expiry ON @S.threads (expires_at) WHERE expires_at IS NOT NULL;
CREATE FUNCTION @S.threads_purge(p_threads text[]) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    DELETE FROM @S.messages m WHERE m.thread_id = ANY (p_threads);
    DELETE FROM @S.idempotency_keys k WHERE k.thread_id = ANY (p_threads);
    DELETE FROM @S.checkpoint_writes w WHERE w.thread_id = ANY (p_threads);
    DELETE FROM @S.checkpoint_blobs b WHERE b.thread_id = ANY (p_threads);
    DELETE FROM @S.checkpoints c WHERE c.thread_id = ANY (p_threads);
    DELETE FROM @S.thread_extra x WHERE x.thread_id = ANY (p_threads);
    DELETE FROM @S.threads t WHERE t.thread_id = ANY (p_threads);
END
$fn$;
-- Locks a thread's row for a write: creates a missing thread, starts one whose
-- deadline has passed afresh (its remains go), records the write's time and
-- deadline, and with p_checkpoint takes the next checkpoint position.
CREATE FUNCTION @S.thread_claim(p_thread text, p_ttl interval, p_at timestamptz,
    p_checkpoint boolean, OUT length bigint, OUT checkpoint_seq bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
    step bigint := CASE WHEN p_checkpoint THEN 1 ELSE 0 END;
BEGIN
    -- a row that is not updated (its deadline passed) is locked all the same
    INSERT INTO @S.threads AS t (thread_id, created_at, updated_at, expires_at,
        checkpoint_seq)
    VALUES (p_thread, p_at, p_at, now() + p_ttl, step)
    ON CONFLICT (thread_id) DO UPDATE SET
        updated_at = greatest(t.updated_at, excluded.updated_at),
        expires_at = excluded.expires_at, checkpoint_seq = t.checkpoint_seq + step
     WHERE t.expires_at IS NULL OR t.expires_at > now()
    RETURNING t.length, t.checkpoint_seq INTO length, checkpoint_seq;
    IF NOT FOUND THEN
        PERFORM @S.threads_purge(ARRAY[p_thread]);
        INSERT INTO @S.threads (thread_id, created_at, updated_at, expires_at,
            checkpoint_seq)
        VALUES (p_thread, p_at, p_at, now() + p_ttl, step);
        length := 0;
        checkpoint_seq := step;
    END IF;
END
$fn$;
-- Live: the thread exists and its deadline, if any, has not passed. Locks
-- its row in the given mode; records the deadline of a write when asked.
CREATE FUNCTION @S.thread_live(p_thread text, p_ttl interval, p_share boolean)
RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    deadline timestamptz;
BEGIN
    IF p_share THEN
        SELECT t.expires_at INTO deadline FROM @S.threads t
         WHERE t.thread_id = p_thread FOR KEY SHARE;
    ELSE
        SELECT t.expires_at INTO deadline FROM @S.threads t
         WHERE t.thread_id = p_thread FOR UPDATE;
    END IF;
    IF NOT FOUND OR deadline <= now() THEN
        RETURN false;
    END IF;
    -- without ttl and without a deadline there is nothing to record
    IF p_ttl IS NOT NULL OR deadline IS NOT NULL THEN
        UPDATE @S.threads t SET expires_at = now() + p_ttl
         WHERE t.thread_id = p_thread;
    END IF;
    RETURN true;
END
$fn$;
CREATE FUNCTION @S.append(p_thread text, p_bodies bytea[], p_roles text[],
    p_at timestamptz, p_key text, p_expected bigint, p_ttl interval,
    OUT first_seq bigint, OUT count integer, OUT replayed boolean)
LANGUAGE plpgsql AS $fn$
DECLARE
    n integer := cardinality(p_bodies);
    len bigint;
BEGIN
    SELECT c.length INTO len FROM @S.thread_claim(p_thread, p_ttl, p_at, false) c;
    -- the row lock is held: this statement's snapshot sees every
    -- committed key of the thread
    IF p_key IS NOT NULL THEN
        SELECT k.first_seq, k.count INTO first_seq, count
          FROM @S.idempotency_keys k WHERE k.thread_id = p_thread AND k.key = p_key;
        IF FOUND THEN
            replayed := true;
            RETURN;
        END IF;
    END IF;
    IF p_expected >= 0 AND p_expected <> len THEN
        RAISE EXCEPTION USING ERRCODE = 'CV409',
            MESSAGE = format('thread has %s messages, expected %s', len, p_expected);
    END IF;
    UPDATE @S.threads t SET length = len + n WHERE t.thread_id = p_thread;
    INSERT INTO @S.messages (thread_id, seq, role, created_at, body)
    SELECT p_thread, len + u.o - 1, u.r, p_at, u.b
      FROM unnest(p_bodies, p_roles) WITH ORDINALITY AS u(b, r, o);
    IF p_key IS NOT NULL THEN
        INSERT INTO @S.idempotency_keys (thread_id, key, first_seq, count)
        VALUES (p_thread, p_key, len, n);
    END IF;
    first_seq := len;
    count := n;
    replayed := false;
END
$fn$;
CREATE FUNCTION @S.save_extra(p_thread text, p_patch jsonb, p_max bigint, p_ttl interval)
RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    merged jsonb;
    size bigint;
BEGIN
    PERFORM @S.thread_claim(p_thread, p_ttl, now(), false);
    INSERT INTO @S.thread_extra AS x (thread_id, extra) VALUES (p_thread, p_patch)
    ON CONFLICT (thread_id) DO UPDATE SET extra = x.extra || excluded.extra
    RETURNING x.extra INTO merged;
    -- jsonb's text is never shorter than the compact form: count only when needed
    IF octet_length(merged::text) > p_max THEN
        size := @S.json_compact_size(merged);
        IF size > p_max THEN
            RAISE EXCEPTION USING ERRCODE = 'CV413', MESSAGE = format(
                'merged extra of %s bytes would exceed the limit of %s bytes', size, p_max);
        END IF;
    END IF;
END
$fn$;
CREATE FUNCTION @S.thread_delete(p_thread text) RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    deadline timestamptz;
BEGIN
    -- wait for appenders and writers first, so nothing they commit is left behind
    SELECT t.expires_at INTO deadline FROM @S.threads t
     WHERE t.thread_id = p_thread FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    PERFORM @S.threads_purge(ARRAY[p_thread]);
    -- one whose deadline had passed was not there any more: only its remains went
    RETURN deadline IS NULL OR deadline > now();
END
$fn$;
CREATE FUNCTION @S.thread_fork(p_src text, p_dst text, p_upto bigint, p_ttl interval)
RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    len bigint;
    deadline timestamptz;
    n bigint;
BEGIN
    SELECT t.length, t.expires_at INTO len, deadline FROM @S.threads t
     WHERE t.thread_id = p_src FOR SHARE;
    IF NOT FOUND OR deadline <= now() THEN
        RAISE EXCEPTION USING ERRCODE = 'CV404', MESSAGE = 'source thread not found';
    END IF;
    n := CASE WHEN p_upto < 0 THEN len ELSE least(p_upto, len) END;
    LOOP
        INSERT INTO @S.threads (thread_id, length, expires_at)
        VALUES (p_dst, n, now() + p_ttl) ON CONFLICT (thread_id) DO NOTHING;
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
    INSERT INTO @S.thread_extra (thread_id, extra)
    SELECT p_dst, x.extra FROM @S.thread_extra x WHERE x.thread_id = p_src;
    INSERT INTO @S.messages (thread_id, seq, role, created_at, body)
    SELECT p_dst, m.seq, m.role, m.created_at, m.body FROM @S.messages m
     WHERE m.thread_id = p_src AND m.seq < n;
END
$fn$;
CREATE FUNCTION @S.checkpoint_put(p_thread text, p_ns text, p_id text, p_parent text,
    p_metadata jsonb, p_body_type text, p_body bytea, p_log_length bigint,
    p_channels text[], p_versions text[], p_types text[], p_values bytea[],
    p_at timestamptz, p_ttl interval) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    pos bigint;
BEGIN
    -- the thread row orders the puts of a thread and locks out prune and delete
    SELECT c.checkpoint_seq INTO pos FROM @S.thread_claim(p_thread, p_ttl, p_at, true) c;
    INSERT INTO @S.checkpoint_blobs
        (thread_id, checkpoint_ns, channel, version, type, value)
    SELECT p_thread, p_ns, u.c, u.v, u.t, u.b
      FROM unnest(p_channels, p_versions, p_types, p_values) AS u(c, v, t, b)
     WHERE u.t IS NOT NULL
    ON CONFLICT DO NOTHING;
    INSERT INTO @S.checkpoints AS c (thread_id, checkpoint_ns, checkpoint_id, put_seq,
        parent_id, metadata, body_type, body, log_length, channels, versions, created_at)
    VALUES (p_thread, p_ns, p_id, pos, p_parent, p_metadata, p_body_type, p_body,
        p_log_length, p_channels, p_versions, p_at)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET
        parent_id = excluded.parent_id, metadata = excluded.metadata,
        body_type = excluded.body_type, body = excluded.body,
        log_length = excluded.log_length, channels = excluded.channels,
        versions = excluded.versions;
END
$fn$;
CREATE FUNCTION @S.checkpoint_put_writes(p_thread text, p_ns text, p_id text,
    p_task text, p_path text, p_idx bigint[], p_channels text[], p_types text[],
    p_values bytea[], p_ttl interval) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    -- a key-share lock: a concurrent delete or prune either ran first (and the
    -- checkpoint is gone) or waits for these writes and sees them
    IF NOT @S.thread_live(p_thread, p_ttl, true) THEN
        RAISE EXCEPTION USING ERRCODE = 'CV404', MESSAGE = 'checkpoint not found';
    END IF;
    PERFORM 1 FROM @S.checkpoints c WHERE c.thread_id = p_thread
       AND c.checkpoint_ns = p_ns AND c.checkpoint_id = p_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'CV404', MESSAGE = 'checkpoint not found';
    END IF;
    INSERT INTO @S.checkpoint_writes AS w (thread_id, checkpoint_ns, checkpoint_id,
        task_id, idx, task_path, channel, type, value)
    SELECT p_thread, p_ns, p_id, p_task, u.i, p_path, u.c, u.t, u.b
      FROM unnest(p_idx, p_channels, p_types, p_values) AS u(i, c, t, b)
    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET
        task_path = excluded.task_path, channel = excluded.channel,
        type = excluded.type, value = excluded.value
     WHERE excluded.idx < 0;
END
$fn$;
CREATE FUNCTION @S.checkpoint_prune(p_thread text, p_keep bigint, p_ttl interval)
RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    IF NOT @S.thread_live(p_thread, p_ttl, false) THEN
        RAISE EXCEPTION USING ERRCODE = 'CV404', MESSAGE = 'thread not found';
    END IF;
    WITH doomed AS (
        DELETE FROM @S.checkpoints c
         USING (SELECT x.checkpoint_ns, x.checkpoint_id FROM (
                SELECT k.checkpoint_ns, k.checkpoint_id, row_number() OVER (
                       PARTITION BY k.checkpoint_ns ORDER BY k.put_seq DESC) AS rn
                  FROM @S.checkpoints k WHERE k.thread_id = p_thread) x
                WHERE x.rn > p_keep) d
         WHERE c.thread_id = p_thread AND c.checkpoint_ns = d.checkpoint_ns
           AND c.checkpoint_id = d.checkpoint_id
        RETURNING c.checkpoint_ns, c.checkpoint_id)
    DELETE FROM @S.checkpoint_writes w USING doomed d
     WHERE w.thread_id = p_thread AND w.checkpoint_ns = d.checkpoint_ns
       AND w.checkpoint_id = d.checkpoint_id;
    DELETE FROM @S.checkpoint_blobs b WHERE b.thread_id = p_thread AND NOT EXISTS (
        SELECT 1 FROM @S.checkpoints c, unnest(c.channels, c.versions) AS u(ch, ver)
         WHERE c.thread_id = p_thread AND c.checkpoint_ns = b.checkpoint_ns
           AND u.ch = b.channel AND u.ver = b.version);
END
$fn$;
CREATE FUNCTION @S.thread_import(p_thread text, p_first bigint, p_bodies bytea[],
    p_roles text[], p_at timestamptz[], p_ttl interval) RETURNS boolean
LANGUAGE plpgsql AS $fn$
DECLARE
    n integer := cardinality(p_bodies);
    len bigint;
BEGIN
    SELECT c.length INTO len FROM @S.thread_claim(p_thread, p_ttl, p_at[1], false) c;
    IF len >= p_first + n THEN
        RETURN true; -- imported before: skipped
    END IF;
    IF len <> p_first THEN
        RAISE EXCEPTION USING ERRCODE = 'CV409', MESSAGE = format(
            'thread has %s messages, the dump continues at %s', len, p_first);
    END IF;
    UPDATE @S.threads t SET length = len + n,
        updated_at = greatest(t.updated_at, p_at[n]) WHERE t.thread_id = p_thread;
    INSERT INTO @S.messages (thread_id, seq, role, created_at, body)
    SELECT p_thread, len + u.o - 1, u.r, u.a, u.b
      FROM unnest(p_bodies, p_roles, p_at) WITH ORDINALITY AS u(b, r, a, o);
    RETURN false;
END
$fn$;
-- Removes up to p_limit threads whose deadline has passed, with all they
-- hold; a thread being written (locked) waits for the next sweep.
CREATE FUNCTION @S.sweep(p_limit integer) RETURNS integer
LANGUAGE plpgsql AS $fn$
DECLARE
    doomed text[];
BEGIN
    SELECT array_agg(s.thread_id) INTO doomed FROM (
        SELECT t.thread_id FROM @S.threads t WHERE t.expires_at <= now()
         ORDER BY t.expires_at LIMIT p_limit FOR UPDATE SKIP LOCKED) s;
    IF doomed IS NULL THEN
        RETURN 0;
    END IF;
    PERFORM @S.threads_purge(doomed);
    RETURN cardinality(doomed);
END
$fn$;
