-- append.sql: the append with an idempotency key ($5), or when the one-statement
-- forms found no row: @S.append() claims the thread (creating it, or starting
-- it afresh when its deadline has passed), checks the key, then the length
-- ($6) and the generation ($7; below 0: any).
SELECT first_seq, count, replayed
  FROM @S.append($1::text, $2::bytea[], $3::text[], $4::timestamptz, $5::text, $6::int8,
       $7::int8, $8::interval)
