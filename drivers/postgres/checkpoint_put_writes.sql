-- checkpoint_put_writes.sql: a task's pending writes ($6 idx, $7 channels,
-- $8 types, $9 values) to checkpoint ($1, $2, $3).
SELECT @S.checkpoint_put_writes($1::text, $2::text, $3::text, $4::text, $5::text,
       $6::int8[], $7::text[], $8::text[], $9::bytea[], $10::interval)
