-- the checkpoint after key ?1 in its thread (keys up to ?2) and whether its
-- channel list is a delta against ?1's
SELECT key, substr(channel_list, 1, 1) = x'00' FROM convo_checkpoints
  WHERE key > ?1 AND key <= ?2 ORDER BY key LIMIT 1;
