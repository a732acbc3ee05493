-- checkpoint_seal.sql: checkpoint_seal() (migrate-42.sql): $1 tid, $2
-- namespace, $3 the rows' ids and $4 their xmins, then per segment $5 first
-- and $6 last put_seq, $7 greatest log length, $8 first and $9 last id, $10
-- the packed columns (lib/segment).
SELECT @S.checkpoint_seal($1::int8, $2::text, $3::bytea[], $4::text[], $5::int8[], $6::int8[],
       $7::int8[], $8::bytea[], $9::bytea[], $10::bytea[])
