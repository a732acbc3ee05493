-- checkpoint_put_refs.sql: checkpoint_put_log.sql's parameters ($13 bodies
-- and $14 roles empty when no message is fresh), then the swaps ($19 checkpoint
-- ids, $20 task ids or NULL, $21 idx, $22 channels, $23 versions, $24 old
-- types, $25 old values, $26 new types, $27 new values, $28 log lengths); the
-- put and the swaps in one transaction.
SELECT @S.checkpoint_put_refs($1::text, $2::text, $3::text, $4::text, $5::text::json,
       $6::text, $7::bytea, $8::int8, $9::text[], $10::text[], $11::text[], $12::bytea[],
       $13::bytea[], $14::text[], $15::int8, $16::int8, $17::timestamptz, $18::interval,
       $19::text[], $20::text[], $21::int8[], $22::text[], $23::text[], $24::text[],
       $25::bytea[], $26::text[], $27::bytea[], $28::int8[]),
       -- (v42) the namespace's checkpoint rows before this put (the statement's
       -- snapshot), counted up to 100 (PG_SEAL_COUNT_MAX in pg_int.h): the driver
       -- seals when a full segment is due (segments.c); rows a seal cannot take
       -- (ids out of put order) stop the count there, so a put's cost does not
       -- grow with them
       (SELECT count(*) FROM (SELECT 1 FROM @S.threads t JOIN @S.checkpoints c ON c.tid = t.tid
         WHERE t.thread_id = $1::text AND c.checkpoint_ns = coalesce($2::text, '')
         LIMIT 100) AS n)
