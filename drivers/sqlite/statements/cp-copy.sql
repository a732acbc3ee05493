-- copy: the checkpoints with keys in [?1, ?2] and log_length <= ?5 to thread
-- ?4 at the same places (keys from ?3 on), each put now (?7), put_order after
-- ?6 in their order
INSERT INTO convo_checkpoints(key, thread, ns, id, parent_id, metadata, body_type,
  body, log_length, created_at, put_order, channels)
  SELECT key - ?1 + ?3, ?4, ns, id, parent_id, metadata, body_type, body, log_length,
    ?7, ?6 + row_number() OVER (ORDER BY key), channels
  FROM convo_checkpoints WHERE key >= ?1 AND key <= ?2 AND log_length <= ?5
  ORDER BY key;
