-- thread ?1 has a checkpoint that refers to ?2 messages: its bound rises to
-- it (the page is written only when it does)
INSERT INTO convo_checkpoint_reach(thread, log_length) VALUES(?1, ?2)
  ON CONFLICT(thread) DO UPDATE SET log_length = excluded.log_length
  WHERE excluded.log_length > log_length;
