-- layout 17: the moved columns of checkpoint ?1 stored hot (arguments as
-- cp-put.sql's: ?6 meta, ?7 body type, ?8 body, ?10 created_at, ?12 channel
-- list, ?14 meta shape); ?15 a re-put: the pending writes it had, hot or in its row
INSERT OR REPLACE INTO convo_checkpoint_hot(key, meta, body_type, body, created_at,
  channel_list, meta_shape, pending)
  VALUES(?1, ?6, ?7, ?8, ?10, ?12, ?14,
         CASE WHEN ?15 THEN coalesce((SELECT pending FROM convo_checkpoint_hot WHERE key = ?1),
                                     (SELECT pending FROM convo_checkpoints WHERE key = ?1)) END);
