-- the threads with an extra, for the rows of keys declared on a store that
-- has threads already
SELECT num, extra, updated_at FROM convo_threads WHERE extra IS NOT NULL;
