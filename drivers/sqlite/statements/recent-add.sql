-- thread ?1, active as of ?2 with ?4 messages: rows in the activity order of
-- its indexed keys (of key ?3 only, unless ?3 is NULL), from its
-- convo_thread_keys rows
INSERT INTO convo_key_recent(key, value, updated_at, id, thread, created_at, length)
  SELECT key, value, ?2, id, thread, created_at, ?4 FROM convo_thread_keys
  WHERE thread = ?1 AND (?3 IS NULL OR key = ?3);
