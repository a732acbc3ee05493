-- layout 17: the segment of checkpoint ?1's block once none of its rows is sealed
DELETE FROM convo_checkpoint_segments WHERE block = ?1 >> 4
  AND NOT EXISTS (SELECT 1 FROM convo_checkpoints
                  WHERE key >= ?1 & ~15 AND key <= ?1 | 15 AND sealed = 1);
