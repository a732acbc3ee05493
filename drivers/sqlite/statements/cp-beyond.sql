-- a checkpoint of thread ?1 that refers to more than ?2 messages, the one
-- that refers to the most: a walk of the thread's key range (layout 9 has no
-- index on log_length: docs/sqlite.md, "Layout 9")
SELECT ns, id, log_length FROM convo_checkpoints
  WHERE key >= ?1 << 32 AND key <= (?1 << 32) + 4294967295 AND log_length > ?2
  ORDER BY log_length DESC LIMIT 1;
