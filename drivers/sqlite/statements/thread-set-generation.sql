-- ?1 thread number, ?2 its new generation, ?3 the new deadline (NULL: never),
-- ?4 the time of this write (updated_at, growing as in thread-touch.sql): a
-- rewrite, or an import into a thread without messages
UPDATE convo_threads SET generation = ?2, expires_at = ?3, updated_at = max(?4, updated_at + 1)
  WHERE num = ?1;
