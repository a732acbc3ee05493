-- a thread's number, deadline, extra, generation and the time of the last
-- write that rewrote its row; ?1 thread id
SELECT num, expires_at, extra, generation, updated_at FROM convo_threads WHERE id = ?1;
