-- fork: the messages with keys in [?1, ?2) copied to keys from ?3 on
INSERT INTO convo_messages(key, role, created_at, body)
  SELECT key - ?1 + ?3, role, created_at, body FROM convo_messages
  WHERE key >= ?1 AND key < ?2 ORDER BY key;
