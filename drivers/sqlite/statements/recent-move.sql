-- the row of key ?1 and value ?2 of thread ?4 (id) in the key's activity
-- order moves from ?3 to ?5, with ?6 messages (to or from the open time, as
-- activity-move.sql): one seek, a delete and an insert in one B-tree
UPDATE convo_key_recent SET updated_at = ?5, length = ?6
  WHERE key = ?1 AND value = ?2 AND updated_at = ?3 AND id = ?4;
