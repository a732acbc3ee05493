-- a pending write with idx >= 0: the first one of (task, idx) stays; ?2 as
-- sq_bind_id() binds it, ?4 task path, ?5 channel, ?6 type: numbers in convo_names
INSERT OR IGNORE INTO convo_checkpoint_writes(checkpoint, task_id, idx,
  task_path, channel, type, value) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7);
