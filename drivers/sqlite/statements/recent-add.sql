-- thread ?5 (id ?4, created ?6), active as of ?3 with ?7 messages, has value
-- ?2 at indexed key ?1: its row in the key's activity order
INSERT INTO convo_key_recent(key, value, updated_at, id, thread, created_at, length)
  VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7);
