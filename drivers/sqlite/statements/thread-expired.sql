-- up to ?2 threads whose deadline is at or before ?1 (now), along the partial
-- index convo_threads_by_expiry
SELECT num FROM convo_threads WHERE expires_at <= ?1 LIMIT ?2;
