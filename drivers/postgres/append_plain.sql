-- append_plain.sql: append_one.sql for the common call: one message, no
-- expected length or generation, a store without ttl ($1 thread, $2 body,
-- $3 role, $4 created_at, $5 its whole second); its seq back. The same update and insert without
-- the conditions nobody asked for: each qual and SET target is an expression
-- the executor builds on every run (docs/postgres.md "Costs": 158,000
-- instructions against append_one.sql's 172,000). No row back (a missing
-- thread, one with a deadline: its store had a ttl) sends the call to
-- append.sql, which creates it or clears the deadline as append_one.sql
-- would. (v20) The thread row keeps the message as its preview: the driver
-- sends only messages within appended_preview()'s cap here (the others go to
-- append_one.sql), so it is stored without the test (2,700 instructions).
-- listed_at is the write's second, computed by the driver, instead of
-- @S.listed_at()'s CASE (append_one.sql).
WITH alloc AS (
    UPDATE @S.threads t SET length = t.length + 1, updated_at = $4::timestamptz,
        listed_at = $5::timestamptz, preview_seq = t.length,
        preview_gen = t.generation, preview = $2::bytea
     WHERE t.thread_id = $1::text AND t.expires_at IS NULL
    RETURNING t.tid, t.length - 1 AS first_seq)
INSERT INTO @S.messages (tid, seq, created_at, role, body)
SELECT a.tid, a.first_seq, $4::timestamptz, $3::text, $2::bytea FROM alloc a
RETURNING seq
