-- checkpoint_list_channel.sql: checkpoint_list.sql for list opts v5
-- only_channel: its seven parameters (the channel is the driver's: it decodes
-- that channel alone, unpack.c, readback.c). Rows and order as that
-- statement's, without the metadata and the body (neither is read: metadata
-- {} and no body), and fewer columns carried from the scan.
WITH bp AS (
    SELECT min(c.put_seq) AS p FROM @S.threads t
      JOIN @S.checkpoints c ON c.tid = t.tid
     WHERE $3::text IS NOT NULL AND t.thread_id = $6::text
       AND (t.expires_at IS NULL OR t.expires_at > now())
       AND c.checkpoint_ns = $7::text AND c.checkpoint_id = @S.id_pack($3::text)),
-- each thread's newest first under its tid (checkpoint_list.sql says why)
cand AS (
    SELECT c.*, t.thread_id FROM @S.threads t CROSS JOIN bp
     CROSS JOIN LATERAL (SELECT k.tid, k.checkpoint_ns, k.checkpoint_id, k.parent_id,
                                k.log_length, k.created_at, k.put_seq, k.channel_set,
                                k.versions, k.vals, k.writes
                           FROM @S.checkpoints k
                          WHERE k.tid = t.tid AND k.checkpoint_ns = $2::text
                            AND k.put_seq < CASE WHEN $3::text IS NULL THEN 9223372036854775807 ELSE bp.p END
                            AND ($4::text IS NULL OR @S.meta_jsonb(k.metadata) @> $4::text::jsonb)
                          ORDER BY k.put_seq DESC LIMIT $5::int8) c
     WHERE $2::text IS NOT NULL AND (t.expires_at IS NULL OR t.expires_at > now())
       AND ($1::text IS NULL OR t.thread_id = $1::text)
    UNION ALL
    SELECT c.*, t.thread_id FROM @S.threads t CROSS JOIN bp
     CROSS JOIN LATERAL (SELECT k.tid, k.checkpoint_ns, k.checkpoint_id, k.parent_id,
                                k.log_length, k.created_at, k.put_seq, k.channel_set,
                                k.versions, k.vals, k.writes
                           FROM @S.checkpoints k
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
       NULL::text, s.log_length, s.created_at, NULL::integer, NULL::bytea, s.tid, s.channel_set,
       s.versions, s.vals, s.writes
  FROM sel s
UNION ALL
SELECT 9, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
  FROM bp WHERE $3::text IS NOT NULL AND bp.p IS NULL
ORDER BY 2
