-- thread ?1 (id), active as of ?2, is being removed: its entry is at that
-- time, or at ?3, the open time, when it was the thread written last
DELETE FROM convo_activity WHERE updated_at IN (?2, ?3) AND id = ?1;
