-- thread ?1 has value ?3 (canonical JSON) at indexed extra key ?2; its id and
-- created_at come from its row
INSERT INTO convo_thread_keys(thread, key, value, id, created_at)
  SELECT num, ?2, ?3, id, created_at FROM convo_threads WHERE num = ?1
  ON CONFLICT(thread, key) DO UPDATE SET value = excluded.value;
