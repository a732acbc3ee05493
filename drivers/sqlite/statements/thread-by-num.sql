-- thread ?1's id and the time of the last write that rewrote its row
SELECT id, updated_at FROM convo_threads WHERE num = ?1;
