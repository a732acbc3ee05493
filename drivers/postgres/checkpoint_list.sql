-- checkpoint_list.sql: checkpoints newest first per thread, threads in id
-- order; each filter may be NULL: $1 thread, $2 namespace, $3 before (a
-- checkpoint id of thread $6 and namespace $7), $4 metadata it contains, $5
-- limit. Kind 9 says `before` names no checkpoint. put_seq is one order for
-- the whole store, so `before` compares with every thread's.
-- Rows as in checkpoint_get.sql (one a checkpoint, as stored: the driver
-- decodes them); only checkpoints of live threads. A listing of one channel
-- (list opts v5 only_channel) runs checkpoint_list_channel.sql.
WITH bp AS (
    SELECT min(c.put_seq) AS p FROM @S.threads t
      JOIN @S.checkpoints c ON c.tid = t.tid
     WHERE $3::text IS NOT NULL AND t.thread_id = $6::text
       AND (t.expires_at IS NULL OR t.expires_at > now())
       AND c.checkpoint_ns = $7::text AND c.checkpoint_id = @S.id_pack($3::text)),
-- Each thread's newest first by a LATERAL ... LIMIT under its tid: with a
-- namespace, a backward scan of checkpoints_by_ns_put that stops after the
-- limit (the first branch; the one-time filters on $2 run only one); over all
-- namespaces a sort of the thread's checkpoints. A join ordered and limited
-- outside read and sorted every checkpoint of the thread (3,180 rows for a
-- page of 150 at 1,000 LangGraph turns, so every page grew with the thread).
cand AS (
    SELECT c.*, t.thread_id FROM @S.threads t CROSS JOIN bp
     CROSS JOIN LATERAL (SELECT k.* FROM @S.checkpoints k
                          WHERE k.tid = t.tid AND k.checkpoint_ns = $2::text
                            AND k.put_seq < CASE WHEN $3::text IS NULL THEN 9223372036854775807 ELSE bp.p END
                            AND ($4::text IS NULL OR @S.meta_jsonb(k.metadata) @> $4::text::jsonb)
                          ORDER BY k.put_seq DESC LIMIT $5::int8) c
     WHERE $2::text IS NOT NULL AND (t.expires_at IS NULL OR t.expires_at > now())
       AND ($1::text IS NULL OR t.thread_id = $1::text)
    UNION ALL
    SELECT c.*, t.thread_id FROM @S.threads t CROSS JOIN bp
     CROSS JOIN LATERAL (SELECT k.* FROM @S.checkpoints k
                          WHERE k.tid = t.tid
                            AND k.put_seq < CASE WHEN $3::text IS NULL THEN 9223372036854775807 ELSE bp.p END
                            AND ($4::text IS NULL OR @S.meta_jsonb(k.metadata) @> $4::text::jsonb)
                          ORDER BY k.put_seq DESC LIMIT $5::int8) c
     WHERE $2::text IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())
       AND ($1::text IS NULL OR t.thread_id = $1::text)),
sel AS (
    SELECT x.*, row_number() OVER (ORDER BY x.thread_id, x.put_seq DESC) AS r
      FROM (SELECT * FROM cand ORDER BY thread_id, put_seq DESC LIMIT $5::int8) x)
SELECT 0 AS kind, s.r, s.thread_id, s.checkpoint_ns, s.checkpoint_id, s.parent_id,
       s.metadata, s.log_length, s.created_at, s.body_type, s.body, s.tid, s.channel_set,
       s.versions, s.vals, s.writes
  FROM sel s
UNION ALL
SELECT 9, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
  FROM bp WHERE $3::text IS NOT NULL AND bp.p IS NULL
ORDER BY 2
