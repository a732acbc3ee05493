-- checkpoint_get.sql: checkpoint $3 of thread $1, namespace $2.
-- The rows, one per item, ordered by checkpoint (r), then kind: 0 the checkpoint
-- itself, 1 a channel and its value, 2 a pending write (names and versions
-- back from their stored forms: migrate-19.sql). Columns: kind, r,
-- thread_id, ns, id, s1, s2, s3, n, at, type, value (checkpoints.c reads them).
-- Only checkpoints of live threads (no deadline, or one ahead).
WITH sel AS (
    SELECT c.*, t.thread_id, 0::int8 AS r FROM @S.threads t
      JOIN @S.checkpoints c ON c.tid = t.tid
     WHERE t.thread_id = $1::text AND (t.expires_at IS NULL OR t.expires_at > now())
       AND c.checkpoint_ns = $2::text
       AND c.checkpoint_id = @S.id_pack($3::text))
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
