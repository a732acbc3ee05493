-- where checkpoint (?1 thread number, ?2 ns, ?3 id) stands; bytes 5-8 of a
-- 16-byte id (or a text id) and the thread's key range find it in
-- convo_checkpoints_by_id
SELECT key, created_at, put_order FROM convo_checkpoints
  WHERE key BETWEEN ?1 << 32 AND (?1 << 32) + 4294967295
    AND CASE WHEN typeof(id) = 'blob' THEN substr(id, 5, 4) ELSE id END
        = CASE WHEN typeof(?3) = 'blob' THEN substr(?3, 5, 4) ELSE ?3 END
    AND ns = ?2 AND id = ?3;
