-- the pending writes of checkpoint ?1 in (task_id, idx) order
SELECT task_id, task_path, idx, channel, type, value
  FROM convo_checkpoint_writes WHERE checkpoint = ?1 ORDER BY task_id, idx;
