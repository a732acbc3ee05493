-- ?1 thread number, ?2 the merged extra
UPDATE convo_threads SET extra = ?2 WHERE num = ?1;
