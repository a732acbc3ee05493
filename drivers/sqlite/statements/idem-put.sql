-- ?1 thread number, ?2 key, ?3 first seq, ?4 count, ?5 created_at
INSERT INTO convo_idempotency(thread, key, first_seq, count, created_at)
  VALUES(?1, ?2, ?3, ?4, ?5);
