-- append_many_if.sql: append_many.sql with an expected length above 0: an
-- update, as a missing thread has length 0.
WITH alloc AS (
    UPDATE @S.threads t SET length = t.length + cardinality($2::bytea[]),
        updated_at = $4::timestamptz, expires_at = now() + $6::interval
     WHERE t.thread_id = $1::text AND t.length = $5::int8
       AND (t.expires_at IS NULL OR t.expires_at > now())
    RETURNING t.length - cardinality($2::bytea[]) AS first_seq),
ins AS (
    INSERT INTO @S.messages (thread_id, seq, role, created_at, body)
    SELECT $1::text, a.first_seq + u.o - 1, u.r, $4::timestamptz, u.b
      FROM alloc a, unnest($2::bytea[], $3::text[]) WITH ORDINALITY AS u(b, r, o))
SELECT first_seq FROM alloc
