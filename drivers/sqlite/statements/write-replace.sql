-- a pending write with a negative idx (errors, interrupts): replaces; columns
-- as write-keep.sql
INSERT OR REPLACE INTO convo_checkpoint_writes(checkpoint, task_id,
  idx, task_path, channel, type, value)
  VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7);
