-- a thread's last message (key, created_at and body) for a listing's length,
-- activity time and preview: one seek to the end of its key range [?1, ?2]
SELECT key, created_at, body FROM convo_messages WHERE key >= ?1 AND key <= ?2
  ORDER BY key DESC LIMIT 1;
