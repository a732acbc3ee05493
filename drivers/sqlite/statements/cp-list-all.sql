-- every thread's checkpoints, threads expired at ?1 (now) left out, ?2
-- namespace (NULL: all), with the thread id as column 10 after the columns of
-- cp-get: threads in id (byte) order, each thread's newest first, the order
-- of every driver (docs/checkpoints.md). ?9 not NULL: metadata and body left
-- NULL (as in cp-list-thread).
SELECT c.key, c.ns, c.id, coalesce(c.parent_id, p.id) AS parent_id, CASE WHEN ?9 IS NULL THEN convo_metadata(ms.name, c.meta) END AS metadata,
       bt.name AS body_type, CASE WHEN ?9 IS NULL THEN c.body END AS body,
       c.log_length, c.created_at, c.channel_list, t.id
  FROM convo_checkpoints AS c
  LEFT JOIN convo_names AS bt ON bt.num = c.body_type
  LEFT JOIN convo_names AS ms ON ms.num = c.meta_shape
  LEFT JOIN convo_checkpoints AS p ON p.key = c.key - c.parent_place
  JOIN convo_threads AS t ON t.num = c.thread
  WHERE (t.expires_at IS NULL OR t.expires_at > ?1)
  AND (?2 IS NULL OR +c.ns = ?2)
  ORDER BY t.id, c.put_order DESC;
