-- load.sql with the values of docs/performance.md's load written in (the thread
-- load20: run it as FILE:0, PG_COST_STORE=threads): the baseline of load_gated.sql
SELECT r.length,
       CASE WHEN true AND (m.seq IS NULL OR m.seq = r.f)
       THEN coalesce((SELECT x.extra::text FROM @S.thread_extra x
                       WHERE x.tid = r.tid), '{}') END,
       m.seq, m.role, m.created_at, m.body, r.generation
  FROM (SELECT t.tid, t.length, t.generation, b.f,
               CASE WHEN 0::int8 > 0 AND 0::int8 < t.length - b.f THEN b.f + 0::int8
               ELSE t.length END AS e
          FROM @S.threads t,
               LATERAL (SELECT least(greatest(0::int8,
                   CASE WHEN 0::int8 > 0 THEN t.length - 0::int8 ELSE 0 END), t.length)
                   AS f) b
         WHERE t.thread_id = 'load20'::text AND (t.expires_at IS NULL OR t.expires_at > now())) r
  LEFT JOIN LATERAL (SELECT seq, role, created_at, body FROM @S.messages
                      WHERE tid = r.tid AND seq >= r.f AND seq < r.e
                      ORDER BY seq) m
    ON true
