-- the threads whose extra holds value ?2 (canonical JSON) at indexed key ?1, in
-- id order (ascending), after id ?4: one range of convo_key_threads_by_id
-- (covering), each joined to its row by number. Expired threads (deadline at or
-- before ?5, now) and staged imports are left out. ?3 is unused (the statements
-- share their parameters).
SELECT t.num, t.id, t.created_at, t.updated_at, t.extra
  FROM convo_key_threads AS i JOIN convo_threads AS t ON t.num = i.thread
  WHERE i.key = ?1 AND i.value = ?2 AND i.id > ?4
    AND (t.expires_at IS NULL OR t.expires_at > ?5) AND i.id NOT GLOB '.convo-import-*'
  ORDER BY i.id ASC;
