-- thread_list_all.sql: a page of the thread index without a filter, in
-- creation order. The driver puts in @C the time column (created_at), @D
-- the direction (DESC, or ASC reversed) and @R the cursor's side (< for DESC,
-- > for ASC); the thread_list_*.sql files share the parameters: $1 the
-- cursor's id and $2 its time (no cursor: +infinity for DESC, -infinity for
-- ASC), $3 the rows wanted (limit + 1), $4 with the extra, $5 with the last
-- message, $6 the where object, $7 true when the declared key a shape
-- filters on is all the where holds (each typed by the driver; a file uses
-- those it needs). threads_by_created gives the order: the scan starts at the
-- cursor and stops after $3 rows (the activity order is
-- thread_list_recent.sql's, since v17). Expired and staged
-- (convo import's .convo-import-*) threads are skipped. (v20) The extra and
-- the last message come from the thread row where it keeps them
-- (migrate-20.sql: extra_text, preview), else from thread_extra and messages.
SELECT t.thread_id, t.created_at, t.updated_at, t.length,
       CASE WHEN $4::bool THEN coalesce(t.extra_text, (SELECT x.extra::text
                                                          FROM @S.thread_extra x
                                                         WHERE x.tid = t.tid), '{}') END,
       CASE WHEN $5::bool AND t.length > 0 THEN coalesce(
            CASE WHEN t.preview_seq = t.length - 1 AND t.preview_gen = t.generation
                 THEN t.preview END,
            (SELECT m.body FROM @S.messages m WHERE m.tid = t.tid AND m.seq = t.length - 1)) END
  FROM @S.threads t
 WHERE (t.@C, t.thread_id) @R ($2::timestamptz, $1::text)
   AND (t.expires_at IS NULL OR t.expires_at > now())
   AND t.thread_id NOT LIKE '.convo-import-%'
 ORDER BY t.@C @D, t.thread_id @D
 LIMIT $3::int8
