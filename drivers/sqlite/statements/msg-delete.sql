-- messages with keys in [?1, ?2]
DELETE FROM convo_messages WHERE key >= ?1 AND key <= ?2;
