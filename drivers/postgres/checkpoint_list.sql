-- checkpoint_list.sql: checkpoints newest first per thread, threads in id
-- order; each filter may be NULL: $1 thread, $2 namespace, $3 before (a
-- checkpoint id of thread $6 and namespace $7), $4 metadata it contains, $5
-- limit. Kind 9 says `before` names no checkpoint. put_seq is one order for
-- the whole store, so `before` compares with every thread's.
-- Rows as in checkpoint_get.sql; only checkpoints of live threads.
WITH bp AS (
    SELECT min(c.put_seq) AS p FROM @S.threads t
      JOIN @S.checkpoints c ON c.tid = t.tid
     WHERE $3::text IS NOT NULL AND t.thread_id = $6::text
       AND (t.expires_at IS NULL OR t.expires_at > now())
       AND c.checkpoint_ns = $7::text AND c.checkpoint_id = $3::text),
sel AS (
    SELECT c.*, t.thread_id, row_number() OVER (ORDER BY t.thread_id, c.put_seq DESC) AS r
      FROM @S.threads t
      JOIN @S.checkpoints c ON c.tid = t.tid, bp
     WHERE (t.expires_at IS NULL OR t.expires_at > now())
       AND ($1::text IS NULL OR t.thread_id = $1::text)
       AND ($2::text IS NULL OR c.checkpoint_ns = $2::text)
       AND ($3::text IS NULL OR c.put_seq < bp.p)
       AND ($4::text IS NULL OR c.metadata @> $4::text::jsonb)
     ORDER BY t.thread_id, c.put_seq DESC LIMIT $5::int8)
SELECT 0 AS kind, s.r, s.thread_id, s.checkpoint_ns, s.checkpoint_id, s.parent_id,
       s.metadata::text, NULL::text, s.log_length, s.created_at, s.body_type, s.body
  FROM sel s
UNION ALL
SELECT 1, s.r, NULL, NULL, NULL, u.ch, u.ver, NULL, NULL, NULL, v.type, v.value
  FROM sel s CROSS JOIN LATERAL @S.channel_versions(s.channel_versions) AS u
  -- each value by its primary key: a plain join lets the planner, which takes
  -- channel_versions() for 1,000 rows, hash the whole blobs table (every
  -- thread's values read on every get); LIMIT 1 keeps it a per-row lookup
  LEFT JOIN LATERAL (SELECT b.type, b.value FROM @S.checkpoint_blobs b
                      WHERE b.tid = s.tid AND b.checkpoint_ns = s.checkpoint_ns
                        AND b.channel = u.ch AND b.version = u.ver LIMIT 1) v ON true
UNION ALL
SELECT 2, s.r, NULL, NULL, NULL, w.task_id, w.task_path, w.channel, w.idx, NULL, w.type,
       w.value
  FROM sel s JOIN @S.checkpoint_writes w
    ON w.tid = s.tid AND w.checkpoint_ns = s.checkpoint_ns
   AND w.checkpoint_id = s.checkpoint_id
UNION ALL
SELECT 9, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
  FROM bp WHERE $3::text IS NOT NULL AND bp.p IS NULL
ORDER BY 2, 1
