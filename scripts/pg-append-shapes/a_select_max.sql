-- (a) with max(seq) (mode 5)
INSERT INTO @S.messages (tid, seq, created_at, role, body)
SELECT t.tid, coalesce((SELECT max(m.seq) FROM @S.messages m WHERE m.tid = t.tid), -1) + 1,
       $4::timestamptz, $3::text, $2::bytea
  FROM @S.threads t WHERE t.thread_id = $1::text AND t.expires_at IS NULL AND $5::timestamptz IS NOT NULL
RETURNING seq
