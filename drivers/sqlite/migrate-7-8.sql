-- Layout 7 -> 8: what a checkpoint adds, coded denser (docs/sqlite.md,
-- "Layout 8: metadata as shape and values, bodies as JSON code").
--
-- A checkpoint's metadata may be kept as its values (a msgpack array of its
-- strings and numbers) with its shape (the JSON text with each of them
-- replaced by 0) kept once in convo_names and named by number in the new
-- column meta_shape; NULL there: meta is the metadata's text, as every row of
-- layout 7 stays. Reads join the two back (convo_metadata(),
-- drivers/sqlite/compact.c). Bodies may be stored as libconvo's version-2 JSON
-- code (docs/checkpoints.md, "Checkpoint bodies as deltas"), which a layout-7
-- libconvo would read as corrupt. A layout-7 libconvo refuses this file (its
-- version is newer); one that had it open before the migration finds no
-- column metadata (renamed meta), so its statements fail instead of reading
-- values as text.
-- The view (for people with the sqlite3 shell) shows the text, else the shape
-- and the values in hex: the shell has no convo_metadata().
DROP VIEW convo_checkpoint_view;
ALTER TABLE convo_checkpoints RENAME COLUMN metadata TO meta;
ALTER TABLE convo_checkpoints ADD COLUMN meta_shape INTEGER;
CREATE VIEW convo_checkpoint_view AS
  SELECT t.id AS thread_id, c.ns AS checkpoint_ns,
         CASE WHEN typeof(c.id) = 'blob' AND length(c.id) = 16 THEN
           lower(substr(hex(c.id), 1, 8) || '-' || substr(hex(c.id), 9, 4) || '-' ||
                 substr(hex(c.id), 13, 4) || '-' || substr(hex(c.id), 17, 4) || '-' ||
                 substr(hex(c.id), 21)) ELSE c.id END AS checkpoint_id,
         c.key & 4294967295 AS position, c.put_order,
         CASE WHEN typeof(coalesce(c.parent_id, p.id)) = 'blob'
                   AND length(coalesce(c.parent_id, p.id)) = 16 THEN
           lower(substr(hex(coalesce(c.parent_id, p.id)), 1, 8) || '-' ||
                 substr(hex(coalesce(c.parent_id, p.id)), 9, 4) || '-' ||
                 substr(hex(coalesce(c.parent_id, p.id)), 13, 4) || '-' ||
                 substr(hex(coalesce(c.parent_id, p.id)), 17, 4) || '-' ||
                 substr(hex(coalesce(c.parent_id, p.id)), 21))
           ELSE coalesce(c.parent_id, p.id) END AS parent_id,
         CASE WHEN c.meta_shape IS NULL THEN c.meta END AS metadata,
         ms.name AS metadata_shape,
         CASE WHEN c.meta_shape IS NOT NULL THEN hex(c.meta) END AS metadata_values,
         c.log_length, c.created_at
  FROM convo_checkpoints AS c JOIN convo_threads AS t ON t.num = c.thread
  LEFT JOIN convo_names AS ms ON ms.num = c.meta_shape
  LEFT JOIN convo_checkpoints AS p ON p.key = c.key - c.parent;
