-- layout 17: the hot rows of block ?1 sealed (their placeholders stay; their hot
-- columns are in the block's segment: hot-drop.sql deletes them)
UPDATE convo_checkpoints SET sealed = 1
  WHERE key >= ?1 << 4 AND key <= (?1 << 4) | 15 AND sealed = 0;
