-- 1 when the thread written last (the open entry of convo_activity) holds
-- value ?2 (canonical JSON) at indexed key ?1: a seek to the end of
-- convo_activity, then one in convo_key_threads (CROSS JOIN: in that order),
-- so that a listing by a key's value runs list-key-open.sql only for a
-- thread it lists
SELECT 1 FROM convo_activity AS i CROSS JOIN convo_key_threads AS k
  WHERE i.updated_at = 9223372036854775807 AND k.key = ?1 AND k.value = ?2
    AND k.created_at = i.created_at AND k.id = i.id;
