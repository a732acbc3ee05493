-- Layout 3 -> 4: the thread generation, how many tail rewrites a thread has
-- had (every thread stored before has had none), and the index by which a
-- rewrite finds, in one seek, the checkpoints that refer to messages past what
-- it keeps (docs/sqlite.md, The tail rewrite).

ALTER TABLE convo_threads ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
CREATE INDEX convo_checkpoints_by_log_length ON convo_checkpoints(thread, log_length);
