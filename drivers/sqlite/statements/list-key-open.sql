-- the thread written last (the open entry of convo_activity, docs/sqlite.md,
-- The open entry) when its extra holds value ?2 (canonical JSON) at indexed
-- key ?1, as a row of list-key-recent.sql: since layout 15 it has no row in
-- convo_key_recent, so a listing by the key's value adds it, before the range
-- newest first (?7 true) and after it oldest first (?7 false), where the
-- position (?3 activity time, ?4 id) lets it, compared as the range's rows
-- were when the open row was among them: at the open time, after every
-- position but its own thread's, whose real time the cursor holds. One seek
-- to the end of convo_activity, one in convo_key_threads (its primary key);
-- its last message by a seek to the end of its key range (its time and
-- length are the thread's own). Expired threads (deadline at or before ?5,
-- now) and staged imports are left out.
SELECT t.num, t.id, t.created_at, t.updated_at, t.extra, m.key, m.created_at,
       CASE WHEN ?6 THEN m.body END
  FROM convo_activity AS i JOIN convo_threads AS t ON t.num = i.num
  LEFT JOIN convo_messages AS m ON m.key =
      (SELECT key FROM convo_messages
       WHERE key BETWEEN t.num << 32 AND (t.num << 32) + 4294967295
       ORDER BY key DESC LIMIT 1)
  WHERE i.updated_at = 9223372036854775807
    AND EXISTS (SELECT 1 FROM convo_key_threads AS k
                WHERE k.key = ?1 AND k.value = ?2 AND k.created_at = i.created_at
                  AND k.id = i.id)
    AND CASE WHEN ?7 THEN (i.updated_at, i.id) < (?3, ?4)
             ELSE (i.updated_at, i.id) > (?3, ?4) AND i.id <> ?4 END
    AND (t.expires_at IS NULL OR t.expires_at > ?5) AND i.id NOT GLOB '.convo-import-*';
