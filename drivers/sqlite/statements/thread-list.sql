-- ids after ?1 along the unique index (BINARY collation: byte order), at most
-- ?2, expired threads (deadline at or before ?3, now) left out
SELECT id FROM convo_threads WHERE id > ?1
  AND (expires_at IS NULL OR expires_at > ?3) ORDER BY id LIMIT ?2;
