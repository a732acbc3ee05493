-- layout 17: the rows of block ?1 (key >> 4) not sealed yet, in key order, with
-- their moved columns, hot or in the row (segments.c: its column order)
SELECT c.key, coalesce(h.meta, c.meta), coalesce(h.body_type, c.body_type),
       CASE WHEN c.sealed = 0 THEN h.body ELSE c.body END,
       CASE WHEN c.sealed = 0 THEN h.created_at ELSE c.created_at END,
       CASE WHEN c.sealed = 0 THEN h.channel_list ELSE c.channel_list END,
       CASE WHEN c.sealed = 0 THEN h.meta_shape ELSE c.meta_shape END,
       CASE WHEN c.sealed = 0 THEN h.pending ELSE c.pending END
  FROM convo_checkpoints AS c LEFT JOIN convo_checkpoint_hot AS h ON c.sealed = 0 AND h.key = c.key
  WHERE c.key >= ?1 << 4 AND c.key <= (?1 << 4) | 15 AND (c.sealed IS NULL OR c.sealed = 0)
  ORDER BY c.key;
