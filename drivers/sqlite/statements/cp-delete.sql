-- the checkpoints with keys in [?1, ?2]
DELETE FROM convo_checkpoints WHERE key >= ?1 AND key <= ?2;
