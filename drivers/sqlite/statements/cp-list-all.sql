-- every thread's checkpoints, threads expired at ?1 (now) left out, ?2
-- namespace (NULL: all), with the thread id as column 10 after the columns of
-- cp-get: threads in id (byte) order, each thread's newest first, the order
-- of every driver (docs/checkpoints.md). ?9 not NULL: metadata and body left
-- NULL (as in cp-list-thread).
-- layout 17: the moved columns of a hot row from convo_checkpoint_hot, of a sealed
-- one from its block's segment (convo_sealed: segments.c)
SELECT c.key, c.ns, c.id, coalesce(c.parent_id, p.id) AS parent_id, CASE WHEN ?9 IS NULL THEN convo_metadata(ms.name, CASE WHEN c.sealed IS NULL THEN c.meta WHEN c.sealed = 0 THEN h.meta ELSE convo_sealed(g.data, c.key, 1) END) END AS metadata,
       bt.name AS body_type, CASE WHEN ?9 IS NULL THEN CASE WHEN c.sealed IS NULL THEN c.body WHEN c.sealed = 0 THEN h.body ELSE convo_sealed(g.data, c.key, 3) END END AS body,
       c.log_length, CASE WHEN c.sealed IS NULL THEN c.created_at WHEN c.sealed = 0 THEN h.created_at ELSE convo_sealed(g.data, c.key, 4) END AS created_at,
       CASE WHEN c.sealed IS NULL THEN c.channel_list WHEN c.sealed = 0 THEN h.channel_list ELSE convo_sealed(g.data, c.key, 5) END AS channel_list, t.id
  FROM convo_checkpoints AS c
  LEFT JOIN convo_checkpoint_hot AS h ON c.sealed = 0 AND h.key = c.key
  LEFT JOIN convo_checkpoint_segments AS g ON c.sealed = 1 AND g.block = c.key >> 4
  LEFT JOIN convo_names AS bt ON bt.num = CASE WHEN c.sealed IS NULL THEN c.body_type WHEN c.sealed = 0 THEN h.body_type ELSE convo_sealed(g.data, c.key, 2) END
  LEFT JOIN convo_names AS ms ON ms.num = CASE WHEN c.sealed IS NULL THEN c.meta_shape WHEN c.sealed = 0 THEN h.meta_shape ELSE convo_sealed(g.data, c.key, 6) END
  LEFT JOIN convo_checkpoints AS p ON p.key = c.key - c.parent_place
  JOIN convo_threads AS t ON t.num = c.thread
  WHERE (t.expires_at IS NULL OR t.expires_at > ?1)
  AND (?2 IS NULL OR +c.ns = ?2)
  ORDER BY t.id, c.put_order DESC;
