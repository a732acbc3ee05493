-- checkpoint_unseal_rows.sql: every segment of thread $1 (schema 42), locked,
-- in a transaction that locked the thread's row first (segments_none()), so
-- no seal runs until it ends: tid, namespace, first id, the packed columns.
SELECT s.tid, s.checkpoint_ns, s.first_id, s.data
  FROM @S.threads t JOIN @S.checkpoint_segments s ON s.tid = t.tid
 WHERE t.thread_id = $1::text
 ORDER BY s.checkpoint_ns, s.first_id
   FOR UPDATE OF s
