-- the row of key ?1 and value ?2 of thread ?4 (id), active as of ?3, in the
-- key's activity order goes
DELETE FROM convo_thread_recent
  WHERE key = ?1 AND value = ?2 AND updated_at = ?3 AND id = ?4;
