-- the threads whose extra holds value ?2 (canonical JSON) at indexed key ?1, in
-- activity order (oldest first), after the position (?3 activity time, ?4 id):
-- one range of convo_thread_recent, each joined to its row by number. Expired
-- threads (deadline at or before ?5, now) and staged imports are left out.
-- The open entry (docs/sqlite.md) is after every position but its own
-- thread's, whose real time the cursor holds: the cursor's id is left out.
SELECT t.num, t.id, t.created_at, t.updated_at, t.extra
  FROM convo_thread_recent AS i JOIN convo_threads AS t ON t.num = i.thread
  WHERE i.key = ?1 AND i.value = ?2 AND (i.updated_at, i.id) > (?3, ?4) AND i.id <> ?4
    AND (t.expires_at IS NULL OR t.expires_at > ?5) AND i.id NOT GLOB '.convo-import-*'
  ORDER BY i.updated_at ASC, i.id ASC;
