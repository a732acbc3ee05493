-- thread ?1 (id), at ?2 in the activity order, goes to ?3 with ?4 messages:
-- a thread written becomes the open entry (?3 the open time), the one open
-- before gets its own time (?2 the open time). No row when the entry is not
-- where it should be: activity-forget.sql repairs
UPDATE convo_activity SET updated_at = ?3, length = ?4 WHERE updated_at = ?2 AND id = ?1;
