-- the values of thread ?1 that no remaining checkpoint (keys in [?2, ?3])
-- refers to
-- layout 17: the moved columns of a hot row from convo_checkpoint_hot, of a sealed
-- one from its block's segment (convo_sealed: segments.c)
DELETE FROM convo_blobs WHERE thread = ?1 AND (ns, channel, version)
  NOT IN (SELECT c.ns, l.channel, l.version FROM convo_checkpoints AS c,
          convo_channel_list(CASE WHEN c.sealed IS NULL THEN c.channel_list WHEN c.sealed = 0 THEN (SELECT h.channel_list FROM convo_checkpoint_hot AS h WHERE h.key = c.key) ELSE convo_sealed((SELECT g.data FROM convo_checkpoint_segments AS g WHERE g.block = c.key >> 4), c.key, 5) END) AS l
          WHERE c.key >= ?2 AND c.key <= ?3);
