-- checkpoint_unseal.sql: segments of thread tid $1 back to rows (schema 42):
-- the segments ($2 namespaces, $3 first ids) deleted, and one row per
-- checkpoint they held inserted, its columns as stored: $4 namespace, $5
-- put_seq, $6 log length, $7 time, $8 channel set, $9 body type, $10 id,
-- $11 parent, $12 metadata, $13 versions, $14 body, $15 vals, then its
-- writes: $16 how many (NULL: none) of $17, all rows' writes one after
-- another. How many rows back.
WITH gone AS (
    DELETE FROM @S.checkpoint_segments s USING unnest($2::text[], $3::bytea[]) AS g(ns, id)
     WHERE s.tid = $1::int8 AND s.checkpoint_ns = g.ns AND s.first_id = g.id
    RETURNING 1),
u AS (
    SELECT x.*, coalesce(sum(x.nw) OVER (ORDER BY x.o ROWS BETWEEN UNBOUNDED PRECEDING
                                         AND 1 PRECEDING), 0) AS wfrom
      FROM unnest($4::text[], $5::int8[], $6::int8[], $7::timestamptz[], $8::int4[],
                  $9::int4[], $10::bytea[], $11::bytea[], $12::text[], $13::bytea[],
                  $14::bytea[], $15::bytea[], $16::int4[])
           WITH ORDINALITY AS x(ns, put_seq, log_length, created_at, channel_set, body_type,
                                id, parent, metadata, versions, body, vals, nw, o)),
ins AS (
    INSERT INTO @S.checkpoints (tid, put_seq, log_length, created_at, channel_set,
        body_type, checkpoint_ns, checkpoint_id, parent_id, metadata, versions, body,
        writes, vals)
    SELECT $1::int8, u.put_seq, u.log_length, u.created_at, u.channel_set, u.body_type, u.ns,
           u.id, u.parent, u.metadata, u.versions, u.body,
           CASE WHEN u.nw IS NULL THEN NULL
                ELSE coalesce(($17::bytea[])[u.wfrom + 1 : u.wfrom + u.nw], '{}') END,
           u.vals
      FROM u
    RETURNING 1)
SELECT (SELECT count(*) FROM gone)::int8, (SELECT count(*) FROM ins)::int8
