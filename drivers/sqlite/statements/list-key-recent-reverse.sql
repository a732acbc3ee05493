-- the threads whose extra holds value ?2 (canonical JSON) at indexed key ?1, in
-- activity order (oldest first), after the position (?3 activity time, ?4 id):
-- one range of convo_key_recent, each joined to its row by number. Expired
-- threads (deadline at or before ?5, now) and staged imports are left out.
-- With each thread its last message (m: its key and created_at, and its body
-- when ?6, for the preview), found from the length the entry carries, one
-- rowid seek. The open thread has no row here (layout 15): list-key-open.sql
-- adds it.
SELECT t.num, t.id, t.created_at, t.updated_at, t.extra, m.key, m.created_at,
       CASE WHEN ?6 THEN m.body END
  FROM convo_key_recent AS i JOIN convo_threads AS t ON t.num = i.thread
  LEFT JOIN convo_messages AS m ON m.key = CASE WHEN i.length > 0
      THEN (t.num << 32) + i.length - 1 END
  WHERE i.key = ?1 AND i.value = ?2 AND (i.updated_at, i.id) > (?3, ?4)
    AND (t.expires_at IS NULL OR t.expires_at > ?5) AND i.id NOT GLOB '.convo-import-*'
  ORDER BY i.updated_at ASC, i.id ASC;
