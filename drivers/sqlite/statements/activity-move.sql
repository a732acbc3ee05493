-- thread ?1 (id), active as of ?2, is active as of ?3 with ?4 messages: its
-- entry moves (no row when the entry is not where it should be:
-- activity-forget.sql repairs)
UPDATE convo_activity SET updated_at = ?3, length = ?4 WHERE updated_at = ?2 AND id = ?1;
