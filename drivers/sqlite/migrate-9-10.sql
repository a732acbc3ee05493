-- Layout 9 -> 10: a checkpoint's pending writes are one record in its row
-- (`pending`, drivers/sqlite/pending.c) instead of a row each in
-- convo_checkpoint_writes, and the index of checkpoints by id holds 6 bytes
-- of a 16-byte id and the row key (docs/sqlite.md, "Layout 10: pending
-- writes in the checkpoint row, a narrower index by id").
--
-- Each checkpoint's writes are packed into its record in (task id, idx)
-- order; the table goes. `parent` is renamed so that a layout-9 process that
-- already had the file open fails on its next checkpoint statement (no such
-- column) instead of a re-put dropping the writes its INSERT OR REPLACE does
-- not know; a layout-9 libconvo refuses the file (its version is newer).
ALTER TABLE convo_checkpoints RENAME COLUMN parent TO parent_place;
ALTER TABLE convo_checkpoints ADD COLUMN pending BLOB;
UPDATE convo_checkpoints
  SET pending = (SELECT convo_pending_pack(w.task_id, w.idx, w.task_path, w.channel,
                                           w.type, w.value)
                 FROM convo_checkpoint_writes AS w WHERE w.checkpoint = convo_checkpoints.key)
  WHERE key IN (SELECT checkpoint FROM convo_checkpoint_writes);
DROP TABLE convo_checkpoint_writes;
-- bytes 3-8 of a 16-byte id (a time-ordered UUID's fastest-changing time
-- bits, a random UUID's random ones), a text id whole; then the row key, whose
-- range is the thread. No longer unique: put finds an existing (thread, ns,
-- id) first, in its write transaction, and replaces it under its key.
DROP INDEX convo_checkpoints_by_id;
CREATE INDEX convo_checkpoints_by_id ON convo_checkpoints(
  CASE WHEN typeof(id) = 'blob' THEN substr(id, 3, 6) ELSE id END);
