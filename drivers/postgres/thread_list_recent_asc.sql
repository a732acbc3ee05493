-- thread_list_recent_asc.sql: thread_list_recent.sql reversed, oldest
-- activity first: a thread past the cursor has listed_at above its time less
-- one window; the first $3 of them in listed_at order (f) have updated_at
-- below the last one's listed_at plus one window, and so have the page's
-- threads, whose listed_at is then below it too.
SELECT p.thread_id, p.created_at, p.updated_at, p.length,
       CASE WHEN $4::bool THEN coalesce(p.extra_text, (SELECT x.extra::text
                                                          FROM @S.thread_extra x
                                                         WHERE x.tid = p.tid), '{}') END,
       CASE WHEN $5::bool AND p.length > 0 THEN coalesce(
            CASE WHEN p.preview_seq = p.length - 1 AND p.preview_gen = p.generation
                 THEN p.preview END,
            (SELECT m.body FROM @S.messages m WHERE m.tid = p.tid AND m.seq = p.length - 1)) END
  FROM (SELECT t.thread_id, t.created_at, t.updated_at, t.length, t.tid, t.generation,
               t.preview_seq, t.preview_gen, t.preview, t.extra_text
          FROM @S.threads t
         WHERE (@K::text IS NULL OR (t.keyvals -> @K::text) = ($6::text::jsonb -> @K::text))
           AND t.listed_at > $2::timestamptz - @S.listed_window()
           AND t.listed_at < coalesce((
                   SELECT max(f.listed_at) + @S.listed_window()
                     FROM (SELECT t.listed_at FROM @S.threads t
                            WHERE (@K::text IS NULL
                                   OR (t.keyvals -> @K::text) = ($6::text::jsonb -> @K::text))
                              AND t.listed_at > $2::timestamptz - @S.listed_window()
                              AND (t.updated_at, t.thread_id) > ($2::timestamptz, $1::text)
                              AND (t.expires_at IS NULL OR t.expires_at > now())
                              AND t.thread_id NOT LIKE '.convo-import-%'
                              AND (@K::text IS NULL OR $7::bool OR EXISTS (
                                   SELECT 1 FROM @S.thread_extra x
                                    WHERE x.tid = t.tid AND x.extra @> $6::text::jsonb))
                            ORDER BY t.listed_at ASC, t.thread_id ASC
                            LIMIT $3::int8) f
                   HAVING count(*) = $3::int8), 'infinity')
           AND (t.updated_at, t.thread_id) > ($2::timestamptz, $1::text)
           AND (t.expires_at IS NULL OR t.expires_at > now())
           AND t.thread_id NOT LIKE '.convo-import-%'
           AND (@K::text IS NULL OR $7::bool OR EXISTS (
                SELECT 1 FROM @S.thread_extra x
                 WHERE x.tid = t.tid AND x.extra @> $6::text::jsonb))
         ORDER BY t.updated_at ASC, t.thread_id ASC
         LIMIT $3::int8) p
 ORDER BY p.updated_at ASC, p.thread_id ASC
