-- the checkpoints of thread ?1 that refer to more than ?2 messages
DELETE FROM convo_checkpoints
  WHERE key >= ?1 << 32 AND key <= (?1 << 32) + 4294967295 AND log_length > ?2;
