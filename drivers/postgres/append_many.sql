-- append_many.sql: append_one.sql for a batch ($2 bodies, $3 roles, as
-- arrays); the first seq back. (v20) The batch's last message is the preview.
-- listed_at: $8, the write's second, as in append_one.sql.
WITH alloc AS (
    UPDATE @S.threads t SET length = t.length + cardinality($2::bytea[]),
        updated_at = $4::timestamptz, listed_at = $8::timestamptz,
        expires_at = now() + $6::interval,
        preview_seq = t.length + cardinality($2::bytea[]) - 1, preview_gen = t.generation,
        preview = @S.appended_preview(($2::bytea[])[cardinality($2::bytea[])])
     WHERE t.thread_id = $1::text AND ($5::int8 < 0 OR t.length = $5::int8)
       AND ($7::int8 < 0 OR t.generation = $7::int8)
       AND (t.expires_at IS NULL OR t.expires_at > now())
    RETURNING t.tid, t.length - cardinality($2::bytea[]) AS first_seq),
ins AS (
    INSERT INTO @S.messages (tid, seq, created_at, role, body)
    SELECT a.tid, a.first_seq + u.o - 1, $4::timestamptz, u.r, u.b
      FROM alloc a, unnest($2::bytea[], $3::text[]) WITH ORDINALITY AS u(b, r, o))
SELECT first_seq FROM alloc
