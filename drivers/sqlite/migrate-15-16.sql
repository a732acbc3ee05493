-- Layout 15 -> 16: a thread's indexed key values in its row, the two orders
-- by key as one table and its index (docs/sqlite.md, The thread index).
--
-- convo_thread_keys (a row per thread and indexed key, with two indexes: by
-- creation and by id within each key's value) was three B-trees a creation
-- wrote; what it alone answered, a thread's values, is now the thread row's
-- key_values, which the creation writes anyway. The creation order within a
-- value is the table convo_key_threads, the id order its index. A libconvo
-- of layout 15 that had the file open names convo_thread_keys in each write
-- that touches the index, and in its listings by key: they fail, writing
-- nothing (its appends to the thread written last touch no index table).
ALTER TABLE convo_threads ADD COLUMN key_values TEXT;
-- "LEN:KEY" "LEN:VALUE" per indexed key the thread has a kept value at
-- (lengths in bytes), in any order; NULL: none
UPDATE convo_threads SET key_values =
    (SELECT group_concat(length(CAST(k.key AS BLOB)) || ':' || k.key
                         || length(CAST(k.value AS BLOB)) || ':' || k.value, '')
     FROM convo_thread_keys AS k WHERE k.thread = convo_threads.num)
  WHERE num IN (SELECT thread FROM convo_thread_keys);
CREATE TABLE convo_key_threads(
  key        TEXT NOT NULL,
  value      TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  id         TEXT NOT NULL,
  thread     INTEGER NOT NULL,
  PRIMARY KEY(key, value, created_at, id)) WITHOUT ROWID;
INSERT INTO convo_key_threads(key, value, created_at, id, thread)
  SELECT key, value, created_at, id, thread FROM convo_thread_keys;
CREATE INDEX convo_key_threads_by_id ON convo_key_threads(key, value, id, thread);
DROP TRIGGER convo_thread_keys_stale;
DROP TABLE convo_thread_keys;
-- a layout-4 libconvo that changes an extra (leaving updated_at as it was):
-- the thread's rows go, found by walks, and it has no key values until its
-- next save_extra of this layout
CREATE TRIGGER convo_thread_keys_stale AFTER UPDATE OF extra ON convo_threads
  WHEN NEW.updated_at = OLD.updated_at AND OLD.key_values IS NOT NULL BEGIN
    DELETE FROM convo_key_recent WHERE thread = NEW.num;
    DELETE FROM convo_key_threads WHERE thread = NEW.num;
    UPDATE convo_threads SET key_values = NULL WHERE num = NEW.num;
  END;
