-- expiry_index.sql: run by an opener with a ttl (maint.c) before its first
-- write: makes threads_by_expiry if the store has none yet (migrate-26.sql).
SELECT @S.expiry_index()
