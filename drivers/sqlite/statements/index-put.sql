-- thread ?1 has value ?3 (canonical JSON) at indexed extra key ?2; its id and
-- times are read from its row, written first in the same transaction
INSERT INTO convo_thread_index(thread, key, value, id, created_at, updated_at)
  SELECT num, ?2, ?3, id, created_at, updated_at FROM convo_threads WHERE num = ?1
  ON CONFLICT(thread, key) DO UPDATE SET value = excluded.value, updated_at = excluded.updated_at;
