-- (g) refusing when the top row at or above the hint is a tombstone or fence (role ''):
-- the seq NULL, so the insert fails (23502) and the call takes the full path (mode 6)
INSERT INTO @S.messages (tid, seq, created_at, role, body)
VALUES ($1::int8, (SELECT CASE WHEN m.role <> '' THEN m.seq + 1 END FROM @S.messages m
                    WHERE m.tid = $1::int8 AND m.seq >= $6::int8
                    ORDER BY m.seq DESC LIMIT 1), $4::timestamptz, $3::text, $2::bytea)
RETURNING seq, $5::timestamptz
