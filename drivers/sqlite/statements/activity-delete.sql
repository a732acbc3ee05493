-- thread ?1 (id), active as of ?2, is being removed
DELETE FROM convo_activity WHERE updated_at = ?2 AND id = ?1;
