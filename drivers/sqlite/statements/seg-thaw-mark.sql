-- layout 17: the sealed rows of checkpoint ?1's block are hot (seg-thaw.sql
-- stored their columns)
UPDATE convo_checkpoints SET sealed = 0 WHERE key >= ?1 & ~15 AND key <= ?1 | 15 AND sealed = 1;
