-- a write to thread ?1: its last write at ?2, its deadline ?3 (NULL: never);
-- the trigger convo_thread_index_activity moves its index rows along
UPDATE convo_threads SET updated_at = ?2, expires_at = ?3 WHERE num = ?1;
