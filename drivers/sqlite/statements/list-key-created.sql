-- the threads whose extra holds value ?2 (canonical JSON) at indexed key ?1, in
-- creation order (newest first), after the position (?3 created_at, ?4 id): one
-- range of convo_key_threads (its primary key), each joined to its row by
-- number. Expired threads (deadline at or before ?5, now) and staged imports
-- are left out.
SELECT t.num, t.id, t.created_at, t.updated_at, t.extra
  FROM convo_key_threads AS i JOIN convo_threads AS t ON t.num = i.thread
  WHERE i.key = ?1 AND i.value = ?2 AND (i.created_at, i.id) < (?3, ?4)
    AND (t.expires_at IS NULL OR t.expires_at > ?5) AND i.id NOT GLOB '.convo-import-*'
  ORDER BY i.created_at DESC, i.id DESC;
