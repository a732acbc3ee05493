-- ?1 thread number, ?2 the new deadline (NULL: never)
UPDATE convo_threads SET expires_at = ?2 WHERE num = ?1;
