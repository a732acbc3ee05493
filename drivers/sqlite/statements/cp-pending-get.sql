-- the pending writes of checkpoint ?1 as one record (layout 10, pending.c);
-- NULL: none
SELECT pending FROM convo_checkpoints WHERE key = ?1;
