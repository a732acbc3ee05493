-- migrate-10.sql: schema version 10 — replace_tail() (version 8) replaced, same
-- signature: with drop_checkpoints, the values only the dropped checkpoints
-- referred to are found as one set difference (their channel versions, less
-- those of the checkpoints kept), where version 8 searched the kept ones again
-- for each value of a dropped one: dropping 1,000 of a thread's 2,000
-- checkpoints (5 channels each) took 15 s, now about 0.2 s. Nothing else
-- changes.
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).

-- The tail rewrite, one transaction under the thread's row lock (FOR UPDATE:
-- it also waits for, and keeps out, a fork's FOR SHARE and put_writes' FOR KEY
-- SHARE): keep messages [0, p_keep), store p_bodies after them. In order:
-- missing or expired thread CV404; a known key answers what it stored;
-- expected length and generation (below 0: any) CV409; p_keep past the end
-- CV400; a checkpoint that refers to a message past p_keep CV409, unless
-- p_drop, which removes those checkpoints, their pending writes and the
-- values only they referred to. Then the messages, generation + 1, the key as
-- (p_keep, n), the deadline.
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
