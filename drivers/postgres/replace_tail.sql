-- replace_tail.sql: the tail rewrite ($1 thread, $2 keep, $3 bodies, $4 roles,
-- $5 created_at, $6 idempotency key or NULL, $7 expected length and $8
-- expected generation, below 0: any, $9 drop the checkpoints past keep, $10
-- ttl): what it stored, or what the key's call stored.
SELECT first_seq, count, removed, generation, replayed
  FROM @S.replace_tail($1::text, $2::int8, $3::bytea[], $4::text[], $5::timestamptz,
       $6::text, $7::int8, $8::int8, $9::bool, $10::interval)
