-- the key and created_at of a thread's last message: one seek to the end of
-- its key range [?1, ?2], so the length costs the same at any length
SELECT key, created_at FROM convo_messages WHERE key >= ?1 AND key <= ?2
  ORDER BY key DESC LIMIT 1;
