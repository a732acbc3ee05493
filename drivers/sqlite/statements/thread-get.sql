-- a thread's number, deadline and extra; ?1 thread id
SELECT num, expires_at, extra FROM convo_threads WHERE id = ?1;
