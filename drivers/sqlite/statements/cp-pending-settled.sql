-- the waiting pending writes of keys [?1, ?2], now in their rows (layout 13)
DELETE FROM convo_checkpoint_pending WHERE key >= ?1 AND key <= ?2;
