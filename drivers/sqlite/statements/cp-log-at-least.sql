-- a swapped value of checkpoint (?1 thread number, ?2 ns, ?3 id) refers to
-- messages up to ?4: its log_length protects them from a tail rewrite
UPDATE convo_checkpoints SET log_length = max(log_length, ?4)
  WHERE key = coalesce(
      (SELECT key FROM convo_checkpoints
         WHERE key BETWEEN (SELECT key FROM convo_checkpoints
                            WHERE thread = ?1 AND id <= ?3 AND unordered = 2
                            ORDER BY id DESC LIMIT 1)
                   AND (SELECT key FROM convo_checkpoints
                            WHERE thread = ?1 AND id <= ?3 AND unordered = 2
                            ORDER BY id DESC LIMIT 1) | 15
           AND id = ?3 AND ns = ?2 AND unordered <> 1),
      (SELECT key FROM convo_checkpoints
         WHERE unordered = 1
           AND CASE WHEN typeof(id) = 'blob' THEN substr(id, 5, 4) ELSE id END
               = CASE WHEN typeof(?3) = 'blob' THEN substr(?3, 5, 4) ELSE ?3 END
           AND key BETWEEN ?1 << 32 AND (?1 << 32) + 4294967295 AND id = ?3 AND ns = ?2))
    AND ns = ?2;
