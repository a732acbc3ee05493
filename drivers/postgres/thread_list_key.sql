-- thread_list_key.sql: thread_list_all.sql in activity order where the where
-- names a declared key (@K, a quoted literal) with a scalar value:
-- for a scalar, containment is equality, so threads_by_key_n ((keyvals ->
-- key), updated_at, thread_id) holds exactly the matching threads in activity
-- order, and the scan starts at the cursor and stops after $3 rows. The rest
-- of the where ($6) is tested on each of them unless $7 says there is none.
-- (The other orders take thread_list_match.sql: the key's threads, sorted.)
SELECT t.thread_id, t.created_at, t.updated_at, t.length,
       CASE WHEN $4::bool THEN coalesce((SELECT x.extra::text FROM @S.thread_extra x
                                          WHERE x.tid = t.tid), '{}') END,
       CASE WHEN $5::bool AND t.length > 0 THEN (SELECT m.body FROM @S.messages m
                                               WHERE m.tid = t.tid AND m.seq = t.length - 1) END
  FROM @S.threads t
 WHERE (t.keyvals -> @K) = ($6::text::jsonb -> @K)
   AND (t.updated_at, t.thread_id) @R ($2::timestamptz, $1::text)
   AND (t.expires_at IS NULL OR t.expires_at > now())
   AND t.thread_id NOT LIKE '.convo-import-%'
   AND ($7::bool OR EXISTS (SELECT 1 FROM @S.thread_extra x
                             WHERE x.tid = t.tid AND x.extra @> $6::text::jsonb))
 ORDER BY t.updated_at @D, t.thread_id @D
 LIMIT $3::int8
