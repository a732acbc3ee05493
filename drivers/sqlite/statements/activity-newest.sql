-- the newest entry of the activity order: the open one (at the open time,
-- docs/sqlite.md, The thread index) when there is one, else the entry of the
-- newest thread: one seek to the end of convo_activity
SELECT updated_at, num, id FROM convo_activity ORDER BY updated_at DESC, id DESC LIMIT 1;
