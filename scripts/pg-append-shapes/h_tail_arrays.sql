-- (h) the message kept in the thread row, in a tail of three arrays (body, role, time)
-- moved into messages by a later statement (no INSERT here); for the count the tail
-- starts again at 7 (a real append would send a full tail to the flush). Mode 5;
-- PG_COST_SETUP=setup_tail_arrays.sql
UPDATE @S.threads t SET length = t.length + 1, updated_at = $4::timestamptz,
    listed_at = $5::timestamptz, preview_seq = t.length, preview_gen = t.generation,
    preview = $2::bytea,
    buf_body = CASE WHEN cardinality(t.buf_body) >= 7 THEN ARRAY[$2::bytea] ELSE t.buf_body || $2::bytea END,
    buf_role = CASE WHEN cardinality(t.buf_role) >= 7 THEN ARRAY[$3::text] ELSE t.buf_role || $3::text END,
    buf_at = CASE WHEN cardinality(t.buf_at) >= 7 THEN ARRAY[$4::timestamptz] ELSE t.buf_at || $4::timestamptz END
 WHERE t.thread_id = $1::text AND t.expires_at IS NULL
RETURNING t.length - 1
