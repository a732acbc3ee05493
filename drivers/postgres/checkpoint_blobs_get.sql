-- checkpoint_blobs_get.sql: the channel values a read found not in its
-- checkpoints' rows (type 0 in vals, or a row of version 28 without vals),
-- from checkpoint_blobs by primary key, one entry i per (thread tid, namespace,
-- channel, version): $1 tids, $2 namespaces, $5 channels, $6 versions. The
-- first entry of each checkpoint also names it ($3 id_pack() id) and gives the
-- versions and vals the read decoded ($4, $7; NULL in its other entries): ok
-- is false when that row is gone or changed since (a swap, a prune, a delete
-- between the two statements), and the driver reads again. (schema 42) A
-- sealed checkpoint's first entry gives instead its segment's xmin ($8, NULL
-- for a row's): ok is false when the segment holding the id is not that one
-- any more (unsealed, pruned, deleted, sealed again). A value not found:
-- the channel has none (type NULL). The rows come back in i's order (the
-- driver matches them to its entries by position and checks i).
SELECT x.i, CASE WHEN x.seg IS NOT NULL THEN EXISTS (
                  SELECT 1 FROM @S.checkpoint_segments s
                   WHERE s.tid = x.tid AND s.checkpoint_ns = x.ns AND s.first_id <= x.id
                     AND s.last_id >= x.id AND s.xmin::text::int8 = x.seg)
            ELSE x.versions IS NULL OR EXISTS (SELECT 1 FROM @S.checkpoints k
                     WHERE k.tid = x.tid AND k.checkpoint_ns = x.ns AND k.checkpoint_id = x.id
                       AND k.versions = x.versions AND k.vals IS NOT DISTINCT FROM x.vals)
       END AS ok,
       v.type, v.value
  FROM unnest($1::int8[], $2::text[], $3::bytea[], $4::bytea[], $5::int4[], $6::bytea[],
              $7::bytea[], $8::int8[])
       WITH ORDINALITY AS x(tid, ns, id, versions, ch, ver, vals, seg, i)
  LEFT JOIN LATERAL (SELECT b.type, b.value FROM @S.checkpoint_blobs b
                      WHERE b.tid = x.tid AND b.checkpoint_ns = x.ns
                        AND b.channel = x.ch AND b.version = x.ver LIMIT 1) v ON true
 ORDER BY x.i
