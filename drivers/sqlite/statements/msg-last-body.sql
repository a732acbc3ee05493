-- a thread's last message (key and body) for a listing's length and preview:
-- one seek to the end of its key range [?1, ?2]
SELECT key, body FROM convo_messages WHERE key >= ?1 AND key <= ?2
  ORDER BY key DESC LIMIT 1;
