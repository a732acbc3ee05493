-- copy: the pending writes of the checkpoints with keys in [?1, ?2] and
-- log_length <= ?5 to the keys from ?3 on
INSERT INTO convo_checkpoint_writes(checkpoint, task_id, idx, task_path, channel, type, value)
  SELECT w.checkpoint - ?1 + ?3, w.task_id, w.idx, w.task_path, w.channel, w.type, w.value
  FROM convo_checkpoint_writes AS w JOIN convo_checkpoints AS c ON c.key = w.checkpoint
  WHERE c.key >= ?1 AND c.key <= ?2 AND c.log_length <= ?5;
