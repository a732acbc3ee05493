-- session.sql: run on every new connection. Every statement is its own
-- transaction, written for READ COMMITTED: a row lock, then statements (or a
-- re-check) that see what the lock waited for. A stricter default (a role's or
-- the server's) would only make calls fail with serialization errors under
-- contention.
SET default_transaction_isolation TO 'read committed'
