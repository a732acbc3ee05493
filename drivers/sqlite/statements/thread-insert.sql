-- ?1 thread id, ?2 created_at (and updated_at), ?3 extra (NULL: none), ?4
-- expires_at (NULL: never), ?5 generation
INSERT INTO convo_threads(id, created_at, extra, expires_at, generation, updated_at)
  VALUES(?1, ?2, ?3, ?4, ?5, ?2);
