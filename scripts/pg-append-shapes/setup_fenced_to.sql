-- PG_COST_SETUP for plain_derived.sql: the thread row's highest tombstone seq
ALTER TABLE @S.threads ADD COLUMN fenced_to bigint;
