-- ?1 thread number
DELETE FROM convo_blobs WHERE thread = ?1;
