-- unseal_begin.sql: the transaction of a call that met sealed checkpoints
-- (schema 42, segments.c): the unseal and the call again, on one connection,
-- ended by migrate-commit.sql or migrate-rollback.sql.
BEGIN
