-- ?1 thread number
DELETE FROM convo_threads WHERE num = ?1;
