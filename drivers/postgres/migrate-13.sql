-- migrate-13.sql: schema version 13 — thread_copy(): a fork that copies the
-- checkpoints too (LangGraph's copy_thread), in the caller's one statement,
-- so in one transaction: the copy is whole or not there. Nothing else changes.
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).

-- thread_fork (same arguments and checks), then every checkpoint of p_src
-- whose log_length is within the messages copied, in put order, each with a
-- new put_seq (so the copy lists in the source's order) and created_at p_at;
-- their pending writes; and the values they list.
CREATE FUNCTION @S.thread_copy(p_src text, p_dst text, p_upto bigint, p_generation bigint,
    p_at timestamptz, p_ttl interval) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    src bigint;
    dst bigint;
    len bigint;
    c record;
BEGIN
    PERFORM @S.thread_fork(p_src, p_dst, p_upto, p_generation, p_at, p_ttl);
    SELECT t.tid INTO src FROM @S.threads t WHERE t.thread_id = p_src;
    SELECT t.tid, t.length INTO dst, len FROM @S.threads t WHERE t.thread_id = p_dst;
    FOR c IN SELECT * FROM @S.checkpoints k WHERE k.tid = src AND k.log_length <= len
              ORDER BY k.put_seq LOOP
        INSERT INTO @S.checkpoints (tid, put_seq, log_length, created_at, checkpoint_ns,
            checkpoint_id, parent_id, body_type, metadata, channel_versions, body)
        VALUES (dst, nextval('@S.checkpoint_put_seq'), c.log_length, p_at, c.checkpoint_ns,
            c.checkpoint_id, c.parent_id, c.body_type, c.metadata, c.channel_versions, c.body);
    END LOOP;
    INSERT INTO @S.checkpoint_writes (tid, idx, checkpoint_ns, checkpoint_id, task_id,
        task_path, channel, type, value)
    SELECT dst, w.idx, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.task_path, w.channel,
           w.type, w.value
      FROM @S.checkpoint_writes w
     WHERE w.tid = src AND EXISTS (
           SELECT 1 FROM @S.checkpoints k WHERE k.tid = dst
              AND k.checkpoint_ns = w.checkpoint_ns AND k.checkpoint_id = w.checkpoint_id);
    INSERT INTO @S.checkpoint_blobs (tid, checkpoint_ns, channel, version, type, value)
    SELECT dst, b.checkpoint_ns, b.channel, b.version, b.type, b.value
      FROM @S.checkpoint_blobs b
     WHERE b.tid = src AND EXISTS (
           SELECT 1 FROM @S.checkpoints k, @S.channel_versions(k.channel_versions) AS u
            WHERE k.tid = dst AND k.checkpoint_ns = b.checkpoint_ns AND u.ch = b.channel
              AND u.ver = b.version);
END
$fn$;
