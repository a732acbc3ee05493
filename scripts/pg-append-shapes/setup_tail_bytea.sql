-- PG_COST_SETUP for i_tail_bytea*.sql: the row's tail as one bytea of records
ALTER TABLE @S.threads ADD COLUMN tail bytea;
