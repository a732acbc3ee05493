-- Layout 12 -> 13: the pending writes of a thread's two newest checkpoints
-- wait in convo_checkpoint_pending; the put of a new checkpoint moves those of
-- the rows before the one before it into their rows, whose values the swaps
-- of the put before have turned into log references (docs/sqlite.md, "Layout
-- 13: the newest checkpoints' writes apart"). So a row never grows while it
-- is the last of the last page, where SQLite would move it alone to a new page
-- and leave its old place empty for good. No row moves here: a layout-12
-- record in a row stays where it is.
CREATE TABLE convo_checkpoint_pending(
  key     INTEGER PRIMARY KEY,      -- convo_checkpoints.key
  pending BLOB);                    -- the record (pending.c); the row's is NULL
-- a checkpoint deleted takes its waiting writes with it (a replace in place,
-- cp-put.sql, does not fire it: recursive triggers are off)
CREATE TRIGGER convo_checkpoint_pending_gone AFTER DELETE ON convo_checkpoints
BEGIN
  DELETE FROM convo_checkpoint_pending WHERE key = old.key;
END;
