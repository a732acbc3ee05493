-- Layout 14 -> 15: the open thread out of its keys' activity orders
-- (docs/sqlite.md, The open entry).
--
-- The thread written last (the open entry of convo_activity) keeps no rows in
-- the activity orders of its indexed keys: they are written when another
-- thread is written and the open entry gets its time, and a listing by a key's
-- value adds the open thread from convo_activity when it holds that value. A
-- thread's creation with a key so writes one leaf of that order (the thread
-- closed, in its value's range) where it wrote two (and the new open row, in
-- another range). The table is renamed convo_key_recent: a libconvo of layout
-- 14 that had the file open would write open rows, or close an entry whose
-- rows are not there and leave the thread out of its keys' orders; its
-- statements now name a table that is gone and fail, writing nothing.
DROP TRIGGER convo_thread_keys_stale;
ALTER TABLE convo_thread_recent RENAME TO convo_key_recent;
DELETE FROM convo_key_recent WHERE updated_at = 9223372036854775807;
-- (as in migrate-4-5.sql, with the table's new name) a layout-4 libconvo that
-- changes an extra drops the thread's key rows
CREATE TRIGGER convo_thread_keys_stale AFTER UPDATE OF extra ON convo_threads
  WHEN NEW.updated_at = OLD.updated_at BEGIN
    DELETE FROM convo_key_recent WHERE (key, value, id) IN
      (SELECT key, value, id FROM convo_thread_keys WHERE thread = NEW.num);
    DELETE FROM convo_thread_keys WHERE thread = NEW.num;
  END;
