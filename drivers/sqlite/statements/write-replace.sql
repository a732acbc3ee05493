-- a pending write with a negative idx (errors, interrupts): replaces
INSERT OR REPLACE INTO convo_checkpoint_writes(checkpoint, task_id,
  idx, task_path, channel, type, value)
  VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7);
