-- (c) INSERT ... VALUES, tid and seq as scalar subqueries (the thread is looked up twice)
INSERT INTO @S.messages (tid, seq, created_at, role, body)
VALUES ((SELECT t.tid FROM @S.threads t WHERE t.thread_id = $1::text AND t.expires_at IS NULL),
        coalesce((SELECT m.seq FROM @S.messages m
                   WHERE m.tid = (SELECT t.tid FROM @S.threads t WHERE t.thread_id = $1::text)
                   ORDER BY m.seq DESC LIMIT 1), -1) + 1,
        $4::timestamptz, $3::text, $2::bytea)
RETURNING seq, $5::timestamptz
