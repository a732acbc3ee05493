-- (g) skipping tombstones (role '') as a rewrite's fences would need (mode 6)
INSERT INTO @S.messages (tid, seq, created_at, role, body)
VALUES ($1::int8, (SELECT m.seq + 1 FROM @S.messages m WHERE m.tid = $1::int8 AND m.seq >= $6::int8
                      AND m.role <> '' ORDER BY m.seq DESC LIMIT 1), $4::timestamptz, $3::text, $2::bytea)
RETURNING seq, $5::timestamptz
