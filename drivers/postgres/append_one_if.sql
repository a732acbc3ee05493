-- append_one_if.sql: append_one.sql with an expected length or generation
-- above 0: an update, as a missing thread has length 0 and generation 0.
WITH alloc AS (
    UPDATE @S.threads t SET length = t.length + 1, updated_at = $4::timestamptz,
        expires_at = now() + $6::interval
     WHERE t.thread_id = $1::text AND ($5::int8 < 0 OR t.length = $5::int8)
       AND ($7::int8 < 0 OR t.generation = $7::int8)
       AND (t.expires_at IS NULL OR t.expires_at > now())
    RETURNING t.tid, t.length - 1 AS first_seq)
INSERT INTO @S.messages (tid, seq, created_at, role, body)
SELECT a.tid, a.first_seq, $4::timestamptz, $3::text, $2::bytea FROM alloc a
RETURNING seq
