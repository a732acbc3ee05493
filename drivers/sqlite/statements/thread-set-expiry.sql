-- ?1 thread number, ?2 the new deadline (NULL: never): an append (which
-- leaves the rest of the row alone), a pending write or a prune
UPDATE convo_threads SET expires_at = ?2 WHERE num = ?1;
