-- the key of a thread's newest checkpoint, keys in [?1, ?2]
SELECT key FROM convo_checkpoints WHERE key >= ?1 AND key <= ?2
  ORDER BY key DESC LIMIT 1;
