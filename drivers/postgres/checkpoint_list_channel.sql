-- checkpoint_list_channel.sql: checkpoint_list.sql for list opts v5
-- only_channel: its seven parameters (the channel is the driver's: it decodes
-- that channel alone, unpack.c, readback.c). Rows and order as that
-- statement's, without the metadata and the body (neither is read: metadata
-- {} and no body), and fewer columns carried from the scan.
-- Schema 42: rows of kind 1 are segments (data in the body column, tid, last
-- put_seq, r the segment's xmin for checkpoint_blobs_get.sql's check), kind
-- 2 the segment `before` may be in, kind 3 carries `before`'s put_seq when it
-- is a row; the last column is each row's put_seq.
WITH bp AS (
    SELECT min(c.put_seq) AS p FROM @S.threads t
      JOIN @S.checkpoints c ON c.tid = t.tid
     WHERE $3::text IS NOT NULL AND t.thread_id = $6::text
       AND (t.expires_at IS NULL OR t.expires_at > now())
       AND c.checkpoint_ns = $7::text AND c.checkpoint_id = @S.id_pack($3::text)),
-- (schema 42) `before` sealed: the segment that would hold it, read by the
-- driver for its put_seq; the rows and segments up to that segment's last
-- are candidates meanwhile (the driver drops those not before it)
bs AS (
    SELECT s.last_seq + 1 AS p, s.tid, s.data FROM @S.threads t
     CROSS JOIN LATERAL (SELECT g.* FROM @S.checkpoint_segments g
                          WHERE g.tid = t.tid AND g.checkpoint_ns = $7::text
                            AND g.first_id <= @S.id_pack($3::text)
                          ORDER BY g.first_id DESC LIMIT 1) s
     WHERE $3::text IS NOT NULL AND t.thread_id = $6::text
       AND (t.expires_at IS NULL OR t.expires_at > now())
       AND s.last_id >= @S.id_pack($3::text)),
-- (sealed: that bound is not `before`'s own put_seq, so neither the rows nor
-- the segments are cut here: the driver cuts the page once it knows it)
b AS (
    SELECT coalesce(bp.p, (SELECT bs.p FROM bs)) AS p,
           $3::text IS NOT NULL AND bp.p IS NULL AS sealed FROM bp),
-- each thread's newest first under its tid (checkpoint_list.sql says why)
cand AS (
    SELECT c.*, t.thread_id FROM @S.threads t CROSS JOIN b
     CROSS JOIN LATERAL (SELECT k.tid, k.checkpoint_ns, k.checkpoint_id, k.parent_id,
                                k.log_length, k.created_at, k.put_seq, k.channel_set,
                                k.versions, k.vals, k.writes
                           FROM @S.checkpoints k
                          WHERE k.tid = t.tid AND k.checkpoint_ns = $2::text
                            AND k.put_seq < CASE WHEN $3::text IS NULL THEN 9223372036854775807 ELSE b.p END
                            AND ($4::text IS NULL OR @S.meta_jsonb(k.metadata) @> $4::text::jsonb)
                          ORDER BY k.put_seq DESC
                          LIMIT CASE WHEN b.sealed THEN NULL ELSE $5::int8 END) c
     WHERE $2::text IS NOT NULL AND (t.expires_at IS NULL OR t.expires_at > now())
       AND ($1::text IS NULL OR t.thread_id = $1::text)
    UNION ALL
    SELECT c.*, t.thread_id FROM @S.threads t CROSS JOIN b
     CROSS JOIN LATERAL (SELECT k.tid, k.checkpoint_ns, k.checkpoint_id, k.parent_id,
                                k.log_length, k.created_at, k.put_seq, k.channel_set,
                                k.versions, k.vals, k.writes
                           FROM @S.checkpoints k
                          WHERE k.tid = t.tid
                            AND k.put_seq < CASE WHEN $3::text IS NULL THEN 9223372036854775807 ELSE b.p END
                            AND ($4::text IS NULL OR @S.meta_jsonb(k.metadata) @> $4::text::jsonb)
                          ORDER BY k.put_seq DESC
                          LIMIT CASE WHEN b.sealed THEN NULL ELSE $5::int8 END) c
     WHERE $2::text IS NULL AND (t.expires_at IS NULL OR t.expires_at > now())
       AND ($1::text IS NULL OR t.thread_id = $1::text)),
sel AS (
    SELECT x.*, row_number() OVER (ORDER BY x.thread_id, x.put_seq DESC) AS r
      FROM (SELECT * FROM cand ORDER BY thread_id, put_seq DESC
             LIMIT CASE WHEN (SELECT b.sealed FROM b) THEN NULL ELSE $5::int8 END) x),
-- (schema 42) the segments whose checkpoints could come before the page's last
-- row (all, while the page is short): the driver decodes them, filters on
-- metadata and `before`, merges them with the rows by put_seq and cuts the page
lastrow AS (
    SELECT s.thread_id, s.put_seq, (SELECT count(*) FROM sel) AS n FROM sel s
     ORDER BY s.r DESC LIMIT 1),
segs AS (
    SELECT s.tid, t.thread_id, s.checkpoint_ns, s.data, s.last_seq, s.xmin::text::int8 AS x
      FROM @S.threads t CROSS JOIN b
      JOIN @S.checkpoint_segments s ON s.tid = t.tid
     WHERE (t.expires_at IS NULL OR t.expires_at > now())
       AND ($1::text IS NULL OR t.thread_id = $1::text)
       AND ($2::text IS NULL OR s.checkpoint_ns = $2::text)
       AND ($3::text IS NULL OR s.first_seq < b.p)
       AND ($5::int8 IS NULL OR b.sealed OR coalesce((SELECT l.n FROM lastrow l), 0) < $5::int8
            OR t.thread_id < (SELECT l.thread_id FROM lastrow l)
            OR (t.thread_id = (SELECT l.thread_id FROM lastrow l)
                AND s.last_seq > (SELECT l.put_seq FROM lastrow l))))
SELECT 0 AS kind, s.r, s.thread_id, s.checkpoint_ns, s.checkpoint_id, s.parent_id,
       NULL::text, s.log_length, s.created_at, NULL::integer, NULL::bytea, s.tid, s.channel_set,
       s.versions, s.vals, s.writes, s.put_seq
  FROM sel s
UNION ALL
SELECT 1, g.x, g.thread_id, g.checkpoint_ns, NULL, NULL, NULL, NULL, NULL, NULL, g.data, g.tid,
       NULL, NULL, NULL, NULL, g.last_seq
  FROM segs g
UNION ALL
SELECT 2, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, g.data, g.tid, NULL, NULL, NULL,
       NULL, NULL
  FROM bp, bs g WHERE bp.p IS NULL
UNION ALL
SELECT 3, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL, bp.p
  FROM bp WHERE $3::text IS NOT NULL AND bp.p IS NOT NULL
UNION ALL
SELECT 9, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       NULL
  FROM b WHERE $3::text IS NOT NULL AND b.p IS NULL
ORDER BY 1, 2
