-- (a) the message's INSERT ... SELECT from the thread row found by its id, the seq
-- the last entry of messages_pkey + 1; no row written, no lock (mode 5)
INSERT INTO @S.messages (tid, seq, created_at, role, body)
SELECT t.tid, coalesce((SELECT m.seq FROM @S.messages m WHERE m.tid = t.tid
                        ORDER BY m.seq DESC LIMIT 1), -1) + 1,
       $4::timestamptz, $3::text, $2::bytea
  FROM @S.threads t WHERE t.thread_id = $1::text AND t.expires_at IS NULL AND $5::timestamptz IS NOT NULL
RETURNING seq
