-- layout 17: hot checkpoint ?1's pending writes (cp-pending-set.sql's for a row)
UPDATE convo_checkpoint_hot SET pending = ?2 WHERE key = ?1;
