-- (e) INSERT ... SELECT of values, no read (the seq from the clock: unique)
INSERT INTO @S.messages (tid, seq, created_at, role, body)
SELECT 1, (extract(epoch from clock_timestamp()) * 1000000)::int8, $4::timestamptz, $3::text, $2::bytea
 WHERE $1::text IS NOT NULL AND $5::timestamptz IS NOT NULL
RETURNING seq
