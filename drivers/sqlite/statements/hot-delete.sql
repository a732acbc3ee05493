-- layout 17: checkpoint ?1's hot columns, after a seal=0 store's re-put stored
-- them in its row (cp-put.sql)
DELETE FROM convo_checkpoint_hot WHERE key = ?1;
