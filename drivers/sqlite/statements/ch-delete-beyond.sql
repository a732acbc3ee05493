-- the channel lists of the checkpoints of thread ?1 that refer to more than
-- ?2 messages
DELETE FROM convo_checkpoint_channels WHERE checkpoint IN
  (SELECT key FROM convo_checkpoints WHERE thread = ?1 AND log_length > ?2);
