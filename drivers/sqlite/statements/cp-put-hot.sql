-- layout 17: checkpoint ?1 (arguments as cp-put.sql's) stored hot: its row
-- with the placeholders of the moved columns (migrate-14-15.sql), sealed 0, its
-- moved columns in convo_checkpoint_hot (hot-put.sql, run first: it takes a
-- re-put's pending writes from the row this replaces); unordered as in cp-put.sql
INSERT OR REPLACE INTO convo_checkpoints(key, thread, ns, id, parent_id, parent_place,
  meta, body_type, body, log_length, created_at, put_order, channel_list, meta_shape,
  pending, sealed, unordered)
  VALUES(?1, ?2, ?3, ?4, ?5, ?13, x'', NULL, NULL, ?9, 0, ?11, x'0080', NULL, NULL, 0,
         CASE WHEN ?15 THEN (SELECT unordered FROM convo_checkpoints WHERE key = ?1)
              WHEN ?4 <= coalesce(
                     (SELECT id FROM convo_checkpoints
                        WHERE key >= ?1 & ~15 AND key < ?1 AND unordered <> 1
                        ORDER BY key DESC LIMIT 1),
                     (SELECT id FROM convo_checkpoints
                        WHERE key BETWEEN (SELECT key FROM convo_checkpoints
                                             WHERE thread = ?2 AND unordered = 2
                                             ORDER BY id DESC LIMIT 1)
                                      AND (SELECT key FROM convo_checkpoints
                                             WHERE thread = ?2 AND unordered = 2
                                             ORDER BY id DESC LIMIT 1) | 15
                          AND unordered <> 1 ORDER BY key DESC LIMIT 1)) THEN 1
              WHEN (SELECT 1 FROM convo_checkpoints
                      WHERE key >= ?1 & ~15 AND key < ?1 AND unordered <> 1) THEN 0
              ELSE 2 END);
