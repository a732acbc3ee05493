-- where checkpoint (?1 thread number, ?2 ns, ?3 id) stands; the id's first 8
-- bytes (16-byte ids) or its text find it in convo_checkpoints_by_id
SELECT key, created_at, put_order FROM convo_checkpoints
  WHERE thread = ?1
    AND CASE WHEN typeof(id) = 'blob' THEN substr(id, 1, 8) ELSE id END
        = CASE WHEN typeof(?3) = 'blob' THEN substr(?3, 1, 8) ELSE ?3 END
    AND ns = ?2 AND id = ?3;
