-- copy: the checkpoints with keys in [?1, ?2] and log_length <= ?5 to thread
-- ?4 at the same places (keys from ?3 on), each put now (?7), put_order after
-- ?6 in their order; a parent named by place that is not copied is named by
-- id; their pending writes (layout 10: in the row; layout 13: also those
-- waiting apart, into the row) with them; an unordered row stays unordered, an
-- ordered one is the first of its block (layout 14) when no ordered row copied
-- is before it there (the copies are a subset, in order, in an empty thread)
-- layout 17: the moved columns of a hot row from convo_checkpoint_hot, of a sealed
-- one from its block's segment (convo_sealed: segments.c)
INSERT INTO convo_checkpoints(key, thread, ns, id, parent_id, parent_place, meta,
  body_type, body, log_length, created_at, put_order, channel_list, meta_shape, pending,
  unordered)
  SELECT c.key - ?1 + ?3, ?4, c.ns, c.id,
    CASE WHEN p.log_length > ?5 THEN p.id ELSE c.parent_id END,
    CASE WHEN p.log_length > ?5 THEN NULL ELSE c.parent_place END,
    CASE WHEN c.sealed IS NULL THEN c.meta WHEN c.sealed = 0 THEN (SELECT h.meta FROM convo_checkpoint_hot AS h WHERE h.key = c.key) ELSE convo_sealed((SELECT g.data FROM convo_checkpoint_segments AS g WHERE g.block = c.key >> 4), c.key, 1) END, CASE WHEN c.sealed IS NULL THEN c.body_type WHEN c.sealed = 0 THEN (SELECT h.body_type FROM convo_checkpoint_hot AS h WHERE h.key = c.key) ELSE convo_sealed((SELECT g.data FROM convo_checkpoint_segments AS g WHERE g.block = c.key >> 4), c.key, 2) END, CASE WHEN c.sealed IS NULL THEN c.body WHEN c.sealed = 0 THEN (SELECT h.body FROM convo_checkpoint_hot AS h WHERE h.key = c.key) ELSE convo_sealed((SELECT g.data FROM convo_checkpoint_segments AS g WHERE g.block = c.key >> 4), c.key, 3) END, c.log_length,
    ?7, ?6 + row_number() OVER (ORDER BY c.key), CASE WHEN c.sealed IS NULL THEN c.channel_list WHEN c.sealed = 0 THEN (SELECT h.channel_list FROM convo_checkpoint_hot AS h WHERE h.key = c.key) ELSE convo_sealed((SELECT g.data FROM convo_checkpoint_segments AS g WHERE g.block = c.key >> 4), c.key, 5) END, CASE WHEN c.sealed IS NULL THEN c.meta_shape WHEN c.sealed = 0 THEN (SELECT h.meta_shape FROM convo_checkpoint_hot AS h WHERE h.key = c.key) ELSE convo_sealed((SELECT g.data FROM convo_checkpoint_segments AS g WHERE g.block = c.key >> 4), c.key, 6) END,
    coalesce((SELECT s.pending FROM convo_checkpoint_pending AS s WHERE s.key = c.key),
             CASE WHEN c.sealed IS NULL THEN c.pending WHEN c.sealed = 0 THEN (SELECT h.pending FROM convo_checkpoint_hot AS h WHERE h.key = c.key) ELSE convo_sealed((SELECT g.data FROM convo_checkpoint_segments AS g WHERE g.block = c.key >> 4), c.key, 7) END),
    CASE WHEN c.unordered = 1 THEN 1
         WHEN row_number() OVER (PARTITION BY c.key >> 4, c.unordered = 1 ORDER BY c.key) = 1
         THEN 2 ELSE 0 END
  FROM convo_checkpoints AS c LEFT JOIN convo_checkpoints AS p ON p.key = c.key - c.parent_place
  WHERE c.key >= ?1 AND c.key <= ?2 AND c.log_length <= ?5
  ORDER BY c.key;
