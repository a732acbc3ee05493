-- the pending writes of the checkpoints with keys in [?1, ?2]
DELETE FROM convo_checkpoint_writes
  WHERE checkpoint >= ?1 AND checkpoint <= ?2;
