-- a write that rewrites thread ?1's row (checkpoint put, import): the time of
-- this write ?2, the deadline ?3 (NULL: never)
UPDATE convo_threads SET updated_at = ?2, expires_at = ?3 WHERE num = ?1;
