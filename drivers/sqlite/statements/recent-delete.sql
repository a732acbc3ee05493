-- the row of key ?1 and value ?2 of thread ?4 (id), active as of ?3, in the
-- key's activity order goes: at that time, or at ?5, the open time, when the
-- thread was the value's last written
DELETE FROM convo_key_recent
  WHERE key = ?1 AND value = ?2 AND updated_at IN (?3, ?5) AND id = ?4;
