-- Layout 6 -> 7: checkpoints stored densely (docs/sqlite.md, "Layout 7:
-- checkpoints stored densely").
--
-- The strings that checkpoint rows repeat -- channel names, value and body
-- types, task paths -- are kept once each in convo_names and referred to by number. A
-- checkpoint's channel list becomes one column of its row (convo_channels(), a
-- function the driver registers on each connection: drivers/sqlite/compact.c)
-- instead of a row per channel; checkpoint, parent and task ids that are
-- canonical UUIDs are kept as their 16 bytes (convo_id()), any other id as its
-- text, and a parent at most 16 places before its child in the thread's order
-- (PARENT_NEAR) by that number; channel versions in their stored form (convo_version()); values and
-- pending writes in WITHOUT ROWID tables keyed by their unique columns instead
-- of a rowid table plus a unique index; no index on put_order (the last one is
-- kept in convo_meta, and a listing by it reads every checkpoint anyway). Every row is carried over as it was.
-- A libconvo of layout 6 or older refuses this file (its version is newer), so
-- the trigger that gave a layout-2 libconvo's rows a put_order goes; one that
-- had the file open is refused by the constraints (a checkpoint needs its
-- channel list, a name column a number), nothing written.

DROP VIEW convo_checkpoint_view;

CREATE TABLE convo_names(
  num INTEGER PRIMARY KEY,
  name TEXT NOT NULL UNIQUE);
INSERT INTO convo_names(name)
  SELECT channel FROM convo_checkpoint_channels UNION SELECT channel FROM convo_blobs
  UNION SELECT type FROM convo_blobs UNION SELECT task_path FROM convo_checkpoint_writes
  UNION SELECT channel FROM convo_checkpoint_writes
  UNION SELECT type FROM convo_checkpoint_writes
  UNION SELECT body_type FROM convo_checkpoints WHERE body_type IS NOT NULL;

CREATE TABLE convo_checkpoints_7(
  key INTEGER PRIMARY KEY,
  thread INTEGER NOT NULL,
  ns TEXT NOT NULL,
  id BLOB NOT NULL,
  parent_id BLOB,
  parent INTEGER,
  metadata TEXT NOT NULL,
  body_type INTEGER,
  body BLOB,
  log_length INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  put_order INTEGER NOT NULL,
  channels BLOB NOT NULL);
INSERT INTO convo_checkpoints_7(key, thread, ns, id, parent_id, parent, metadata, body_type,
  body, log_length, created_at, put_order, channels)
  SELECT c.key, c.thread, c.ns, convo_id(c.id),
         CASE WHEN c.key - p.key BETWEEN 1 AND 16 THEN NULL ELSE convo_id(c.parent_id) END,
         CASE WHEN c.key - p.key BETWEEN 1 AND 16 THEN c.key - p.key END, c.metadata,
         (SELECT n.num FROM convo_names AS n WHERE n.name = c.body_type), c.body, c.log_length, c.created_at, c.put_order,
         coalesce((SELECT convo_channels(n.num, ch.version)
                   FROM convo_checkpoint_channels AS ch
                   JOIN convo_names AS n ON n.name = ch.channel
                   WHERE ch.checkpoint = c.key), x'')
  FROM convo_checkpoints AS c LEFT JOIN convo_checkpoints AS p
    ON p.thread = c.thread AND p.ns = c.ns AND p.id = c.parent_id;
DROP TABLE convo_checkpoint_channels;
DROP TABLE convo_checkpoints;
ALTER TABLE convo_checkpoints_7 RENAME TO convo_checkpoints;
CREATE UNIQUE INDEX convo_checkpoints_by_id ON convo_checkpoints(thread, ns, id);
-- the last put_order is kept here, not sought at the end of an index
INSERT OR REPLACE INTO convo_meta(key, value)
  SELECT 'checkpoint_order', coalesce(max(put_order), 0) FROM convo_checkpoints;
CREATE INDEX convo_checkpoints_by_log_length ON convo_checkpoints(thread, log_length);

CREATE TABLE convo_blobs_7(
  thread INTEGER NOT NULL,
  ns TEXT NOT NULL,
  channel INTEGER NOT NULL CHECK (typeof(channel) = 'integer'),
  version BLOB NOT NULL,
  type INTEGER NOT NULL CHECK (typeof(type) = 'integer'),
  value BLOB NOT NULL,
  PRIMARY KEY(thread, ns, channel, version)) WITHOUT ROWID;
INSERT INTO convo_blobs_7(thread, ns, channel, version, type, value)
  SELECT b.thread, b.ns, c.num, convo_version(b.version), t.num, b.value
  FROM convo_blobs AS b JOIN convo_names AS c ON c.name = b.channel
  JOIN convo_names AS t ON t.name = b.type;
DROP TABLE convo_blobs;
ALTER TABLE convo_blobs_7 RENAME TO convo_blobs;

CREATE TABLE convo_checkpoint_writes_7(
  checkpoint INTEGER NOT NULL,
  task_id BLOB NOT NULL,
  idx INTEGER NOT NULL,
  task_path INTEGER NOT NULL CHECK (typeof(task_path) = 'integer'),
  channel INTEGER NOT NULL CHECK (typeof(channel) = 'integer'),
  type INTEGER NOT NULL CHECK (typeof(type) = 'integer'),
  value BLOB NOT NULL,
  PRIMARY KEY(checkpoint, task_id, idx)) WITHOUT ROWID;
INSERT INTO convo_checkpoint_writes_7(checkpoint, task_id, idx, task_path, channel, type,
  value)
  SELECT w.checkpoint, convo_id(w.task_id), w.idx, p.num, c.num, t.num, w.value
  FROM convo_checkpoint_writes AS w JOIN convo_names AS p ON p.name = w.task_path
  JOIN convo_names AS c ON c.name = w.channel JOIN convo_names AS t ON t.name = w.type;
DROP TABLE convo_checkpoint_writes;
ALTER TABLE convo_checkpoint_writes_7 RENAME TO convo_checkpoint_writes;

-- ids shown as text whichever way they are stored (for the sqlite3 shell)
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
         c.metadata, c.log_length, c.created_at
  FROM convo_checkpoints AS c JOIN convo_threads AS t ON t.num = c.thread
  LEFT JOIN convo_checkpoints AS p ON p.key = c.key - c.parent;
