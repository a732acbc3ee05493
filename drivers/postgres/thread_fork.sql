-- thread_fork.sql: copies thread $1's first $3 messages (below 0: all) and its
-- extra to a new thread $2, which takes $1's generation and is created at $5;
-- $4 the generation $1 must be at (below 0: any).
SELECT @S.thread_fork($1::text, $2::text, $3::int8, $4::int8, $5::timestamptz, $6::interval)
