-- thread_list_match.sql: thread_list_all.sql with a where ($6) that
-- thread_list_key.sql does not serve (no declared key with a scalar value in
-- it, or the created order): @S.threads_matching() finds every matching
-- thread in thread_extra_contains (GIN, jsonb_path_ops), and those are sorted.
-- The cost grows with the matching threads, not with the others.
SELECT t.thread_id, t.created_at, t.updated_at, t.length,
       CASE WHEN $4::bool THEN m.extra::text END,
       CASE WHEN $5::bool AND t.length > 0 THEN (SELECT b.body FROM @S.messages b
                                               WHERE b.tid = t.tid AND b.seq = t.length - 1) END
  FROM @S.threads_matching($6::text::jsonb) m JOIN @S.threads t ON t.tid = m.tid
 WHERE (t.@C, t.thread_id) @R ($2::timestamptz, $1::text)
   AND (t.expires_at IS NULL OR t.expires_at > now())
   AND t.thread_id NOT LIKE '.convo-import-%'
 ORDER BY t.@C @D, t.thread_id @D
 LIMIT $3::int8
