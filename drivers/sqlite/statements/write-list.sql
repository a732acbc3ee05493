-- the pending writes of checkpoint ?1 in (task_id, idx) order, task ids
-- ordered as their text whether kept as 16 bytes or as text
SELECT task_id, task_path, idx, channel, type, value
  FROM convo_checkpoint_writes WHERE checkpoint = ?1
  ORDER BY CASE WHEN typeof(task_id) = 'blob' AND length(task_id) = 16 THEN
             lower(substr(hex(task_id), 1, 8) || '-' || substr(hex(task_id), 9, 4) || '-' ||
                   substr(hex(task_id), 13, 4) || '-' || substr(hex(task_id), 17, 4) || '-' ||
                   substr(hex(task_id), 21)) ELSE task_id END, idx;
