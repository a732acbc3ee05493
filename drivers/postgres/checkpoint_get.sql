-- checkpoint_get.sql: checkpoint $3 of thread $1, namespace $2, of a live
-- thread (no deadline, or one ahead): its row as stored, one row per
-- checkpoint, decoded by the driver (unpack.c, readback.c: no read statement
-- decodes a packed column in SQL). Columns: kind (0; 9 in a listing:
-- `before` names no checkpoint), r (the order), thread_id, ns, id and parent
-- (id_pack() bytes), metadata (meta_pack() text), log length, time, body type
-- (a checkpoint_names number) and body, tid, channel set, versions, vals,
-- writes, put_seq. (schema 42) Then, as a row of kind 1 (data in the body
-- column), the segment that would hold it (the greatest first id at or below
-- it, when its last is not below): the driver looks for the id inside when no
-- row came; its r is the segment's xmin, which checkpoint_blobs_get.sql checks.
SELECT 0 AS kind, 0::int8 AS r, t.thread_id, c.checkpoint_ns, c.checkpoint_id, c.parent_id,
       c.metadata, c.log_length, c.created_at, c.body_type, c.body, c.tid, c.channel_set,
       c.versions, c.vals, c.writes, c.put_seq
  FROM @S.threads t
  JOIN @S.checkpoints c ON c.tid = t.tid
 WHERE t.thread_id = $1::text AND (t.expires_at IS NULL OR t.expires_at > now())
   AND c.checkpoint_ns = $2::text
   AND c.checkpoint_id = @S.id_pack($3::text)
UNION ALL
SELECT 1, s.x::text::int8, t.thread_id, s.checkpoint_ns, NULL, NULL, NULL, NULL, NULL, NULL,
       s.data, s.tid, NULL, NULL, NULL, NULL, s.last_seq
  FROM @S.threads t
 CROSS JOIN LATERAL (SELECT k.*, k.xmin AS x FROM @S.checkpoint_segments k
                      WHERE k.tid = t.tid AND k.checkpoint_ns = $2::text
                        AND k.first_id <= @S.id_pack($3::text)
                      ORDER BY k.first_id DESC LIMIT 1) s
 WHERE t.thread_id = $1::text AND (t.expires_at IS NULL OR t.expires_at > now())
   AND s.last_id >= @S.id_pack($3::text)
