-- ?1 thread number, ?2 its new generation, ?3 the new deadline (NULL: never),
-- ?4 the time of this write: a rewrite, or an import into a thread without
-- messages
UPDATE convo_threads SET generation = ?2, expires_at = ?3, updated_at = ?4 WHERE num = ?1;
