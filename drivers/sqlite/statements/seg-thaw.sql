-- layout 17: when checkpoint ?1 is sealed, the moved columns of every sealed
-- row of its block, read back from the segment, stored hot (then
-- seg-thaw-mark.sql, seg-drop.sql): a write to a sealed checkpoint's columns
-- unseals its block first
INSERT INTO convo_checkpoint_hot(key, meta, body_type, body, created_at, channel_list,
  meta_shape, pending)
  SELECT c.key, convo_sealed(g.data, c.key, 1), convo_sealed(g.data, c.key, 2),
         convo_sealed(g.data, c.key, 3), convo_sealed(g.data, c.key, 4),
         convo_sealed(g.data, c.key, 5), convo_sealed(g.data, c.key, 6),
         convo_sealed(g.data, c.key, 7)
  FROM convo_checkpoints AS c
  LEFT JOIN convo_checkpoint_segments AS g ON g.block = ?1 >> 4
  WHERE c.key >= ?1 & ~15 AND c.key <= ?1 | 15 AND c.sealed = 1;
