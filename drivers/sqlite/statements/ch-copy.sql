-- copy: the channel lists of the checkpoints with keys in [?1, ?2] and
-- log_length <= ?5 to the keys from ?3 on
INSERT INTO convo_checkpoint_channels(checkpoint, channel, version)
  SELECT ch.checkpoint - ?1 + ?3, ch.channel, ch.version
  FROM convo_checkpoint_channels AS ch JOIN convo_checkpoints AS c ON c.key = ch.checkpoint
  WHERE c.key >= ?1 AND c.key <= ?2 AND c.log_length <= ?5;
