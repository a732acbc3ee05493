-- (i) without the preview copy (a page would take the tail's last record). Mode 5;
-- PG_COST_SETUP=setup_tail_bytea.sql
UPDATE @S.threads t SET length = t.length + 1, updated_at = $4::timestamptz,
    listed_at = $5::timestamptz,
    tail = CASE WHEN octet_length(t.tail) > 1400 THEN $2::bytea ELSE t.tail || $2::bytea END
 WHERE t.thread_id = $1::text AND t.expires_at IS NULL AND $3::text IS NOT NULL
RETURNING t.length - 1
