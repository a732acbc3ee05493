-- ?1 thread id, ?2 created_at, ?3 extra (NULL: none), ?4 expires_at (NULL:
-- never), ?5 generation
INSERT INTO convo_threads(id, created_at, extra, expires_at, generation)
  VALUES(?1, ?2, ?3, ?4, ?5);
