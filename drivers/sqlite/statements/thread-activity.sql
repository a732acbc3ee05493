-- thread ?1's activity time (the later of its row's updated_at and its last
-- message's created_at) and length (one past its last seq): its row and one
-- seek to the end of its key range
SELECT max(t.updated_at, coalesce(m.created_at, 0)), coalesce((m.key & 4294967295) + 1, 0)
  FROM convo_threads AS t LEFT JOIN convo_messages AS m
    ON m.key = (SELECT key FROM convo_messages
                WHERE key BETWEEN ?1 << 32 AND (?1 << 32) + 4294967295
                ORDER BY key DESC LIMIT 1)
  WHERE t.num = ?1;
