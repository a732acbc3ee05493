-- Layout 8 -> 9: a checkpoint's channel list may be a delta against the
-- list of the row before it (docs/sqlite.md, "Layout 9: channel lists as
-- deltas"), and the index of checkpoints by log_length gives way to one row
-- per thread bounding their log_length (convo_checkpoint_reach).
--
-- Every list of layout 8 is a full list, which layout 9 reads as it is: no
-- checkpoint row is rewritten. The column is renamed so that a layout-8
-- process that already had the file open fails on its next checkpoint
-- statement (no such column) instead of reading a delta as a full list or
-- deleting the row a delta is decoded against; a layout-8 libconvo refuses
-- the file (its version is newer).
ALTER TABLE convo_checkpoints RENAME COLUMN channels TO channel_list;
-- no checkpoint of the thread refers to more messages than log_length (an
-- upper bound: raised by every put, made exact again by a rewrite that finds
-- it too high); a thread without checkpoints may have no row
CREATE TABLE convo_checkpoint_reach(
  thread     INTEGER PRIMARY KEY,
  log_length INTEGER NOT NULL);
INSERT INTO convo_checkpoint_reach(thread, log_length)
  SELECT thread, max(log_length) FROM convo_checkpoints GROUP BY thread;
DROP INDEX convo_checkpoints_by_log_length;
