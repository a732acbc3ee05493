-- Layout 16 -> 17: sealed segments (docs/sqlite.md, "Layout 17"). A
-- checkpoint row keeps what the statements seek, order and join by (key,
-- thread, ns, id, parent_id, parent_place, log_length, put_order, unordered);
-- the rest (meta, body_type, body, created_at, channel_list, meta_shape,
-- pending: its "moved columns") is, by sealed:
--   NULL  in the row, as before (rows of layout 14, copies, seal=0 stores);
--   0     hot: in its row of convo_checkpoint_hot, the row holding
--         placeholders (meta x'', created_at 0, channel_list x'0080', a list
--         no libconvo decodes, the others NULL), so it never changes size;
--   1     sealed: in its block's segment (key >> 4: 16 positions), column by
--         column in one zlib stream (lib/segment.c; segments.c), the row
--         holding the placeholders.
-- A put stores its checkpoint hot and seals the block it leaves 3 positions
-- behind; the statements read the moved columns through the hot table or
-- convo_sealed(). Rows already stored stay rows: a later put seals their block.
ALTER TABLE convo_checkpoints ADD COLUMN sealed INTEGER;
CREATE TABLE convo_checkpoint_hot(
  key          INTEGER PRIMARY KEY, -- convo_checkpoints.key of a row with sealed = 0
  meta         NOT NULL,
  body_type    INTEGER,
  body         BLOB,
  created_at   INTEGER NOT NULL,
  channel_list BLOB NOT NULL,
  meta_shape   INTEGER,
  pending      BLOB);
CREATE TABLE convo_checkpoint_segments(
  block INTEGER PRIMARY KEY,        -- the rows' key >> 4
  data  BLOB NOT NULL);             -- the moved columns of its sealed rows (segments.c)
-- a hot checkpoint deleted takes its hot row along; the last sealed row of a
-- block deleted, its segment (prune, delete, delete-by-run, a rewrite
-- dropping checkpoints, a thread's delete, a sweep)
CREATE TRIGGER convo_checkpoint_hot_gone AFTER DELETE ON convo_checkpoints
  WHEN old.sealed = 0
BEGIN
  DELETE FROM convo_checkpoint_hot WHERE key = old.key;
END;
CREATE TRIGGER convo_checkpoint_segment_gone AFTER DELETE ON convo_checkpoints
  WHEN old.sealed = 1
BEGIN
  DELETE FROM convo_checkpoint_segments WHERE block = old.key >> 4
    AND NOT EXISTS (SELECT 1 FROM convo_checkpoints
                    WHERE key BETWEEN old.key & ~15 AND old.key | 15 AND sealed = 1);
END;
-- the moved columns of a hot or sealed row are never written in the row: a
-- layout-14 libconvo that had the file open, or a statement that forgot, is
-- refused rather than a write the readers would not see
CREATE TRIGGER convo_checkpoints_sealed_kept BEFORE UPDATE OF meta, body_type, body,
  created_at, channel_list, meta_shape, pending ON convo_checkpoints
  WHEN old.sealed IS NOT NULL AND new.sealed IS NOT NULL
BEGIN
  SELECT RAISE(ABORT, 'convo: this checkpoint is sealed or hot (SQLite layout 17); use a newer libconvo');
END;
