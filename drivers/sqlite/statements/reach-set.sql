-- thread ?1's bound made exact: the most messages one of its checkpoints
-- refers to, read along its key range
INSERT OR REPLACE INTO convo_checkpoint_reach(thread, log_length)
  SELECT ?1, coalesce(max(log_length), 0) FROM convo_checkpoints
  WHERE key >= ?1 << 32 AND key <= (?1 << 32) + 4294967295;
