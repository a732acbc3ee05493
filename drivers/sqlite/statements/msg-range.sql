-- messages with keys in [?1, ?2), in seq order
SELECT key, role, created_at, body FROM convo_messages
  WHERE key >= ?1 AND key < ?2 ORDER BY key;
