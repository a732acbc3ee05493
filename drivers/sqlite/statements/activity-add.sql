-- thread ?3 (id ?1) is active as of ?2: its entry in the activity order
INSERT INTO convo_activity(updated_at, id, num) VALUES(?2, ?1, ?3);
