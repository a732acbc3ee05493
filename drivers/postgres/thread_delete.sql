-- thread_delete.sql: a thread and all it holds; false when there was none.
SELECT @S.thread_delete($1::text)
