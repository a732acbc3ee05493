-- 1 when some thread has a deadline (a store with ttl wrote it), along the
-- partial index convo_threads_by_expiry: one seek
SELECT 1 FROM convo_threads WHERE expires_at IS NOT NULL LIMIT 1;
