-- ?1 thread number, ?2 idempotency key
SELECT first_seq, count FROM convo_idempotency WHERE thread = ?1 AND key = ?2;
