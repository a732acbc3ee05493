-- ?1 thread number, ?2 the merged extra, ?3 the time of this write, ?4 the new
-- deadline (NULL: never)
UPDATE convo_threads SET extra = ?2, updated_at = ?3, expires_at = ?4 WHERE num = ?1;
