-- thread_list_recent.sql with each candidate's length, updated_at and preview taken
-- from its live messages at or above threads.length (a probe a row, before the sort)
SELECT p.thread_id, p.created_at, p.updated_at, p.length,
       CASE WHEN $4::bool THEN coalesce(p.extra_text, (SELECT x.extra::text
                                                          FROM @S.thread_extra x
                                                         WHERE x.tid = p.tid), '{}') END,
       CASE WHEN $5::bool AND p.length > 0 THEN coalesce(
            CASE WHEN p.preview_seq = p.length - 1 AND p.preview_gen = p.generation
                 THEN p.preview END,
            (SELECT m.body FROM @S.messages m WHERE m.tid = p.tid AND m.seq = p.length - 1)) END
  FROM (SELECT t.thread_id, t.created_at, greatest(t.updated_at, z.created_at) AS updated_at,
               coalesce(z.seq + 1, t.length) AS length, t.tid, t.generation,
               coalesce(z.seq, t.preview_seq) AS preview_seq, t.preview_gen,
               coalesce(z.body, t.preview) AS preview, t.extra_text
          FROM @S.threads t LEFT JOIN LATERAL (
               SELECT m.seq, m.created_at, m.body FROM @S.messages m
                WHERE m.tid = t.tid AND m.seq >= t.length AND m.role <> ''
                ORDER BY m.seq DESC LIMIT 1) z ON true
         WHERE (@K::text IS NULL OR (t.keyvals -> @K::text) = ($6::text::jsonb -> @K::text))
           AND t.listed_at <= $2::timestamptz
           AND t.listed_at > coalesce((
                   SELECT min(f.listed_at) - @S.listed_window()
                     FROM (SELECT t.listed_at FROM @S.threads t
                            WHERE (@K::text IS NULL
                                   OR (t.keyvals -> @K::text) = ($6::text::jsonb -> @K::text))
                              AND t.listed_at <= $2::timestamptz
                              AND (t.updated_at, t.thread_id) < ($2::timestamptz, $1::text)
                              AND (t.expires_at IS NULL OR t.expires_at > now())
                              AND t.thread_id NOT LIKE '.convo-import-%'
                              AND (@K::text IS NULL OR $7::bool OR EXISTS (
                                   SELECT 1 FROM @S.thread_extra x
                                    WHERE x.tid = t.tid AND x.extra @> $6::text::jsonb))
                            ORDER BY t.listed_at DESC, t.thread_id DESC
                            LIMIT $3::int8) f
                   HAVING count(*) = $3::int8), '-infinity')
           AND (greatest(t.updated_at, z.created_at), t.thread_id) < ($2::timestamptz, $1::text)
           AND (t.expires_at IS NULL OR t.expires_at > now())
           AND t.thread_id NOT LIKE '.convo-import-%'
           AND (@K::text IS NULL OR $7::bool OR EXISTS (
                SELECT 1 FROM @S.thread_extra x
                 WHERE x.tid = t.tid AND x.extra @> $6::text::jsonb))
         ORDER BY 3 DESC, t.thread_id DESC
         LIMIT $3::int8) p
 ORDER BY p.updated_at DESC, p.thread_id DESC
