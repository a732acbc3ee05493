-- the pending writes of checkpoint ?1 as one record (layout 10, pending.c;
-- NULL: none), and 1 when a new record goes to convo_checkpoint_pending: the
-- record waits there already, or the row has none and is one of its thread's
-- two newest (layout 13)
SELECT coalesce(s.pending, c.pending),
       s.key IS NOT NULL OR (c.pending IS NULL AND NOT EXISTS (
         SELECT 1 FROM convo_checkpoints AS n
           WHERE n.key > c.key + 1 AND n.key < ((c.key >> 32) + 1) << 32))
  FROM convo_checkpoints AS c LEFT JOIN convo_checkpoint_pending AS s ON s.key = c.key
  WHERE c.key = ?1;
