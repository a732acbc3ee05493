-- checkpoint_list.sql: checkpoints newest first per thread, threads in id
-- order; each filter may be NULL: $1 thread, $2 namespace, $3 before (a
-- checkpoint id of thread $6 and namespace $7), $4 metadata it contains, $5
-- limit. Kind 9 says `before` names no checkpoint. put_seq is one order for
-- the whole store, so `before` compares with every thread's.
-- Rows as in checkpoint_get.sql; only checkpoints of live threads. A listing
-- of one channel (list opts v5 only_channel) runs checkpoint_list_channel.sql.
WITH bp AS (
    SELECT min(c.put_seq) AS p FROM @S.threads t
      JOIN @S.checkpoints c ON c.tid = t.tid
     WHERE $3::text IS NOT NULL AND t.thread_id = $6::text
       AND (t.expires_at IS NULL OR t.expires_at > now())
       AND c.checkpoint_ns = $7::text AND c.checkpoint_id = @S.id_pack($3::text)),
-- Each thread's newest first by a LATERAL ... LIMIT under its tid: with a
-- namespace, a backward scan of checkpoints_by_ns_put that stops after the
-- limit (the first branch; the one-time filters on $2 run only one); over all
-- namespaces a sort of the thread's checkpoints. A join ordered and limited
-- outside read and sorted every checkpoint of the thread (3,180 rows for a
-- page of 150 at 1,000 LangGraph turns, so every page grew with the thread).
cand AS (
    SELECT c.*, t.thread_id FROM @S.threads t CROSS JOIN bp
     CROSS JOIN LATERAL (SELECT k.* FROM @S.checkpoints k
                          WHERE k.tid = t.tid AND k.checkpoint_ns = $2::text
                            AND k.put_seq < CASE WHEN $3::text IS NULL THEN 9223372036854775807 ELSE bp.p END
                            AND ($4::text IS NULL OR @S.meta_jsonb(k.metadata) @> $4::text::jsonb)
                          ORDER BY k.put_seq DESC LIMIT $5::int8) c
     WHERE $2::text IS NOT NULL AND (t.expires_at IS NULL OR t.expires_at > now())
       AND ($1::text IS NULL OR t.thread_id = $1::text)
    UNION ALL
    SELECT c.*, t.thread_id FROM @S.threads t CROSS JOIN bp
     CROSS JOIN LATERAL (SELECT k.* FROM @S.checkpoints k
                          WHERE k.tid = t.tid
                            AND k.put_seq < CASE WHEN $3::text IS NULL THEN 9223372036854775807 ELSE bp.p END
                            AND ($4::text IS NULL OR @S.meta_jsonb(k.metadata) @> $4::text::jsonb)
                          ORDER BY k.put_seq DESC LIMIT $5::int8) c
     WHERE $2::text IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())
       AND ($1::text IS NULL OR t.thread_id = $1::text)),
sel AS (
    SELECT x.*, row_number() OVER (ORDER BY x.thread_id, x.put_seq DESC) AS r
      FROM (SELECT * FROM cand ORDER BY thread_id, put_seq DESC LIMIT $5::int8) x)
SELECT 0 AS kind, s.r, s.thread_id, s.checkpoint_ns, @S.id_text(s.checkpoint_id),
       @S.id_text(s.parent_id), @S.meta_text(s.metadata), NULL::text, s.log_length, s.created_at,
       (SELECT n.name FROM @S.checkpoint_names n WHERE n.num = s.body_type), s.body
  FROM sel s
UNION ALL
SELECT 1, s.r, NULL, NULL, NULL, (SELECT n.name FROM @S.checkpoint_names n WHERE n.num = u.ch),
       @S.ver_text(u.ver), NULL, NULL, NULL,
       (SELECT n.name FROM @S.checkpoint_names n WHERE n.num = coalesce(u.type, v.type)),
       CASE WHEN u.type IS NULL THEN v.value ELSE u.value END
  FROM sel s CROSS JOIN LATERAL @S.channel_vals(s.channel_set, s.versions, s.vals) AS u
  -- a value not in the row (v29: over 255 bytes; v28 rows: every one) by
  -- the blobs' primary key: a plain join lets the planner, which takes
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
UNION ALL
SELECT 9, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
  FROM bp WHERE $3::text IS NOT NULL AND bp.p IS NULL
ORDER BY 2, 1
