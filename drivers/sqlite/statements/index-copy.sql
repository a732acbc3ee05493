-- a fork: thread ?2, just created with the extra of thread ?1, gets ?1's index
-- rows with its own id and times
INSERT INTO convo_thread_index(thread, key, value, id, created_at, updated_at)
  SELECT ?2, i.key, i.value, t.id, t.created_at, t.updated_at
  FROM convo_thread_index AS i JOIN convo_threads AS t ON t.num = ?2
  WHERE i.thread = ?1;
