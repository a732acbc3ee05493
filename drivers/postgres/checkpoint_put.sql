-- checkpoint_put.sql: a checkpoint with its channel values ($9 channels,
-- $10 versions, $11 types, $12 values: NULL type where the version is stored
-- already), then time and ttl.
SELECT @S.checkpoint_put($1::text, $2::text, $3::text, $4::text, $5::text::json, $6::text,
       $7::bytea, $8::int8, $9::text[], $10::text[], $11::text[], $12::bytea[],
       $13::timestamptz, $14::interval),
       -- (v42) the namespace's checkpoint rows before this put (the statement's
       -- snapshot), counted up to 100 (PG_SEAL_COUNT_MAX in pg_int.h): the driver
       -- seals when a full segment is due (segments.c); rows a seal cannot take
       -- (ids out of put order) stop the count there, so a put's cost does not
       -- grow with them
       (SELECT count(*) FROM (SELECT 1 FROM @S.threads t JOIN @S.checkpoints c ON c.tid = t.tid
         WHERE t.thread_id = $1::text AND c.checkpoint_ns = coalesce($2::text, '')
         LIMIT 100) AS n)
