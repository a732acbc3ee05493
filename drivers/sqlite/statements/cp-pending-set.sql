-- checkpoint ?1's pending writes become record ?2 (layout 10, pending.c)
UPDATE convo_checkpoints SET pending = ?2 WHERE key = ?1;
