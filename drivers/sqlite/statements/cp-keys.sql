-- prune: a thread's checkpoints, keys in [?1, ?2], newest first
SELECT key, ns FROM convo_checkpoints WHERE key >= ?1 AND key <= ?2
  ORDER BY key DESC;
