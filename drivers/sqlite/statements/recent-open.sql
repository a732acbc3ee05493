-- the open row (time ?3, the open time) of key ?1 and value ?2 in the key's
-- activity order, if any: the thread of that value written last; one seek
SELECT thread, id FROM convo_thread_recent WHERE key = ?1 AND value = ?2 AND updated_at = ?3;
