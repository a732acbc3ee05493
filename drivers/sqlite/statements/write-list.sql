-- the pending writes of checkpoint ?1 in (task_id, idx) order, which is the
-- record's (pending.c: task ids by their text, whether kept as 16 bytes or as
-- text); names as text; ?2 a channel name: the writes to it alone (NULL: all);
-- layout 13: the record waiting apart when there is one
-- layout 17: the moved columns of a hot row from convo_checkpoint_hot, of a sealed
-- one from its block's segment (convo_sealed: segments.c)
SELECT w.task_id, p.name, w.idx, c.name, t.name, w.value
  FROM convo_checkpoints AS k LEFT JOIN convo_checkpoint_pending AS s ON s.key = k.key,
       convo_pending_list(coalesce(s.pending, CASE WHEN k.sealed IS NULL THEN k.pending WHEN k.sealed = 0 THEN (SELECT h.pending FROM convo_checkpoint_hot AS h WHERE h.key = k.key) ELSE convo_sealed((SELECT g.data FROM convo_checkpoint_segments AS g WHERE g.block = k.key >> 4), k.key, 7) END)) AS w
  JOIN convo_names AS p ON p.num = w.task_path
  JOIN convo_names AS c ON c.num = w.channel JOIN convo_names AS t ON t.num = w.type
  WHERE k.key = ?1 AND (?2 IS NULL OR c.name = ?2)
  ORDER BY w.rowid;
