-- the waiting pending writes of the checkpoints with keys in [?1, ?2] move
-- into their rows (layout 13: a new checkpoint's put, after its swaps, for
-- the rows before the one before it); cp-pending-settled.sql then deletes them
UPDATE convo_checkpoints
  SET pending = (SELECT s.pending FROM convo_checkpoint_pending AS s
                   WHERE s.key = convo_checkpoints.key)
  WHERE key IN (SELECT key FROM convo_checkpoint_pending WHERE key >= ?1 AND key <= ?2);
