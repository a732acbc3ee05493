-- every index row of thread ?1 (it is being removed)
DELETE FROM convo_thread_index WHERE thread = ?1;
