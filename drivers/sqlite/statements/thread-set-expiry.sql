-- ?1 thread number, ?2 the new deadline (NULL: never): a pending write or a
-- prune keeps the thread alive without being activity (updated_at stays)
UPDATE convo_threads SET expires_at = ?2 WHERE num = ?1;
