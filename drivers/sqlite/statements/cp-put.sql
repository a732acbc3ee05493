-- a replaced checkpoint keeps its key and put_order (its places in the
-- orders) and created_at: the caller binds the ones it had; ids as
-- compact.c's sq_bind_id() binds them, ?7 the body type's number in
-- convo_names, ?12 the channel list (compact.c), ?13 how many places before
-- ?1 the parent is (NULL: ?5 names it by id), ?14 the number of the
-- metadata's shape in convo_names (NULL: ?6 is its text, else its values);
-- ?15 1 when the checkpoint is there already: its pending writes (layout 10:
-- in the row) stay
INSERT OR REPLACE INTO convo_checkpoints(key, thread, ns, id, parent_id, parent_place,
  meta, body_type, body, log_length, created_at, put_order, channel_list, meta_shape,
  pending)
  VALUES(?1, ?2, ?3, ?4, ?5, ?13, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?14,
         CASE WHEN ?15 THEN (SELECT pending FROM convo_checkpoints WHERE key = ?1) END);
