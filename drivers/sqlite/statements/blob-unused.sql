-- the values of thread ?1 that no remaining checkpoint (keys in [?2, ?3])
-- refers to
DELETE FROM convo_blobs WHERE thread = ?1 AND (ns, channel, version)
  NOT IN (SELECT c.ns, l.channel, l.version FROM convo_checkpoints AS c,
          convo_channel_list(c.channel_list) AS l
          WHERE c.key >= ?2 AND c.key <= ?3);
