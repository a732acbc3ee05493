-- the stored channel list of checkpoint key ?1
SELECT channel_list FROM convo_checkpoints WHERE key = ?1;
