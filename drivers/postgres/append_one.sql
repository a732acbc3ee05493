-- append_one.sql: appends one message without an idempotency key, in one
-- statement ($1 thread, $2 body, $3 role, $4 created_at, $5 expected length,
-- below 0: any; $6 the store's ttl, NULL: none; $7 expected generation,
-- below 0: any; $8 created_at's whole second); its seq back.
-- alloc takes the thread's row lock, checks the length and generation
-- (rechecked on the latest row when it had to wait) and the deadline, and
-- allocates the seq. No row back (a missing thread, a length or generation
-- mismatch, a thread whose deadline has passed) sends the call to append.sql,
-- which creates or starts afresh. (v17) A plain update: no identity value is
-- drawn as an upsert's proposed row would; while $4 is within the window of
-- the thread's listed_at (migrate-17.sql) no indexed column changes and the
-- update is HOT (no index entry). A write without ttl clears a deadline: as
-- NULL stays NULL, that too leaves the update HOT. (v20) The thread row keeps
-- the message as its preview (migrate-20.sql). listed_at is the
-- write's second ($8), computed by the driver: listed_at <= updated_at <
-- listed_at + listed_window() holds as with @S.listed_at(), whose CASE cost
-- every append 3,000-6,000 instructions; the thread moves in the activity
-- indexes when its appends enter a new second (at most once a second, as
-- before), and the update is HOT while they stay in one.
WITH alloc AS (
    UPDATE @S.threads t SET length = t.length + 1, updated_at = $4::timestamptz,
        listed_at = $8::timestamptz, expires_at = now() + $6::interval,
        preview_seq = t.length, preview_gen = t.generation,
        preview = @S.appended_preview($2::bytea)
     WHERE t.thread_id = $1::text AND ($5::int8 < 0 OR t.length = $5::int8)
       AND ($7::int8 < 0 OR t.generation = $7::int8)
       AND (t.expires_at IS NULL OR t.expires_at > now())
    RETURNING t.tid, t.length - 1 AS first_seq)
INSERT INTO @S.messages (tid, seq, created_at, role, body)
SELECT a.tid, a.first_seq, $4::timestamptz, $3::text, $2::bytea FROM alloc a
RETURNING seq
