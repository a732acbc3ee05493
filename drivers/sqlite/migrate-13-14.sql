-- Layout 13 -> 14: a checkpoint whose id is greater than the ids before it in
-- its thread (LangGraph's time-ordered UUIDs, put in order) is found without
-- an index entry of its own (docs/sqlite.md, "Layout 14: ids in put order").
-- unordered: 1 the row is not in order, and keeps its entry in
-- convo_checkpoints_by_id; 0 it is: the ids of a thread's ordered rows
-- increase with their keys; 2 it is, and it is the first ordered row of its
-- block of 16 positions (key >> 4), with an entry in
-- convo_checkpoints_ordered_by_id. A look-up seeks the greatest such first
-- row at or below the id and reads that block: at most 16 rows whatever the
-- other rows are. Here a row is ordered when its id is above every id before
-- it in its thread (a put takes the last ordered row's: cp-put.sql).
ALTER TABLE convo_checkpoints ADD COLUMN unordered INTEGER;
UPDATE convo_checkpoints SET unordered = f.flag
  FROM (SELECT key, CASE WHEN NOT ordered THEN 1
                         WHEN row_number() OVER (PARTITION BY key >> 4, ordered
                                                 ORDER BY key) = 1 THEN 2
                         ELSE 0 END AS flag
          FROM (SELECT key, before IS NULL OR id > before AS ordered
                  FROM (SELECT key, id, max(id) OVER (PARTITION BY thread ORDER BY key
                                ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS before
                          FROM convo_checkpoints))) AS f
  WHERE f.key = convo_checkpoints.key;
DROP INDEX convo_checkpoints_by_id;
CREATE INDEX convo_checkpoints_by_id ON convo_checkpoints(
  CASE WHEN typeof(id) = 'blob' THEN substr(id, 5, 4) ELSE id END)
  WHERE unordered = 1;
CREATE INDEX convo_checkpoints_ordered_by_id ON convo_checkpoints(thread, id)
  WHERE unordered = 2;
-- a block whose first ordered row goes gets its next ordered row as its first
-- (a replace in place, cp-put.sql, does not fire it: recursive triggers are off)
CREATE TRIGGER convo_checkpoints_first_gone AFTER DELETE ON convo_checkpoints
  WHEN old.unordered = 2
BEGIN
  UPDATE convo_checkpoints SET unordered = 2
    WHERE key = (SELECT min(key) FROM convo_checkpoints
                 WHERE key > old.key AND key <= old.key | 15 AND unordered = 0);
END;
-- a layout-13 libconvo that had the file open writes rows without the column:
-- refused, rather than a row its ids' order is not known of
CREATE TRIGGER convo_checkpoints_unordered_needed BEFORE INSERT ON convo_checkpoints
  WHEN new.unordered IS NULL
BEGIN
  SELECT RAISE(ABORT, 'convo: this file has SQLite layout 14; a checkpoint needs its unordered column: use a newer libconvo');
END;
