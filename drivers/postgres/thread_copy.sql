-- thread_copy.sql: thread_fork.sql with the checkpoints (schema version 13).
SELECT @S.thread_copy($1::text, $2::text, $3::int8, $4::int8, $5::timestamptz, $6::interval)
