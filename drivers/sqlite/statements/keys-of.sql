-- the indexed key rows of thread ?1 (of key ?2 only, unless ?2 is NULL): one
-- seek, which finds none for a thread without them
SELECT key, value, id FROM convo_thread_keys WHERE thread = ?1 AND (?2 IS NULL OR key = ?2);
