-- a checkpoint of thread ?1 that refers to more than ?2 messages, the one
-- that refers to the most, along convo_checkpoints_by_log_length (one seek)
SELECT ns, id, log_length FROM convo_checkpoints
  WHERE thread = ?1 AND log_length > ?2 ORDER BY log_length DESC LIMIT 1;
