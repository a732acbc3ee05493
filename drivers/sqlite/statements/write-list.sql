-- the pending writes of checkpoint ?1 in (task_id, idx) order, task ids
-- ordered as their text whether kept as 16 bytes or as text; names as text
SELECT w.task_id, p.name, w.idx, c.name, t.name, w.value
  FROM convo_checkpoint_writes AS w JOIN convo_names AS p ON p.num = w.task_path
  JOIN convo_names AS c ON c.num = w.channel JOIN convo_names AS t ON t.num = w.type
  WHERE w.checkpoint = ?1
  ORDER BY CASE WHEN typeof(w.task_id) = 'blob' AND length(w.task_id) = 16 THEN
             lower(substr(hex(w.task_id), 1, 8) || '-' || substr(hex(w.task_id), 9, 4) || '-' ||
                   substr(hex(w.task_id), 13, 4) || '-' || substr(hex(w.task_id), 17, 4) ||
                   '-' || substr(hex(w.task_id), 21)) ELSE w.task_id END, w.idx;
