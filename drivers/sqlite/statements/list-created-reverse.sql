-- every thread in creation order (oldest first), after the position (?3
-- created_at, ?4 id), along convo_threads_by_created. Expired threads (deadline
-- at or before ?5, now) and staged imports are left out. ?1, ?2 are unused (the
-- statements share their parameters).
SELECT num, id, created_at, updated_at, extra FROM convo_threads
  WHERE (created_at, id) > (?3, ?4) AND (expires_at IS NULL OR expires_at > ?5)
    AND id NOT GLOB '.convo-import-*'
  ORDER BY created_at ASC, id ASC;
