-- plain_derived.sql with the probe in the SET list (twice: length and preview_seq)
-- instead of a joined subquery (mode 5; setup setup_fenced_to.sql)
WITH alloc AS (
    UPDATE @S.threads t SET length = coalesce((SELECT m.seq + 1 FROM @S.messages m
            WHERE m.tid = t.tid AND m.seq >= t.length ORDER BY m.seq DESC LIMIT 1),
            t.length) + 1, updated_at = $4::timestamptz,
        listed_at = $5::timestamptz, preview_seq = coalesce((SELECT m.seq + 1
            FROM @S.messages m WHERE m.tid = t.tid AND m.seq >= t.length
            ORDER BY m.seq DESC LIMIT 1), t.length),
        preview_gen = t.generation, preview = $2::bytea
     WHERE t.thread_id = $1::text AND t.expires_at IS NULL
       AND (t.fenced_to IS NULL OR t.fenced_to < t.length)
    RETURNING t.tid, t.length - 1 AS first_seq)
INSERT INTO @S.messages (tid, seq, created_at, role, body)
SELECT a.tid, a.first_seq, $4::timestamptz, $3::text, $2::bytea FROM alloc a
RETURNING seq
