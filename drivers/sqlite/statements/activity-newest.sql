-- the newest entry of the activity order: the open one (at the open time,
-- docs/sqlite.md, The thread index) when there is one, else the entry of the
-- newest thread: one seek to the end of convo_activity (?1: the open time,
-- the largest there is, so the plan is a search from it, not a walk)
SELECT updated_at, num, id FROM convo_activity WHERE updated_at <= ?1
  ORDER BY updated_at DESC, id DESC LIMIT 1;
