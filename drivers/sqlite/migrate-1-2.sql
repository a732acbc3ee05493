-- Layout 1 -> 2: thread expiry, checkpoints, their channel values and pending
-- writes (docs/sqlite.md, Tables and Checkpoints).

ALTER TABLE convo_threads ADD COLUMN expires_at INTEGER;
CREATE INDEX convo_threads_by_expiry ON convo_threads(expires_at)
  WHERE expires_at IS NOT NULL;

-- key: (thread num << 32) | position in the thread's order of first put
CREATE TABLE convo_checkpoints(
  key INTEGER PRIMARY KEY,
  thread INTEGER NOT NULL,
  ns TEXT NOT NULL,
  id TEXT NOT NULL,
  parent_id TEXT,
  metadata TEXT NOT NULL,
  body_type TEXT,
  body BLOB,
  log_length INTEGER NOT NULL,
  created_at INTEGER NOT NULL);
CREATE UNIQUE INDEX convo_checkpoints_by_id ON convo_checkpoints(thread, ns, id);

CREATE TABLE convo_checkpoint_channels(
  checkpoint INTEGER NOT NULL,
  channel TEXT NOT NULL,
  version TEXT NOT NULL,
  PRIMARY KEY(checkpoint, channel)) WITHOUT ROWID;

CREATE TABLE convo_blobs(
  thread INTEGER NOT NULL,
  ns TEXT NOT NULL,
  channel TEXT NOT NULL,
  version TEXT NOT NULL,
  type TEXT NOT NULL,
  value BLOB NOT NULL,
  UNIQUE(thread, ns, channel, version));

CREATE TABLE convo_checkpoint_writes(
  checkpoint INTEGER NOT NULL,
  task_id TEXT NOT NULL,
  idx INTEGER NOT NULL,
  task_path TEXT NOT NULL,
  channel TEXT NOT NULL,
  type TEXT NOT NULL,
  value BLOB NOT NULL,
  UNIQUE(checkpoint, task_id, idx));

CREATE VIEW convo_checkpoint_view AS
  SELECT t.id AS thread_id, c.ns AS checkpoint_ns, c.id AS checkpoint_id,
         c.key & 4294967295 AS position, c.parent_id AS parent_id,
         c.metadata AS metadata, c.log_length AS log_length, c.created_at AS created_at
  FROM convo_checkpoints AS c JOIN convo_threads AS t ON t.num = c.thread;
