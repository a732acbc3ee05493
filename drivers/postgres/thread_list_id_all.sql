-- thread_list_id_all.sql: thread_list_all.sql in id order: the primary key
-- (thread_id, byte order) gives it; @D ASC (or DESC reversed), @R > (or <);
-- $1 the cursor's id (no cursor: '' ascending, a string above every thread id
-- descending); $2 unused.
SELECT t.thread_id, t.created_at, t.updated_at, t.length,
       CASE WHEN $4::bool THEN coalesce(t.extra_text, (SELECT x.extra::text
                                                          FROM @S.thread_extra x
                                                         WHERE x.tid = t.tid), '{}') END,
       CASE WHEN $5::bool AND t.length > 0 THEN coalesce(
            CASE WHEN t.preview_seq = t.length - 1 AND t.preview_gen = t.generation
                 THEN t.preview END,
            (SELECT m.body FROM @S.messages m WHERE m.tid = t.tid AND m.seq = t.length - 1)) END
  FROM @S.threads t
 WHERE t.thread_id @R $1::text
   AND (t.expires_at IS NULL OR t.expires_at > now())
   AND t.thread_id NOT LIKE '.convo-import-%'
 ORDER BY t.thread_id @D
 LIMIT $3::int8
