-- the threads with an extra, for the rows of keys declared on a store that
-- has threads already
SELECT num, id, created_at, updated_at, extra FROM convo_threads WHERE extra IS NOT NULL;
