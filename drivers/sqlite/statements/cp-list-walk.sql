-- a thread's checkpoints, keys in [?1, ?2], in key order: key, log_length and
-- whether the channel list is a delta against the row before (lists.c)
SELECT key, log_length, substr(channel_list, 1, 1) = x'00' FROM convo_checkpoints
  WHERE key >= ?1 AND key <= ?2 ORDER BY key;
