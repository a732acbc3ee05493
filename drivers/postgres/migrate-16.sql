-- migrate-16.sql: schema version 16 — thread_copy() (version 13) replaced, same
-- signature: the values to copy are matched against one hashed set of what
-- the copied checkpoints list, not looked up checkpoint by checkpoint for each
-- value (which a plan made before the tables were analyzed could turn into
-- values x checkpoints), and the checkpoints are inserted in one statement.
-- Nothing else changes.
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).

-- thread_fork (same arguments and checks), then every checkpoint of p_src
-- whose log_length is within the messages copied, each with a new put_seq in
-- the source's put order (the sequence's numbers, taken at once and sorted,
-- given out by rank) and created_at p_at; their pending writes; and the
-- values they list.
CREATE OR REPLACE FUNCTION @S.thread_copy(p_src text, p_dst text, p_upto bigint,
    p_generation bigint, p_at timestamptz, p_ttl interval) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    src bigint;
    dst bigint;
    len bigint;
    n bigint;
    seqs bigint[];
BEGIN
    PERFORM @S.thread_fork(p_src, p_dst, p_upto, p_generation, p_at, p_ttl);
    SELECT t.tid INTO src FROM @S.threads t WHERE t.thread_id = p_src;
    SELECT t.tid, t.length INTO dst, len FROM @S.threads t WHERE t.thread_id = p_dst;
    SELECT count(*) INTO n FROM @S.checkpoints k WHERE k.tid = src AND k.log_length <= len;
    IF n = 0 THEN
        RETURN;
    END IF;
    SELECT array_agg(x.s ORDER BY x.s) INTO seqs FROM (
        SELECT nextval('@S.checkpoint_put_seq') AS s FROM generate_series(1, n)) x;
    INSERT INTO @S.checkpoints (tid, put_seq, log_length, created_at, checkpoint_ns,
        checkpoint_id, parent_id, body_type, metadata, channel_versions, body)
    SELECT dst, seqs[k.rank], k.log_length, p_at, k.checkpoint_ns, k.checkpoint_id,
           k.parent_id, k.body_type, k.metadata, k.channel_versions, k.body
      FROM (SELECT c.*, row_number() OVER (ORDER BY c.put_seq) AS rank
              FROM @S.checkpoints c WHERE c.tid = src AND c.log_length <= len) k;
    INSERT INTO @S.checkpoint_writes (tid, idx, checkpoint_ns, checkpoint_id, task_id,
        task_path, channel, type, value)
    SELECT dst, w.idx, w.checkpoint_ns, w.checkpoint_id, w.task_id, w.task_path, w.channel,
           w.type, w.value
      FROM @S.checkpoint_writes w
     WHERE w.tid = src AND (w.checkpoint_ns, w.checkpoint_id) IN (
           SELECT k.checkpoint_ns, k.checkpoint_id FROM @S.checkpoints k WHERE k.tid = dst);
    INSERT INTO @S.checkpoint_blobs (tid, checkpoint_ns, channel, version, type, value)
    SELECT dst, b.checkpoint_ns, b.channel, b.version, b.type, b.value
      FROM @S.checkpoint_blobs b
     WHERE b.tid = src AND (b.checkpoint_ns, b.channel, b.version) IN (
           SELECT DISTINCT k.checkpoint_ns, u.ch, u.ver
             FROM @S.checkpoints k, @S.channel_versions(k.channel_versions) AS u
            WHERE k.tid = dst);
END
$fn$;
