-- the rows before key ?2 of its thread (keys from ?1), newest first, at most
-- ?3: a delta channel list is decoded against them (lists.c)
-- layout 17: the moved columns of a hot row from convo_checkpoint_hot, of a sealed
-- one from its block's segment (convo_sealed: segments.c)
SELECT key, ns, CASE WHEN sealed IS NULL THEN channel_list WHEN sealed = 0 THEN (SELECT h.channel_list FROM convo_checkpoint_hot AS h WHERE h.key = convo_checkpoints.key) ELSE convo_sealed((SELECT g.data FROM convo_checkpoint_segments AS g WHERE g.block = convo_checkpoints.key >> 4), convo_checkpoints.key, 5) END FROM convo_checkpoints WHERE key >= ?1 AND key < ?2
  ORDER BY key DESC LIMIT ?3;
