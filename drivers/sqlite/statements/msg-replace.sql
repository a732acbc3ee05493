-- a rewrite: ?1 key ((thread num << 32) | seq), ?2 role, ?3 created_at, ?4 the
-- bytes, over the message of the old tail at that seq if there is one
INSERT OR REPLACE INTO convo_messages(key, role, created_at, body)
  VALUES(?1, ?2, ?3, ?4);
