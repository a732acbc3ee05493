-- one thread's checkpoints, keys in [?1, ?2), newest first; ?3 namespace (NULL:
-- all); ?4 only those put before that put_order (NULL: all); columns as cp-get;
-- ?9 not NULL: metadata and body left NULL (list opts v5 only_channel without a
-- metadata filter: neither is handed out)
SELECT c.key, c.ns, c.id, coalesce(c.parent_id, p.id) AS parent_id, CASE WHEN ?9 IS NULL THEN convo_metadata(ms.name, c.meta) END AS metadata,
       bt.name AS body_type, CASE WHEN ?9 IS NULL THEN c.body END AS body,
       c.log_length, c.created_at, c.channel_list
  FROM convo_checkpoints AS c
  LEFT JOIN convo_names AS bt ON bt.num = c.body_type
  LEFT JOIN convo_names AS ms ON ms.num = c.meta_shape
  LEFT JOIN convo_checkpoints AS p ON p.key = c.key - c.parent_place
  WHERE c.key >= ?1 AND c.key < ?2 AND (?3 IS NULL OR +c.ns = ?3)
  AND (?4 IS NULL OR +c.put_order < ?4) ORDER BY c.key DESC;
