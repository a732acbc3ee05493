-- thread_list_id_match.sql: thread_list_match.sql in id order.
SELECT t.thread_id, t.created_at, t.updated_at, t.length,
       CASE WHEN $4::bool THEN coalesce(t.extra_text, m.extra::text) END,
       CASE WHEN $5::bool AND t.length > 0 THEN coalesce(
            CASE WHEN t.preview_seq = t.length - 1 AND t.preview_gen = t.generation
                 THEN t.preview END,
            (SELECT b.body FROM @S.messages b WHERE b.tid = t.tid AND b.seq = t.length - 1)) END
  FROM @S.threads_matching($6::text::jsonb) m,
       LATERAL (SELECT * FROM @S.threads r WHERE r.tid = m.tid OFFSET 0) t
 WHERE t.thread_id @R $1::text
   AND (t.expires_at IS NULL OR t.expires_at > now())
   AND t.thread_id NOT LIKE '.convo-import-%'
 ORDER BY t.thread_id @D
 LIMIT $3::int8
