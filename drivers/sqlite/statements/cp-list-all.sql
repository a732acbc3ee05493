-- every thread's checkpoints, threads expired at ?1 (now) left out, ?2
-- namespace (NULL: all), with the thread id as column 9 after the columns of
-- cp-get. CROSS JOIN keeps the put_order index the outer loop, so that
-- ORDER BY c.put_order DESC walks it (newest first) without sorting.
SELECT c.key, c.ns, c.id, c.parent_id, c.metadata, c.body_type, c.body,
       c.log_length, c.created_at, t.id
  FROM convo_checkpoints AS c
  CROSS JOIN convo_threads AS t ON t.num = c.thread
  WHERE (t.expires_at IS NULL OR t.expires_at > ?1)
  AND (?2 IS NULL OR +c.ns = ?2)
  ORDER BY c.put_order DESC;
