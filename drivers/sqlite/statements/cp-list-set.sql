-- checkpoint key ?1's channel list stored anew (?2: the same list, in full)
UPDATE convo_checkpoints SET channel_list = ?2 WHERE key = ?1;
