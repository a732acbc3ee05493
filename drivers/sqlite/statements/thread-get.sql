-- a thread's number, deadline, extra and generation; ?1 thread id
SELECT num, expires_at, extra, generation FROM convo_threads WHERE id = ?1;
