-- thread_list.sql: the live threads after $1 in id order, at most $2.
SELECT thread_id FROM @S.threads t
 WHERE thread_id > $1::text AND (t.expires_at IS NULL OR t.expires_at > now())
 ORDER BY thread_id LIMIT $2::int8
