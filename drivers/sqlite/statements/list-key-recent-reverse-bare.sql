-- the ids and times of the threads whose extra holds value ?2 at indexed key
-- ?1, in activity order (oldest first), after the position (?3, ?4 id): one
-- range of convo_thread_recent and nothing else. Only when no thread has a
-- deadline (nothing to leave out for expiry); staged imports are left out.
-- The open entry (docs/sqlite.md) is after every position but its own
-- thread's, whose real time the cursor holds: the cursor's id is left out.
SELECT thread, id, created_at, updated_at, length FROM convo_thread_recent
  WHERE key = ?1 AND value = ?2 AND (updated_at, id) > (?3, ?4) AND id <> ?4
    AND id NOT GLOB '.convo-import-*'
  ORDER BY updated_at ASC, id ASC;
