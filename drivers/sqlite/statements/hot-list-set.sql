-- layout 17: hot checkpoint ?1's channel list (cp-list-set.sql's for a row)
UPDATE convo_checkpoint_hot SET channel_list = ?2 WHERE key = ?1;
