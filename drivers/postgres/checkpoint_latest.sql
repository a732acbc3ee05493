-- checkpoint_latest.sql: the latest checkpoint (highest put_seq) of thread $1,
-- namespace $2, of a live thread: its row as stored (columns as in
-- checkpoint_get.sql), decoded by the driver (unpack.c, readback.c).
-- The newest checkpoint by a backward scan of checkpoints_by_ns_put under the
-- thread's tid, stopping at the first row: with the ORDER BY ... LIMIT outside
-- the join the planner read and sorted every checkpoint of the thread (4 ms at
-- 3,000 checkpoints, growing with the conversation: docs/postgres.md).
-- (schema 42) The newest are never sealed: segments are not read.
SELECT 0 AS kind, 0::int8 AS r, t.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_id,
       c.metadata, c.log_length, c.created_at, c.body_type, c.body, c.tid, c.channel_set,
       c.versions, c.vals, c.writes, c.put_seq
  FROM @S.threads t
 CROSS JOIN LATERAL (SELECT k.* FROM @S.checkpoints k
                      WHERE k.tid = t.tid AND k.checkpoint_ns = $2::text
                      ORDER BY k.put_seq DESC LIMIT 1) c
 WHERE t.thread_id = $1::text AND (t.expires_at IS NULL OR t.expires_at > now())
