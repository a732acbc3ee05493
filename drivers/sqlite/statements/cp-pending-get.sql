-- the pending writes of checkpoint ?1 as one record (layout 10, pending.c;
-- NULL: none), and 1 when a new record goes to convo_checkpoint_pending: the
-- record waits there already, or the row has none and is one of its thread's
-- two newest (layout 13)
-- layout 17: the moved columns of a hot row from convo_checkpoint_hot, of a sealed
-- one from its block's segment (convo_sealed: segments.c)
SELECT coalesce(s.pending, CASE WHEN c.sealed IS NULL THEN c.pending WHEN c.sealed = 0 THEN (SELECT h.pending FROM convo_checkpoint_hot AS h WHERE h.key = c.key) ELSE convo_sealed((SELECT g.data FROM convo_checkpoint_segments AS g WHERE g.block = c.key >> 4), c.key, 7) END),
       s.key IS NOT NULL OR (CASE WHEN c.sealed IS NULL THEN c.pending WHEN c.sealed = 0 THEN (SELECT h.pending FROM convo_checkpoint_hot AS h WHERE h.key = c.key) ELSE convo_sealed((SELECT g.data FROM convo_checkpoint_segments AS g WHERE g.block = c.key >> 4), c.key, 7) END IS NULL AND NOT EXISTS (
         SELECT 1 FROM convo_checkpoints AS n
           WHERE n.key > c.key + 1 AND n.key < ((c.key >> 32) + 1) << 32))
  FROM convo_checkpoints AS c LEFT JOIN convo_checkpoint_pending AS s ON s.key = c.key
  WHERE c.key = ?1;
