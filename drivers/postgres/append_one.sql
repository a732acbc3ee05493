-- append_one.sql: appends one message without an idempotency key, in one
-- statement ($1 thread, $2 body, $3 role, $4 created_at, $5 expected length,
-- below 0: any; $6 the store's ttl, NULL: none; $7 expected generation,
-- below 0: any); its seq back.
-- alloc takes the thread's row lock, checks the length and generation
-- (rechecked on the latest row when it had to wait) and the deadline, and
-- allocates the seq: an upsert, which also creates a new thread (at
-- generation 0). No row back (a length or generation mismatch, a thread whose
-- deadline has passed) sends the call to append.sql. A write without ttl
-- clears a deadline: as NULL stays NULL, the update stays HOT.
WITH alloc AS (
    INSERT INTO @S.threads AS t (thread_id, length, created_at, updated_at, expires_at)
    VALUES ($1::text, 1, $4::timestamptz, $4::timestamptz, now() + $6::interval)
    ON CONFLICT (thread_id) DO UPDATE SET length = t.length + 1,
        updated_at = excluded.updated_at, expires_at = excluded.expires_at
     WHERE ($5::int8 < 0 OR t.length = $5::int8)
       AND ($7::int8 < 0 OR t.generation = $7::int8)
       AND (t.expires_at IS NULL OR t.expires_at > now())
    RETURNING t.tid, t.length - 1 AS first_seq)
INSERT INTO @S.messages (tid, seq, created_at, role, body)
SELECT a.tid, a.first_seq, $4::timestamptz, $3::text, $2::bytea FROM alloc a
RETURNING seq
