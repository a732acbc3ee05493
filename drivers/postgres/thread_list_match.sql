-- thread_list_match.sql: thread_list_all.sql with a where ($6) that
-- thread_list_recent.sql does not serve with a key index (no declared key with a scalar value in
-- it, or the created order): @S.threads_matching() finds every matching
-- thread in thread_extra_contains (GIN, jsonb_path_ops), and those are sorted.
-- Each is looked up by its tid in a LATERAL subquery that cannot be flattened
-- (OFFSET 0), so the matches drive the join: the planner cannot walk the time
-- index instead, testing every thread. The cost grows with the matching
-- threads, not with the others.
SELECT t.thread_id, t.created_at, t.updated_at, t.length,
       CASE WHEN $4::bool THEN coalesce(t.extra_text, m.extra::text) END,
       CASE WHEN $5::bool AND t.length > 0 THEN coalesce(
            CASE WHEN t.preview_seq = t.length - 1 AND t.preview_gen = t.generation
                 THEN t.preview END,
            (SELECT b.body FROM @S.messages b WHERE b.tid = t.tid AND b.seq = t.length - 1)) END
  FROM @S.threads_matching($6::text::jsonb) m,
       LATERAL (SELECT * FROM @S.threads r WHERE r.tid = m.tid OFFSET 0) t
 WHERE (t.@C, t.thread_id) @R ($2::timestamptz, $1::text)
   AND (t.expires_at IS NULL OR t.expires_at > now())
   AND t.thread_id NOT LIKE '.convo-import-%'
 ORDER BY t.@C @D, t.thread_id @D
 LIMIT $3::int8
