-- (d) INSERT ... VALUES, tid 1 written in, the seq a scalar subquery (burst only)
INSERT INTO @S.messages (tid, seq, created_at, role, body)
VALUES (1, coalesce((SELECT m.seq FROM @S.messages m WHERE m.tid = 1
                   ORDER BY m.seq DESC LIMIT 1), -1) + 1,
        $4::timestamptz, $3::text, $2::bytea)
RETURNING seq, $1::text, $5::timestamptz
