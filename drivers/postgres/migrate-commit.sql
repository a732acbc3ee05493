-- migrate-commit.sql: ends the migrations' transaction (migrate-begin.sql) when every
-- migration ran and was recorded; the advisory lock goes with it.
COMMIT
