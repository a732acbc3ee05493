-- save_extra.sql: merges a patch into a thread's extra ($3 the limit in bytes,
-- $4 the write's time, $5 the store's ttl).
SELECT @S.save_extra($1::text, $2::text::jsonb, $3::int8, $4::timestamptz, $5::interval)
