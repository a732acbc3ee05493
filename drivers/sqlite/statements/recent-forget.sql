-- a repair (see activity-forget.sql): every row of thread ?1 in the activity
-- order of its indexed keys, found by a walk of each key and value's range
DELETE FROM convo_key_recent WHERE (key, value, id) IN
  (SELECT key, value, id FROM convo_thread_keys WHERE thread = ?1);
