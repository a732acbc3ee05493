-- a replaced checkpoint keeps its key and put_order (its places in the
-- orders) and created_at: the caller binds the ones it had; ids as
-- compact.c's sq_bind_id() binds them, ?7 the body type's number in
-- convo_names, ?12 the channel list (compact.c), ?13 how many places before
-- ?1 the parent is (NULL: ?5 names it by id), ?14 the number of the
-- metadata's shape in convo_names (NULL: ?6 is its text, else its values);
-- ?15 1 when the checkpoint is there already: its pending writes (layout 10:
-- in the row) stay, and so does its unordered (layout 14). A new one is
-- unordered (1) when the thread's last ordered row (the last of its block of
-- 16, or of the block of the greatest first ordered row) has an id not below
-- its own; else ordered: the first of its block (2) or not (0)
-- layout 17: a seal=0 store's put, the row holding every column (sealed NULL);
-- a re-put keeps the pending writes a hot row held (then dropped: hot-delete.sql)
INSERT OR REPLACE INTO convo_checkpoints(key, thread, ns, id, parent_id, parent_place,
  meta, body_type, body, log_length, created_at, put_order, channel_list, meta_shape,
  pending, unordered)
  VALUES(?1, ?2, ?3, ?4, ?5, ?13, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?14,
         CASE WHEN ?15 THEN coalesce((SELECT pending FROM convo_checkpoint_hot WHERE key = ?1),
                                     (SELECT pending FROM convo_checkpoints WHERE key = ?1)) END,
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
