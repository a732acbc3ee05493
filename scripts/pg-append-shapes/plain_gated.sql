-- append_plain.sql with the probe of the messages past threads.length gated by the
-- row's mark (clear: no probe; the count of an append at human pace under the gated
-- design). Mode 5; PG_COST_SETUP=setup_hinted.sql
WITH alloc AS (
    UPDATE @S.threads t SET length = CASE WHEN t.hinted THEN coalesce((SELECT m.seq + 1
            FROM @S.messages m WHERE m.tid = t.tid AND m.seq >= t.length
            ORDER BY m.seq DESC LIMIT 1), t.length) ELSE t.length END + 1,
        updated_at = $4::timestamptz, listed_at = $5::timestamptz,
        preview_seq = CASE WHEN t.hinted THEN coalesce((SELECT m.seq + 1
            FROM @S.messages m WHERE m.tid = t.tid AND m.seq >= t.length
            ORDER BY m.seq DESC LIMIT 1), t.length) ELSE t.length END,
        preview_gen = t.generation, preview = $2::bytea, hinted = false
     WHERE t.thread_id = $1::text AND t.expires_at IS NULL
    RETURNING t.tid, t.length - 1 AS first_seq)
INSERT INTO @S.messages (tid, seq, created_at, role, body)
SELECT a.tid, a.first_seq, $4::timestamptz, $3::text, $2::bytea FROM alloc a
RETURNING seq
