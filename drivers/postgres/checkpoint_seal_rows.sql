-- checkpoint_seal_rows.sql: the rows a seal of thread $1, namespace $2 would
-- take (schema 42): its oldest checkpoints in put order, all but the newest
-- $3, at most $4, as stored (columns as in checkpoint_get.sql, then put_seq
-- and the row's xmin, which checkpoint_seal() compares), with the last id of
-- the namespace's newest segment (NULL: none). Nothing is locked: the seal
-- deletes the rows only while they are unchanged.
SELECT 0 AS kind, k.put_seq AS r, NULL::text, k.checkpoint_ns, k.checkpoint_id, k.parent_id,
       k.metadata, k.log_length, k.created_at, k.body_type, k.body, k.tid, k.channel_set,
       k.versions, k.vals, k.writes, k.put_seq, k.xmin::text,
       (SELECT s.last_id FROM @S.checkpoint_segments s
         WHERE s.tid = t.tid AND s.checkpoint_ns = $2::text
         ORDER BY s.first_id DESC LIMIT 1)
  FROM @S.threads t
 CROSS JOIN LATERAL (SELECT count(*) AS n FROM @S.checkpoints c
                      WHERE c.tid = t.tid AND c.checkpoint_ns = $2::text) h
 CROSS JOIN LATERAL (SELECT c.* , c.xmin FROM @S.checkpoints c
                      WHERE c.tid = t.tid AND c.checkpoint_ns = $2::text
                      ORDER BY c.put_seq LIMIT least(greatest(h.n - $3::int8, 0), $4::int8)) k
 WHERE t.thread_id = $1::text AND (t.expires_at IS NULL OR t.expires_at > now())
 ORDER BY k.put_seq
