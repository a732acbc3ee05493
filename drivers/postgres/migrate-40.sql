-- migrate-40.sql: schema version 40 — the B-trees filled in put and append
-- order packed full (issue 24 bytes). checkpoints_pkey, checkpoints_by_ns_put
-- and messages_pkey get their keys in ascending order within a thread (ids are
-- time-ordered, put_seq and seq grow), so nearly every leaf split is at the end
-- of a thread's range, where a B-tree leaves the left page at its fillfactor:
-- 90 by default, 100 here (PostgreSQL's limit). A split elsewhere (an id out of
-- order, a non-HOT update's new entry) is still 50:50, as before. Changes only
-- future splits: an existing index keeps its pages until it is rebuilt (REINDEX
-- is an operator's choice; it locks the table). tests/postgres_fill.c.
ALTER INDEX @S.checkpoints_pkey SET (fillfactor = 100);
ALTER INDEX @S.checkpoints_by_ns_put SET (fillfactor = 100);
ALTER INDEX @S.messages_pkey SET (fillfactor = 100);
