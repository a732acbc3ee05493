-- every thread in id order (descending), after id ?4, along the unique index on
-- id. Expired threads (deadline at or before ?5, now) and staged imports are
-- left out. ?1, ?2, ?3 are unused (the statements share their parameters).
SELECT num, id, created_at, updated_at, extra FROM convo_threads
  WHERE id < ?4 AND (expires_at IS NULL OR expires_at > ?5)
    AND id NOT GLOB '.convo-import-*'
  ORDER BY id DESC;
