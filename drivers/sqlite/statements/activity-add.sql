-- thread ?1 is active as of ?2 with ?3 messages: its entry in the activity
-- order, with its id and created_at from its row
INSERT INTO convo_activity(updated_at, id, num, created_at, length)
  SELECT ?2, id, num, created_at, ?3 FROM convo_threads WHERE num = ?1;
