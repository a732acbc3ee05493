-- Layout 4 -> 5: the thread index (docs/sqlite.md, The thread index). Every
-- thread gets updated_at, the time of its last write; threads stored before
-- take it from their last message or checkpoint, or their creation. Two
-- indexes give the unfiltered listings by activity and by creation. The extra
-- keys a store declares are recorded in convo_indexed_keys, and for each
-- thread whose extra holds one of them with a scalar value, a row of
-- convo_thread_index carries (key, value as canonical JSON) with the thread's
-- id and times, so one user's threads are one range of an index, in each order.

ALTER TABLE convo_threads ADD COLUMN updated_at INTEGER NOT NULL DEFAULT 0;
UPDATE convo_threads SET updated_at = max(created_at,
  coalesce((SELECT m.created_at FROM convo_messages AS m
            WHERE m.key BETWEEN num << 32 AND (num << 32) + 4294967295
            ORDER BY m.key DESC LIMIT 1), 0),
  coalesce((SELECT max(c.created_at) FROM convo_checkpoints AS c WHERE c.thread = num), 0));
CREATE INDEX convo_threads_by_updated ON convo_threads(updated_at, id);
CREATE INDEX convo_threads_by_created ON convo_threads(created_at, id);

-- a layout-4 libconvo that had the file open before it was migrated creates
-- threads without updated_at: they start at their created_at
CREATE TRIGGER convo_threads_updated_at AFTER INSERT ON convo_threads
  WHEN NEW.updated_at = 0 BEGIN
    UPDATE convo_threads SET updated_at = NEW.created_at WHERE num = NEW.num;
  END;

CREATE TABLE convo_indexed_keys(
  key TEXT PRIMARY KEY NOT NULL) WITHOUT ROWID;

CREATE TABLE convo_thread_index(
  thread     INTEGER NOT NULL,
  key        TEXT NOT NULL,
  value      TEXT NOT NULL,
  id         TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  updated_at INTEGER NOT NULL,
  PRIMARY KEY(thread, key)) WITHOUT ROWID;
CREATE INDEX convo_thread_index_by_updated ON convo_thread_index(key, value, updated_at, id);
CREATE INDEX convo_thread_index_by_created ON convo_thread_index(key, value, created_at, id);
CREATE INDEX convo_thread_index_by_id ON convo_thread_index(key, value, id);

-- whatever write moves a thread's updated_at moves its index rows with it, in
-- the same statement
CREATE TRIGGER convo_thread_index_activity AFTER UPDATE OF updated_at ON convo_threads BEGIN
    UPDATE convo_thread_index SET updated_at = NEW.updated_at WHERE thread = NEW.num;
  END;

-- this layout's writes change extra and updated_at together (updated_at grows
-- with every write); an extra changed alone was written by a layout-4 libconvo
-- that had the file open before it was migrated: the thread's index rows may
-- no longer say what its extra holds, so they go (the thread is left out of
-- listings by an indexed key until its next save_extra of that key, never
-- listed under a value it no longer has)
CREATE TRIGGER convo_thread_index_stale AFTER UPDATE OF extra ON convo_threads
  WHEN NEW.updated_at = OLD.updated_at BEGIN
    DELETE FROM convo_thread_index WHERE thread = NEW.num;
  END;
