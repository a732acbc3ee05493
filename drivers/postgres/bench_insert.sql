-- bench_insert.sql: one row into the raw baseline table: what an append costs
-- at the least.
INSERT INTO @S.@T (thread_id, seq, role, created_at, body)
VALUES ($1::text, $2::int8, 'user', now(), $3::bytea)
