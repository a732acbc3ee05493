-- a replaced checkpoint keeps its key and put_order (its places in the
-- orders) and created_at: the caller binds the ones it had
INSERT OR REPLACE INTO convo_checkpoints(key, thread, ns, id, parent_id,
  metadata, body_type, body, log_length, created_at, put_order)
  VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11);
