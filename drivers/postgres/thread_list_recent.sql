-- thread_list_recent.sql: a page of the thread index in activity order,
-- newest first (v17), without a where (@K NULL) or on a declared key (@K its
-- quoted literal) whose threads_by_key_n serves a scalar value of the where;
-- the parameters as in thread_list_all.sql. The indexes order threads by
-- listed_at, which trails updated_at by less than listed_window() (see
-- migrate-17.sql), so: the first $3 threads past the cursor in listed_at
-- order (f) have updated_at >= the last one's listed_at, and so have the
-- page's threads, whose listed_at is then above it less one window. The page
-- is those threads sorted by updated_at: the index read from the cursor to
-- one window past f. Each thread's extra and last message are read for the
-- page's rows only (the outer query), from the row's copies where it keeps
-- them (v20, as in thread_list_all.sql).
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
           AND (t.updated_at, t.thread_id) < ($2::timestamptz, $1::text)
           AND (t.expires_at IS NULL OR t.expires_at > now())
           AND t.thread_id NOT LIKE '.convo-import-%'
           AND (@K::text IS NULL OR $7::bool OR EXISTS (
                SELECT 1 FROM @S.thread_extra x
                 WHERE x.tid = t.tid AND x.extra @> $6::text::jsonb))
         ORDER BY t.updated_at DESC, t.thread_id DESC
         LIMIT $3::int8) p
 ORDER BY p.updated_at DESC, p.thread_id DESC
