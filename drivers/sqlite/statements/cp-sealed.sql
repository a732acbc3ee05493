-- layout 17: where checkpoint ?1's moved columns are: NULL in its row, 0 hot,
-- 1 sealed (no row: no checkpoint)
SELECT sealed FROM convo_checkpoints WHERE key = ?1;
