-- a repair (see activity-forget.sql): every row of thread ?1 in the activity
-- order of its indexed keys, found by a walk of the whole order
DELETE FROM convo_key_recent WHERE thread = ?1;
