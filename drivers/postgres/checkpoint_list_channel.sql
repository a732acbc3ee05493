-- checkpoint_list_channel.sql: checkpoint_list.sql for list opts v5
-- only_channel: its seven parameters and $8 the channel (never NULL: without
-- one the driver runs checkpoint_list.sql). Rows and order as that
-- statement's, for each checkpoint its id, parent, log length and time
-- (metadata {} and no body: neither is read), the one channel's version and
-- value, its pending writes to that channel. What the wide statement spent (py28k: ~50 ms of 3 fresh
-- get_states decoding, ~40 ms planning it cold) is not spent here:
--   * no channel_vals(): its window functions decoded every channel of every
--     row (offsets of all versions and values) to keep one; here one
--     aggregate over the set's lengths finds the channel's offsets and the
--     bytes of that channel alone are cut out, checked as channel_vals()
--     checks them (a row whose lengths do not fill versions or vals, a first
--     channel marked 255, a bad type or length: get_byte(.., -1), SQLSTATE
--     2202E, CONVO_ECORRUPT);
--   * no meta_text() and no body: the listing drops them;
--   * fewer columns carried from the scan (no metadata, body).
-- The layouts read are migrate-37.sql's versions (forms 1, 2, 4) and
-- migrate-31.sql's vals (forms 1, 2), migrate-39.sql's write elements.
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
      FROM (SELECT * FROM cand ORDER BY thread_id, put_seq DESC LIMIT $5::int8) x),
-- the channel's number (none: no checkpoint lists it or writes to it)
ch AS (SELECT (SELECT n.num FROM @S.checkpoint_names n WHERE n.name = $8::text) AS num),
-- the channel's place p in each row's set of n channels, and the forms (this
-- and the next MATERIALIZED: their expressions are not copied into the later
-- ones' by the planner, which planned the statement in 2.9 ms warm, 2.2 so)
pos AS MATERIALIZED (
    SELECT s.r, s.tid, s.checkpoint_ns, s.versions, s.vals, ch.num AS chn, p.p, p.n,
           get_byte(s.versions, 0) AS w,
           CASE get_byte(s.versions, 0) WHEN 4 THEN 4 ELSE 1 END AS vw,
           CASE WHEN octet_length(s.vals) > 0 AND get_byte(s.vals, 0) = 2 THEN 1 ELSE 0 END AS h,
           CASE WHEN octet_length(s.vals) > 0 AND get_byte(s.vals, 0) = 2 THEN 2 ELSE 1 END AS lw
      FROM sel s CROSS JOIN ch
      CROSS JOIN LATERAL (SELECT array_position(cs.channels, ch.num) AS p,
                                 cardinality(cs.channels) AS n
                            FROM @S.checkpoint_channel_sets cs
                           WHERE cs.num = s.channel_set) p
     WHERE p.p IS NOT NULL),
-- over the row's channels: the versions' and values' lengths before p and in
-- all, the last channel at or before p whose version is written out (q)
agg AS MATERIALIZED (
    SELECT o.*, a.total, a.pre, a.q, a.lens, a.vtotal, a.vpre, a.vlen,
           CASE WHEN o.vals IS NULL THEN 0
                ELSE (get_byte(o.vals, o.h + 4 * o.p - 4) << 24)
                     | (get_byte(o.vals, o.h + 4 * o.p - 3) << 16)
                     | (get_byte(o.vals, o.h + 4 * o.p - 2) << 8)
                     | get_byte(o.vals, o.h + 4 * o.p - 1) END AS t
      FROM pos o
      CROSS JOIN LATERAL (
          SELECT sum(l.len) AS total,
                 coalesce(sum(l.len) FILTER (WHERE l.i < o.p), 0)::int AS pre,
                 max(l.i) FILTER (WHERE l.i <= o.p AND NOT l.same) AS q,
                 array_agg(l.len ORDER BY l.i) AS lens,
                 sum(l.vlen) AS vtotal,
                 coalesce(sum(l.vlen) FILTER (WHERE l.i < o.p), 0)::int AS vpre,
                 max(l.vlen) FILTER (WHERE l.i = o.p) AS vlen
            FROM (SELECT g.i,
                         o.w = 2 AND get_byte(o.versions, g.i) = 255 AS same,
                         CASE WHEN o.w = 2 AND get_byte(o.versions, g.i) = 255 THEN 0
                              WHEN o.w <> 4 THEN get_byte(o.versions, g.i)
                              ELSE (get_byte(o.versions, 4 * g.i - 3) << 24)
                                   | (get_byte(o.versions, 4 * g.i - 2) << 16)
                                   | (get_byte(o.versions, 4 * g.i - 1) << 8)
                                   | get_byte(o.versions, 4 * g.i) END AS len,
                         CASE WHEN o.vals IS NULL THEN 0
                              WHEN o.lw = 1 THEN get_byte(o.vals, 4 * o.n + g.i - 1)
                              ELSE (get_byte(o.vals, 1 + 4 * o.n + 2 * g.i - 2) << 8)
                                   | get_byte(o.vals, 1 + 4 * o.n + 2 * g.i - 1) END AS vlen
                    FROM generate_series(1, o.n) AS g(i)) l) a),
-- the version (a repeated one: the bytes of q's) and the value, as
-- channel_vals() reads them
one AS MATERIALIZED (  -- (each expression once, not again in the joins below)
    SELECT g.r, g.tid, g.checkpoint_ns, g.chn,
           CASE WHEN g.w IN (1, 2, 4) AND 1 + g.vw * g.n + g.total = octet_length(g.versions)
                     AND g.q IS NOT NULL
                THEN substring(g.versions
                               FROM 1 + g.vw * g.n + g.pre
                                    - CASE WHEN g.q < g.p THEN g.lens[g.q] ELSE 0 END + 1
                               FOR g.lens[g.q])
                ELSE int4send(get_byte(g.versions, -1)) END AS ver,
           -- the type is always read (the value only when it is not NULL): it
           -- carries the row's check
           CASE WHEN g.vals IS NULL THEN NULL
                WHEN g.h + (4 + g.lw) * g.n + g.vtotal <> octet_length(g.vals) OR g.t < 0
                     OR (g.t = 0 AND g.vlen <> 0)
                THEN get_byte(g.vals, -1)
                WHEN g.t = 0 THEN NULL ELSE g.t END AS type,
           CASE WHEN g.vals IS NULL THEN NULL
                WHEN g.h + (4 + g.lw) * g.n + g.vtotal <> octet_length(g.vals) OR g.t < 0
                     OR (g.t = 0 AND g.vlen <> 0)
                THEN int4send(get_byte(g.vals, -1))
                WHEN g.t = 0 THEN NULL
                ELSE substring(g.vals FROM g.h + (4 + g.lw) * g.n + g.vpre + 1 FOR g.vlen) END
               AS value
      FROM agg g),
-- the channel's write elements (an element of another channel, by its
-- channel bytes: v39 bytes 6-7 of the short form, 14-17 of the long one, v30's
-- form 13-16, is not decoded; a short, empty, NULL or unknown one is: it may
-- have been of this channel, and the checks below say it is corrupt), then
-- write_fields()'s reading of the three forms (migrate-39.sql) written out:
-- write_fields() in FROM is not inlined, and its SQL-function call per
-- element was most of the statement's time (0.26 ms each, 100 of them); each
-- level MATERIALIZED so that the planner does not copy one level's
-- expressions into the next (a plan of this statement took 2.9 ms warm, 2.2
-- with them)
we AS MATERIALIZED (
    SELECT s.r, e, CASE WHEN octet_length(e) > 0 THEN get_byte(e, 0) END AS b
      FROM sel s CROSS JOIN ch CROSS JOIN LATERAL unnest(s.writes) AS e
     WHERE e IS NULL
        OR CASE WHEN octet_length(e) = 0 THEN true
                WHEN get_byte(e, 0) = 1
                THEN octet_length(e) < 10 OR substring(e FROM 6 FOR 2) = substring(int4send(ch.num) FROM 3)
                WHEN get_byte(e, 0) = 2
                THEN octet_length(e) < 25 OR substring(e FROM 14 FOR 4) = int4send(ch.num)
                WHEN get_byte(e, 0) IN (0, 255)
                THEN octet_length(e) < 24 OR substring(e FROM 13 FOR 4) = int4send(ch.num)
                ELSE true END),
wx AS MATERIALIZED (
    SELECT f.r, f.e, f.b = 1 AS s, CASE WHEN f.b = 2 THEN 1 ELSE 0 END AS o,
           CASE f.b WHEN 1 THEN 10 WHEN 2 THEN 25 ELSE 24 END AS h,
           f.b IN (0, 1, 2, 255)
           AND octet_length(f.e) >= CASE f.b WHEN 1 THEN 10 WHEN 2 THEN 25 ELSE 24 END AS ok,
           CASE WHEN f.b = 1 AND octet_length(f.e) >= 10 THEN get_byte(f.e, 9)
                WHEN f.b = 1 THEN -1
                ELSE ('x' || encode(substring(f.e FROM CASE WHEN f.b = 2 THEN 22 ELSE 21 END
                                              FOR 4), 'hex'))::bit(32)::integer END AS len
      FROM we f),
wy AS MATERIALIZED (
    SELECT x.r, x.e, x.s, x.o, x.h,
           CASE WHEN x.ok AND x.len >= 0 AND x.h + x.len <= octet_length(x.e)
                THEN x.len ELSE get_byte(coalesce(x.e, '\x'::bytea), -1) END AS tlen
      FROM wx x),
w AS (
    SELECT y.r,
           CASE WHEN y.s THEN ((get_byte(y.e, 1) << 8) | get_byte(y.e, 2))
                              - CASE WHEN get_byte(y.e, 1) >= 128 THEN 65536 ELSE 0 END
                ELSE ('x' || encode(substring(y.e FROM y.o + 1 FOR 8), 'hex'))::bit(64)::bigint
           END AS idx,
           CASE WHEN y.s THEN (get_byte(y.e, 3) << 8) | get_byte(y.e, 4)
                ELSE ('x' || encode(substring(y.e FROM y.o + 9 FOR 4), 'hex'))::bit(32)::integer
           END AS task_path,
           CASE WHEN y.s THEN (get_byte(y.e, 7) << 8) | get_byte(y.e, 8)
                ELSE ('x' || encode(substring(y.e FROM y.o + 17 FOR 4), 'hex'))::bit(32)::integer
           END AS type,
           substring(y.e FROM y.h + 1 FOR y.tlen) AS task_id,
           substring(y.e FROM y.h + 1 + y.tlen) AS value
      FROM wy y)
SELECT 0 AS kind, s.r, s.thread_id, s.checkpoint_ns, @S.id_text(s.checkpoint_id),
       @S.id_text(s.parent_id), '{}', NULL::text, s.log_length, s.created_at, NULL, NULL::bytea
  FROM sel s
UNION ALL
SELECT 1, u.r, NULL, NULL, NULL, $8::text, @S.ver_text(u.ver), NULL, NULL, NULL,
       (SELECT n.name FROM @S.checkpoint_names n WHERE n.num = coalesce(u.type, v.type)),
       CASE WHEN u.type IS NULL THEN v.value ELSE u.value END
  FROM one u
  -- a value not in the row by the blobs' primary key (checkpoint_list.sql)
  LEFT JOIN LATERAL (SELECT b.type, b.value FROM @S.checkpoint_blobs b
                      WHERE u.type IS NULL AND b.tid = u.tid
                        AND b.checkpoint_ns = u.checkpoint_ns
                        AND b.channel = u.chn AND b.version = u.ver LIMIT 1) v ON true
UNION ALL
SELECT 2, w.r, NULL, NULL, NULL, @S.id_text(w.task_id),
       (SELECT n.name FROM @S.checkpoint_names n WHERE n.num = w.task_path),
       $8::text, w.idx, NULL,
       (SELECT n.name FROM @S.checkpoint_names n WHERE n.num = w.type), w.value
  FROM w
UNION ALL
SELECT 9, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL
  FROM bp WHERE $3::text IS NOT NULL AND bp.p IS NULL
ORDER BY 2, 1
