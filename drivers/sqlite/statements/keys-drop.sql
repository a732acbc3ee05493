-- thread ?1's indexed extra key ?2 no longer holds a value the index keeps
DELETE FROM convo_thread_keys WHERE thread = ?1 AND key = ?2;
