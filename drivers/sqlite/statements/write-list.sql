-- the pending writes of checkpoint ?1 in (task_id, idx) order, which is the
-- record's (pending.c: task ids by their text, whether kept as 16 bytes or as
-- text); names as text; ?2 a channel name: the writes to it alone (NULL: all);
-- layout 13: the record waiting apart when there is one
SELECT w.task_id, p.name, w.idx, c.name, t.name, w.value
  FROM convo_checkpoints AS k LEFT JOIN convo_checkpoint_pending AS s ON s.key = k.key,
       convo_pending_list(coalesce(s.pending, k.pending)) AS w
  JOIN convo_names AS p ON p.num = w.task_path
  JOIN convo_names AS c ON c.num = w.channel JOIN convo_names AS t ON t.num = w.type
  WHERE k.key = ?1 AND (?2 IS NULL OR c.name = ?2)
  ORDER BY w.rowid;
