-- checkpoint_latest.sql: the latest checkpoint (highest put_seq) of thread $1,
-- namespace $2; rows as in checkpoint_get.sql, of live threads only.
WITH sel AS (
    SELECT c.*, 0::int8 AS r FROM @S.checkpoints c
      JOIN @S.threads t ON t.thread_id = c.thread_id
       AND (t.expires_at IS NULL OR t.expires_at > now())
     WHERE c.thread_id = $1::text AND c.checkpoint_ns = $2::text
     ORDER BY c.put_seq DESC LIMIT 1)
SELECT 0 AS kind, s.r, s.thread_id, s.checkpoint_ns, s.checkpoint_id, s.parent_id,
       s.metadata::text, NULL::text, s.log_length, s.created_at, s.body_type, s.body
  FROM sel s
UNION ALL
SELECT 1, s.r, NULL, NULL, NULL, u.ch, u.ver, NULL, NULL, NULL, v.type, v.value
  FROM sel s CROSS JOIN LATERAL unnest(s.channels, s.versions) AS u(ch, ver)
  LEFT JOIN @S.checkpoint_blobs v ON v.thread_id = s.thread_id
   AND v.checkpoint_ns = s.checkpoint_ns AND v.channel = u.ch AND v.version = u.ver
UNION ALL
SELECT 2, s.r, NULL, NULL, NULL, w.task_id, w.task_path, w.channel, w.idx, NULL, w.type,
       w.value
  FROM sel s JOIN @S.checkpoint_writes w
    ON w.thread_id = s.thread_id AND w.checkpoint_ns = s.checkpoint_ns
   AND w.checkpoint_id = s.checkpoint_id
ORDER BY 2, 1
