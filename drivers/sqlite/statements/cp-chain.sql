-- the rows before key ?2 of its thread (keys from ?1), newest first, at most
-- ?3: a delta channel list is decoded against them (lists.c)
SELECT key, ns, channel_list FROM convo_checkpoints WHERE key >= ?1 AND key < ?2
  ORDER BY key DESC LIMIT ?3;
