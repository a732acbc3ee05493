-- copy: the checkpoints with keys in [?1, ?2] and log_length <= ?5 to thread
-- ?4 at the same places (keys from ?3 on), each put now (?7), put_order after
-- ?6 in their order; a parent named by place that is not copied is named by
-- id; their pending writes (layout 10: in the row; layout 13: also those
-- waiting apart, into the row) with them; an unordered row stays unordered, an
-- ordered one is the first of its block (layout 14) when no ordered row copied
-- is before it there (the copies are a subset, in order, in an empty thread)
INSERT INTO convo_checkpoints(key, thread, ns, id, parent_id, parent_place, meta,
  body_type, body, log_length, created_at, put_order, channel_list, meta_shape, pending,
  unordered)
  SELECT c.key - ?1 + ?3, ?4, c.ns, c.id,
    CASE WHEN p.log_length > ?5 THEN p.id ELSE c.parent_id END,
    CASE WHEN p.log_length > ?5 THEN NULL ELSE c.parent_place END,
    c.meta, c.body_type, c.body, c.log_length,
    ?7, ?6 + row_number() OVER (ORDER BY c.key), c.channel_list, c.meta_shape,
    coalesce((SELECT s.pending FROM convo_checkpoint_pending AS s WHERE s.key = c.key),
             c.pending),
    CASE WHEN c.unordered = 1 THEN 1
         WHEN row_number() OVER (PARTITION BY c.key >> 4, c.unordered = 1 ORDER BY c.key) = 1
         THEN 2 ELSE 0 END
  FROM convo_checkpoints AS c LEFT JOIN convo_checkpoints AS p ON p.key = c.key - c.parent_place
  WHERE c.key >= ?1 AND c.key <= ?2 AND c.log_length <= ?5
  ORDER BY c.key;
