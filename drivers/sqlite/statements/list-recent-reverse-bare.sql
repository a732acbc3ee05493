-- the ids and times of every thread in activity order (oldest first),
-- after the position (?3, ?4 id): one range of convo_activity and nothing else.
-- Only when no thread has a deadline (nothing to leave out for expiry); staged
-- imports are left out. ?1, ?2 are unused (the statements share parameters).
-- The open entry (docs/sqlite.md) is after every position but its own
-- thread's, whose real time the cursor holds: the cursor's id is left out.
SELECT num, id, created_at, updated_at, length FROM convo_activity
  WHERE (updated_at, id) > (?3, ?4) AND id <> ?4 AND id NOT GLOB '.convo-import-*'
  ORDER BY updated_at ASC, id ASC;
