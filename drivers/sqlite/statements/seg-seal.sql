-- layout 17: the rows of block ?1 that hold their moved columns give them to
-- the block's segment (stored by seg-put.sql in this transaction): placeholders
-- in their place (migrate-14-15.sql)
UPDATE convo_checkpoints
  SET meta = x'', body_type = NULL, body = NULL, created_at = 0, channel_list = x'0080',
      meta_shape = NULL, pending = NULL, sealed = 1
  WHERE key >= ?1 << 4 AND key <= (?1 << 4) | 15 AND sealed IS NULL;
