-- (f) INSERT ... VALUES ($tid, $hint + 1): reads nothing (mode 6)
INSERT INTO @S.messages (tid, seq, created_at, role, body)
VALUES ($1::int8, $6::int8 + 1, $4::timestamptz, $3::text, $2::bytea)
RETURNING seq, $5::timestamptz
