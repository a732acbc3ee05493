-- cp-list-all, only what was put before put_order ?3 (?9 as there)
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
  AND c.put_order < ?3 ORDER BY t.id, c.put_order DESC;
