-- thread_import.sql: restores messages from a dump, from seq $2 with their
-- own times ($5), of a thread at generation $6; true when they were imported
-- before (skipped).
SELECT @S.thread_import($1::text, $2::int8, $3::bytea[], $4::text[], $5::timestamptz[],
       $6::int8, $7::interval)
