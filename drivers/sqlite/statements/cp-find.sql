-- where checkpoint (?1 thread number, ?2 ns, ?3 id) stands
SELECT key, created_at, put_order FROM convo_checkpoints
  WHERE thread = ?1 AND ns = ?2 AND id = ?3;
