-- the key values (convo_threads.key_values) of the thread written last, the
-- open entry of convo_activity (no row when there is none; NULL when it has
-- no values): a seek to the end of convo_activity, a rowid seek, so that a
-- listing by a key's value runs list-key-open.sql only for a thread it lists
SELECT t.key_values FROM convo_activity AS i JOIN convo_threads AS t ON t.num = i.num
  WHERE i.updated_at = 9223372036854775807;
