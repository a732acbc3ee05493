-- (b) (a) without the thread lookup: tid 1 (thread-0) written in (burst only)
INSERT INTO @S.messages (tid, seq, created_at, role, body)
SELECT 1, coalesce((SELECT m.seq FROM @S.messages m WHERE m.tid = 1
                        ORDER BY m.seq DESC LIMIT 1), -1) + 1,
       $4::timestamptz, $3::text, $2::bytea
 WHERE $1::text IS NOT NULL AND $5::timestamptz IS NOT NULL
RETURNING seq
