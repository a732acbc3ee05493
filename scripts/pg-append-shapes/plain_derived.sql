-- append_plain.sql as the full path of a hinted design would run it (once a second,
-- and every append at human pace): the seq after the live messages at or above
-- threads.length (appended by hinted inserts since the row was written), refused
-- (no row: the function) when a rewrite's tombstones reach it (fenced_to; setup
-- setup_fenced_to.sql) (mode 5)
WITH alloc AS (
    UPDATE @S.threads t SET length = d.len + 1, updated_at = $4::timestamptz,
        listed_at = $5::timestamptz, preview_seq = d.len,
        preview_gen = t.generation, preview = $2::bytea
      FROM (SELECT u.tid, coalesce((SELECT m.seq + 1 FROM @S.messages m
                     WHERE m.tid = u.tid AND m.seq >= u.length
                     ORDER BY m.seq DESC LIMIT 1), u.length) AS len
              FROM @S.threads u WHERE u.thread_id = $1::text) d
     WHERE t.thread_id = $1::text AND t.tid = d.tid AND t.expires_at IS NULL
       AND (t.fenced_to IS NULL OR t.fenced_to < d.len)
    RETURNING t.tid, d.len AS first_seq)
INSERT INTO @S.messages (tid, seq, created_at, role, body)
SELECT a.tid, a.first_seq, $4::timestamptz, $3::text, $2::bytea FROM alloc a
RETURNING seq
