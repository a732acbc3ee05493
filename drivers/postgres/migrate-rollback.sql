-- migrate-rollback.sql: undoes the migrations' transaction when one of them failed:
-- the schema stays at the version it had.
ROLLBACK
