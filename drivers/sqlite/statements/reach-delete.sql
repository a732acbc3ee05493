-- thread ?1 is gone
DELETE FROM convo_checkpoint_reach WHERE thread = ?1;
