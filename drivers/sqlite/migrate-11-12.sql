-- Layout 11 -> 12: the index of checkpoints by id keeps bytes 5-8 of a
-- 16-byte id, not bytes 3-8 (docs/sqlite.md, "Layout 12: a narrower index by
-- id"): a time-ordered UUID's (v6, v1, v7) fastest-changing time bits, 2 bytes
-- less in every entry. A text id stays indexed whole; then the row key, whose
-- range is the thread. Ids of one thread that share the 4 bytes cost one more
-- row read each, never a wrong answer: the statements compare the whole id.
DROP INDEX convo_checkpoints_by_id;
CREATE INDEX convo_checkpoints_by_id ON convo_checkpoints(
  CASE WHEN typeof(id) = 'blob' THEN substr(id, 5, 4) ELSE id END);
