-- a swapped value of checkpoint (?1 thread number, ?2 ns, ?3 id) refers to
-- messages up to ?4: its log_length protects them from a tail rewrite
UPDATE convo_checkpoints SET log_length = max(log_length, ?4)
  WHERE thread = ?1 AND ns = ?2 AND id = ?3;
