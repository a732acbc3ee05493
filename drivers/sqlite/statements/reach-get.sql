-- no checkpoint of thread ?1 refers to more messages than this (no row: it
-- has none)
SELECT log_length FROM convo_checkpoint_reach WHERE thread = ?1;
