-- thread_fork.sql: copies thread $1's first $3 messages (below 0: all) and its
-- extra to a new thread $2.
SELECT @S.thread_fork($1::text, $2::text, $3::int8, $4::interval)
