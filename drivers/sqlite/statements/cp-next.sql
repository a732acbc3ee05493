-- the checkpoint after key ?1 in its thread (keys up to ?2) and whether its
-- channel list is a delta against ?1's
-- layout 17: the moved columns of a hot row from convo_checkpoint_hot, of a sealed
-- one from its block's segment (convo_sealed: segments.c)
SELECT key, substr(CASE WHEN sealed IS NULL THEN channel_list WHEN sealed = 0 THEN (SELECT h.channel_list FROM convo_checkpoint_hot AS h WHERE h.key = convo_checkpoints.key) ELSE convo_sealed((SELECT g.data FROM convo_checkpoint_segments AS g WHERE g.block = convo_checkpoints.key >> 4), convo_checkpoints.key, 5) END, 1, 1) = x'00' FROM convo_checkpoints
  WHERE key > ?1 AND key <= ?2 ORDER BY key LIMIT 1;
