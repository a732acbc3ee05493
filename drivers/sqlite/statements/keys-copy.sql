-- a fork: thread ?2, just created with the extra of thread ?1, gets ?1's
-- indexed key rows with its own id and created_at
INSERT INTO convo_thread_keys(thread, key, value, id, created_at)
  SELECT ?2, k.key, k.value, t.id, t.created_at
  FROM convo_thread_keys AS k JOIN convo_threads AS t ON t.num = ?2
  WHERE k.thread = ?1;
