-- append_plain.sql refusing (no row: the driver then runs the probing form) a thread
-- whose mark is set: the gate as a statement choice, the mark clear. Mode 5;
-- PG_COST_SETUP=setup_hinted.sql
WITH alloc AS (
    UPDATE @S.threads t SET length = t.length + 1, updated_at = $4::timestamptz,
        listed_at = $5::timestamptz, preview_seq = t.length,
        preview_gen = t.generation, preview = $2::bytea
     WHERE t.thread_id = $1::text AND t.expires_at IS NULL AND NOT t.hinted
    RETURNING t.tid, t.length - 1 AS first_seq)
INSERT INTO @S.messages (tid, seq, created_at, role, body)
SELECT a.tid, a.first_seq, $4::timestamptz, $3::text, $2::bytea FROM alloc a
RETURNING seq
