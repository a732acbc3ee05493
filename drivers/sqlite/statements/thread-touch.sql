-- a write to thread ?1 at ?2 (now): updated_at moves to it, or one
-- microsecond past the last write should the clock have stepped back, so it
-- grows with every write; its deadline becomes ?3 (NULL: never). The trigger
-- convo_thread_index_activity moves its index rows along.
UPDATE convo_threads SET updated_at = max(?2, updated_at + 1), expires_at = ?3 WHERE num = ?1;
