-- checkpoint_get.sql: checkpoint $3 of thread $1, namespace $2, of a live
-- thread (no deadline, or one ahead): its row as stored, one row per
-- checkpoint, decoded by the driver (unpack.c, readback.c: no read statement
-- decodes a packed column in SQL). Columns: kind (0; 9 in a listing:
-- `before` names no checkpoint), r (the order), thread_id, ns, id and parent
-- (id_pack() bytes), metadata (meta_pack() text), log length, time, body type
-- (a checkpoint_names number) and body, tid, channel set, versions, vals,
-- writes.
SELECT 0 AS kind, 0::int8 AS r, t.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_id,
       c.metadata, c.log_length, c.created_at, c.body_type, c.body, c.tid, c.channel_set,
       c.versions, c.vals, c.writes
  FROM @S.threads t
  JOIN @S.checkpoints c ON c.tid = t.tid
 WHERE t.thread_id = $1::text AND (t.expires_at IS NULL OR t.expires_at > now())
   AND c.checkpoint_ns = $2::text
   AND c.checkpoint_id = @S.id_pack($3::text)
