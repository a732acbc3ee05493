-- Layout 2 -> 3: the store-wide put order, so that `before` works across
-- threads; a checkpoint stored before takes its key, which keeps each thread's
-- order (docs/sqlite.md, Schema version and migrations).

ALTER TABLE convo_checkpoints ADD COLUMN put_order INTEGER;
UPDATE convo_checkpoints SET put_order = key;
CREATE UNIQUE INDEX convo_checkpoints_by_put_order ON convo_checkpoints(put_order);

-- a layout-2 libconvo that had the file open before it was migrated still
-- writes rows without put_order: give them the next one
CREATE TRIGGER convo_checkpoints_put_order AFTER INSERT ON convo_checkpoints
  WHEN NEW.put_order IS NULL BEGIN
    UPDATE convo_checkpoints SET put_order =
      (SELECT coalesce(max(put_order), 0) + 1 FROM convo_checkpoints)
    WHERE key = NEW.key;
  END;

DROP VIEW convo_checkpoint_view;
CREATE VIEW convo_checkpoint_view AS
  SELECT t.id AS thread_id, c.ns AS checkpoint_ns, c.id AS checkpoint_id,
         c.key & 4294967295 AS position, c.put_order AS put_order,
         c.parent_id AS parent_id, c.metadata AS metadata,
         c.log_length AS log_length, c.created_at AS created_at
  FROM convo_checkpoints AS c JOIN convo_threads AS t ON t.num = c.thread;
