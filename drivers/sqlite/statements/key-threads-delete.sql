-- thread ?4 (id, created ?3) no longer has value ?2 at indexed key ?1
DELETE FROM convo_key_threads WHERE key = ?1 AND value = ?2 AND created_at = ?3 AND id = ?4;
