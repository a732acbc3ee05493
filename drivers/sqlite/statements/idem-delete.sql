-- ?1 thread number
DELETE FROM convo_idempotency WHERE thread = ?1;
