-- layout 17: the hot columns of block ?1's rows, sealed (seg-seal-hot.sql)
DELETE FROM convo_checkpoint_hot WHERE key >= ?1 << 4 AND key <= (?1 << 4) | 15;
