-- load_derived.sql with the probe gated by the row's mark (clear: no probe).
-- FILE:0 with PG_COST_STORE=threads PG_COST_SETUP=setup_hinted.sql
SELECT r.length,
       CASE WHEN true AND (m.seq IS NULL OR m.seq = r.f)
       THEN coalesce((SELECT x.extra::text FROM @S.thread_extra x
                       WHERE x.tid = r.tid), '{}') END,
       m.seq, m.role, m.created_at, m.body, r.generation
  FROM (SELECT t.tid, t.length, t.generation, b.f,
               CASE WHEN 0::int8 > 0 AND 0::int8 < t.length - b.f THEN b.f + 0::int8
               ELSE t.length END AS e
          FROM (SELECT t0.tid, t0.generation, CASE WHEN t0.hinted THEN coalesce((SELECT m.seq + 1 FROM @S.messages m
                        WHERE m.tid = t0.tid AND m.seq >= t0.length AND m.role <> ''
                        ORDER BY m.seq DESC LIMIT 1), t0.length) ELSE t0.length END AS length, t0.thread_id, t0.expires_at
                  FROM @S.threads t0 WHERE t0.thread_id = 'load20'::text OFFSET 0) t,
               LATERAL (SELECT least(greatest(0::int8,
                   CASE WHEN 0::int8 > 0 THEN t.length - 0::int8 ELSE 0 END), t.length)
                   AS f) b
         WHERE t.thread_id = 'load20'::text AND (t.expires_at IS NULL OR t.expires_at > now())) r
  LEFT JOIN LATERAL (SELECT seq, role, created_at, body FROM @S.messages
                      WHERE tid = r.tid AND seq >= r.f AND seq < r.e
                      ORDER BY seq) m
    ON true
