-- the stored channel list of checkpoint key ?1, and its namespace
SELECT channel_list, ns FROM convo_checkpoints WHERE key = ?1;
