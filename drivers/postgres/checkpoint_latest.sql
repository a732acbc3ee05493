-- checkpoint_latest.sql: the latest checkpoint (highest put_seq) of thread $1,
-- namespace $2; rows as in checkpoint_get.sql, of live threads only.
-- The newest checkpoint by a backward scan of checkpoints_by_ns_put under the
-- thread's tid, stopping at the first row: with the ORDER BY ... LIMIT outside
-- the join the planner read and sorted every checkpoint of the thread (4 ms at
-- 3,000 checkpoints, growing with the conversation: docs/postgres.md).
WITH sel AS (
    SELECT c.*, t.thread_id, 0::int8 AS r FROM @S.threads t
     CROSS JOIN LATERAL (SELECT k.* FROM @S.checkpoints k
                          WHERE k.tid = t.tid AND k.checkpoint_ns = $2::text
                          ORDER BY k.put_seq DESC LIMIT 1) c
     WHERE t.thread_id = $1::text AND (t.expires_at IS NULL OR t.expires_at > now()))
SELECT 0 AS kind, s.r, s.thread_id, s.checkpoint_ns, @S.id_text(s.checkpoint_id),
       @S.id_text(s.parent_id), @S.meta_text(s.metadata), NULL::text, s.log_length, s.created_at,
       (SELECT n.name FROM @S.checkpoint_names n WHERE n.num = s.body_type), s.body
  FROM sel s
UNION ALL
SELECT 1, s.r, NULL, NULL, NULL, (SELECT n.name FROM @S.checkpoint_names n WHERE n.num = u.ch),
       @S.ver_text(u.ver), NULL, NULL, NULL,
       (SELECT n.name FROM @S.checkpoint_names n WHERE n.num = coalesce(u.type, v.type)),
       CASE WHEN u.type IS NULL THEN v.value ELSE u.value END
  -- (v41) channel_vals() as PL/pgSQL: compiled and planned once a connection,
  -- not again in each statement that reads a checkpoint (migrate-41.sql)
  FROM sel s CROSS JOIN LATERAL @S.channel_vals_proc(s.channel_set, s.versions, s.vals) AS u
  -- a value not in the row (v29: over 255 bytes; v28 rows: every one) by
  -- the blobs' primary key: a plain join lets the planner, which took
  -- channel_vals() for 1,000 rows, hash the whole blobs table (every
  -- thread's values read on every get); LIMIT 1 keeps it a per-row lookup
  LEFT JOIN LATERAL (SELECT b.type, b.value FROM @S.checkpoint_blobs b
                      WHERE u.type IS NULL AND b.tid = s.tid
                        AND b.checkpoint_ns = s.checkpoint_ns
                        AND b.channel = u.ch AND b.version = u.ver LIMIT 1) v ON true
UNION ALL
SELECT 2, s.r, NULL, NULL, NULL, @S.id_text(w.task_id),
       (SELECT n.name FROM @S.checkpoint_names n WHERE n.num = w.task_path),
       (SELECT n.name FROM @S.checkpoint_names n WHERE n.num = w.channel), w.idx, NULL,
       (SELECT n.name FROM @S.checkpoint_names n WHERE n.num = w.type), w.value
  FROM sel s CROSS JOIN LATERAL unnest(s.writes) AS e
  CROSS JOIN LATERAL @S.write_fields(e) AS w  -- (v30) packed elements
ORDER BY 2, 1
