-- load.sql: a thread's length, generation, extra and messages [from, to) ($1
-- thread, $2 from seq, $3 limit, $4 tail, $5 with extra). One snapshot for
-- length, generation, extra and the range: the tail and limit are resolved
-- against the length read in the same statement. The extra rides on the
-- first row only (the subquery runs for that row only). No outer ORDER BY:
-- the lateral join runs the ordered index scan once for the one thread row,
-- and a sort there would copy every body (the driver checks the order).
SELECT r.length,
       CASE WHEN $5::bool AND (m.seq IS NULL OR m.seq = r.f)
       THEN coalesce((SELECT x.extra::text FROM @S.thread_extra x
                       WHERE x.tid = r.tid), '{}') END,
       m.seq, m.role, m.created_at, m.body, r.generation
  FROM (SELECT t.tid, t.length, t.generation, b.f,
               CASE WHEN $3::int8 > 0 AND $3::int8 < t.length - b.f THEN b.f + $3::int8
               ELSE t.length END AS e
          FROM @S.threads t,
               LATERAL (SELECT least(greatest($2::int8,
                   CASE WHEN $4::int8 > 0 THEN t.length - $4::int8 ELSE 0 END), t.length)
                   AS f) b
         WHERE t.thread_id = $1::text AND (t.expires_at IS NULL OR t.expires_at > now())) r
  LEFT JOIN LATERAL (SELECT seq, role, created_at, body FROM @S.messages
                      WHERE tid = r.tid AND seq >= r.f AND seq < r.e
                      ORDER BY seq) m
    ON true
