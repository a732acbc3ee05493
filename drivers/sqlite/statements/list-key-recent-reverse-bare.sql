-- the ids and times of the threads whose extra holds value ?2 at indexed key
-- ?1, in activity order (oldest first), after the position (?3, ?4 id): one
-- range of convo_key_recent and nothing else. Only when no thread has a
-- deadline (nothing to leave out for expiry); staged imports are left out.
-- The open thread has no row here (layout 15): list-key-open.sql adds it.
SELECT thread, id, created_at, updated_at, length FROM convo_key_recent
  WHERE key = ?1 AND value = ?2 AND (updated_at, id) > (?3, ?4)
    AND id NOT GLOB '.convo-import-*'
  ORDER BY updated_at ASC, id ASC;
