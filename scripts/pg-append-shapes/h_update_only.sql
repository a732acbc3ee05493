-- (h) append_plain.sql's UPDATE alone, no message stored: the floor of any shape that
-- keeps the message in the thread row (mode 5)
UPDATE @S.threads t SET length = t.length + 1, updated_at = $4::timestamptz,
    listed_at = $5::timestamptz, preview_seq = t.length, preview_gen = t.generation,
    preview = $2::bytea
 WHERE t.thread_id = $1::text AND t.expires_at IS NULL AND $3::text IS NOT NULL
RETURNING t.length - 1
