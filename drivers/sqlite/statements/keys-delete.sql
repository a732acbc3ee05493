-- every indexed key row of thread ?1 (it is being removed)
DELETE FROM convo_thread_keys WHERE thread = ?1;
