-- checkpoint (?1 thread number, ?2 ns, ?3 id); the columns are the ones
-- cp_from_row() reads, in its order (tests/sqlite.c checks them)
SELECT c.key, c.ns, c.id, coalesce(c.parent_id, p.id) AS parent_id, convo_metadata(ms.name, c.meta) AS metadata,
       bt.name AS body_type, c.body,
       c.log_length, c.created_at, c.channel_list
  FROM convo_checkpoints AS c
  LEFT JOIN convo_names AS bt ON bt.num = c.body_type
  LEFT JOIN convo_names AS ms ON ms.num = c.meta_shape
  LEFT JOIN convo_checkpoints AS p ON p.key = c.key - c.parent
  WHERE c.thread = ?1 AND c.ns = ?2 AND c.id = ?3;
