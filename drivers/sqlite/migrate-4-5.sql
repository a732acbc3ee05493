-- Layout 4 -> 5: the thread index (docs/sqlite.md, The thread index).
--
-- A thread's activity time (its updated_at as listings give it) is the later
-- of convo_threads.updated_at, which every write that rewrites the thread row
-- sets, and the created_at of its last message, which an append sets without
-- touching the row. convo_activity holds each thread once at that time, so the
-- newest threads are the end of one B-tree and an append moves one entry of
-- it. Threads stored before take the time of their last message or checkpoint,
-- else their creation.
--
-- The extra keys a store declares are recorded in convo_indexed_keys. For each
-- thread whose extra holds one with a scalar value, convo_thread_keys has a
-- row (thread, key, value as canonical JSON) with the thread's id and
-- created_at, indexed for the creation and id orders, and convo_thread_recent
-- the same key and value at the thread's activity time, which an append moves.

ALTER TABLE convo_threads ADD COLUMN updated_at INTEGER NOT NULL DEFAULT 0;
UPDATE convo_threads SET updated_at = max(created_at,
  coalesce((SELECT max(c.created_at) FROM convo_checkpoints AS c WHERE c.thread = num), 0));
CREATE INDEX convo_threads_by_created ON convo_threads(created_at, id);

-- created_at and length ride along, so that a listing of ids and times reads
-- this B-tree alone (an append rewrites the entry anyway)
CREATE TABLE convo_activity(
  updated_at INTEGER NOT NULL,
  id         TEXT NOT NULL,
  num        INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  length     INTEGER NOT NULL,
  PRIMARY KEY(updated_at, id)) WITHOUT ROWID;
INSERT INTO convo_activity(updated_at, id, num, created_at, length)
  SELECT max(t.updated_at, coalesce(last.created_at, 0)), t.id, t.num, t.created_at,
         coalesce((last.key & 4294967295) + 1, 0)
  FROM convo_threads AS t LEFT JOIN convo_messages AS last
    ON last.key = (SELECT m.key FROM convo_messages AS m
                   WHERE m.key BETWEEN t.num << 32 AND (t.num << 32) + 4294967295
                   ORDER BY m.key DESC LIMIT 1);

-- a layout-4 libconvo that had the file open before it was migrated creates
-- threads without updated_at: they start at their created_at, and are listed
CREATE TRIGGER convo_threads_updated_at AFTER INSERT ON convo_threads
  WHEN NEW.updated_at = 0 BEGIN
    UPDATE convo_threads SET updated_at = NEW.created_at WHERE num = NEW.num;
    INSERT OR IGNORE INTO convo_activity(updated_at, id, num, created_at, length)
      VALUES(NEW.created_at, NEW.id, NEW.num, NEW.created_at, 0);
  END;

CREATE TABLE convo_indexed_keys(
  key TEXT PRIMARY KEY NOT NULL) WITHOUT ROWID;

CREATE TABLE convo_thread_keys(
  thread     INTEGER NOT NULL,
  key        TEXT NOT NULL,
  value      TEXT NOT NULL,
  id         TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY(thread, key)) WITHOUT ROWID;
CREATE INDEX convo_thread_keys_by_created ON convo_thread_keys(key, value, created_at, id);
CREATE INDEX convo_thread_keys_by_id ON convo_thread_keys(key, value, id);

CREATE TABLE convo_thread_recent(
  key        TEXT NOT NULL,
  value      TEXT NOT NULL,
  updated_at INTEGER NOT NULL,
  id         TEXT NOT NULL,
  thread     INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  length     INTEGER NOT NULL,
  PRIMARY KEY(key, value, updated_at, id)) WITHOUT ROWID;

-- this layout's writes of extra move updated_at with it (to a time past the
-- thread's activity); an extra changed alone was written by a layout-4
-- libconvo that had the file open: the thread's key rows may no longer say
-- what its extra holds, so they go (the thread is left out of listings by an
-- indexed key until its next save_extra of that key, never listed under a
-- value it no longer has)
CREATE TRIGGER convo_thread_keys_stale AFTER UPDATE OF extra ON convo_threads
  WHEN NEW.updated_at = OLD.updated_at BEGIN
    DELETE FROM convo_thread_recent WHERE (key, value, id) IN
      (SELECT key, value, id FROM convo_thread_keys WHERE thread = NEW.num);
    DELETE FROM convo_thread_keys WHERE thread = NEW.num;
  END;
