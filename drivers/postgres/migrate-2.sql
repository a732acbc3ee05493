-- migrate-2.sql: schema version 2 — checkpoints, their channel values (once
-- per version) and pending writes.
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).
ALTER TABLE @S.threads ADD COLUMN checkpoint_seq bigint NOT NULL DEFAULT 0;
CREATE TABLE @S.checkpoints (
    thread_id     text COLLATE "C" NOT NULL,
    checkpoint_ns text COLLATE "C" NOT NULL,
    checkpoint_id text COLLATE "C" NOT NULL,
    put_seq       bigint NOT NULL,
    parent_id     text COLLATE "C",
    metadata      jsonb NOT NULL,
    body_type     text,
    body          bytea,
    log_length    bigint NOT NULL,
    channels      text[] NOT NULL,
    versions      text[] NOT NULL,
    created_at    timestamptz NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id));
CREATE INDEX checkpoints_by_put ON @S.checkpoints (thread_id, put_seq DESC);
CREATE INDEX checkpoints_by_ns_put ON @S.checkpoints (thread_id, checkpoint_ns, put_seq);
CREATE TABLE @S.checkpoint_blobs (
    thread_id     text COLLATE "C" NOT NULL,
    checkpoint_ns text COLLATE "C" NOT NULL,
    channel       text COLLATE "C" NOT NULL,
    version       text COLLATE "C" NOT NULL,
    type          text NOT NULL,
    value         bytea NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, channel, version));
CREATE TABLE @S.checkpoint_writes (
    thread_id     text COLLATE "C" NOT NULL,
    checkpoint_ns text COLLATE "C" NOT NULL,
    checkpoint_id text COLLATE "C" NOT NULL,
    task_id       text COLLATE "C" NOT NULL,
    idx           bigint NOT NULL,
    task_path     text NOT NULL,
    channel       text NOT NULL,
    type          text NOT NULL,
    value         bytea NOT NULL,
    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx));
CREATE FUNCTION @S.checkpoint_put(p_thread text, p_ns text, p_id text, p_parent text,
    p_metadata jsonb, p_body_type text, p_body bytea, p_log_length bigint,
    p_channels text[], p_versions text[], p_types text[], p_values bytea[],
    p_at timestamptz) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    pos bigint;
BEGIN
    -- the thread row orders the puts of a thread and locks out prune and delete
    LOOP
        UPDATE @S.threads t SET checkpoint_seq = t.checkpoint_seq + 1
         WHERE t.thread_id = p_thread RETURNING t.checkpoint_seq INTO pos;
        EXIT WHEN FOUND;
        INSERT INTO @S.threads (thread_id, created_at, updated_at)
        VALUES (p_thread, p_at, p_at) ON CONFLICT (thread_id) DO NOTHING;
    END LOOP;
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
    p_values bytea[]) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    -- a key-share lock: a concurrent delete or prune either ran first (and the
    -- checkpoint is gone) or waits for these writes and sees them
    PERFORM 1 FROM @S.threads t WHERE t.thread_id = p_thread FOR KEY SHARE;
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
CREATE FUNCTION @S.checkpoint_prune(p_thread text, p_keep bigint) RETURNS void
LANGUAGE plpgsql AS $fn$
BEGIN
    PERFORM 1 FROM @S.threads t WHERE t.thread_id = p_thread FOR UPDATE;
    IF NOT FOUND THEN
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
CREATE OR REPLACE FUNCTION @S.thread_delete(p_thread text) RETURNS boolean
LANGUAGE plpgsql AS $fn$
BEGIN
    -- wait for appenders and writers first, so nothing they commit is left behind
    PERFORM 1 FROM @S.threads t WHERE t.thread_id = p_thread FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    DELETE FROM @S.messages m WHERE m.thread_id = p_thread;
    DELETE FROM @S.idempotency_keys k WHERE k.thread_id = p_thread;
    DELETE FROM @S.checkpoint_writes w WHERE w.thread_id = p_thread;
    DELETE FROM @S.checkpoint_blobs b WHERE b.thread_id = p_thread;
    DELETE FROM @S.checkpoints c WHERE c.thread_id = p_thread;
    DELETE FROM @S.threads t WHERE t.thread_id = p_thread;
    RETURN true;
END
$fn$;
