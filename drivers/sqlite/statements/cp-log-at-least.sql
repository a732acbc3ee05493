-- a swapped value of checkpoint (?1 thread number, ?2 ns, ?3 id) refers to
-- messages up to ?4: its log_length protects them from a tail rewrite
UPDATE convo_checkpoints SET log_length = max(log_length, ?4)
  WHERE key BETWEEN ?1 << 32 AND (?1 << 32) + 4294967295
    AND CASE WHEN typeof(id) = 'blob' THEN substr(id, 5, 4) ELSE id END
        = CASE WHEN typeof(?3) = 'blob' THEN substr(?3, 5, 4) ELSE ?3 END
    AND ns = ?2 AND id = ?3;
