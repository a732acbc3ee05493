-- checkpoint (?1 thread number, ?2 ns, ?3 id: bytes 5-8 of a 16-byte id, or a
-- text id, and the thread's key range find it in convo_checkpoints_by_id);
-- the columns are the ones cp_from_row() reads, in its order (tests/sqlite.c
-- checks them)
SELECT c.key, c.ns, c.id, coalesce(c.parent_id, p.id) AS parent_id, convo_metadata(ms.name, c.meta) AS metadata,
       bt.name AS body_type, c.body,
       c.log_length, c.created_at, c.channel_list
  FROM convo_checkpoints AS c
  LEFT JOIN convo_names AS bt ON bt.num = c.body_type
  LEFT JOIN convo_names AS ms ON ms.num = c.meta_shape
  LEFT JOIN convo_checkpoints AS p ON p.key = c.key - c.parent_place
  WHERE c.key BETWEEN ?1 << 32 AND (?1 << 32) + 4294967295
    AND CASE WHEN typeof(c.id) = 'blob' THEN substr(c.id, 5, 4) ELSE c.id END
        = CASE WHEN typeof(?3) = 'blob' THEN substr(?3, 5, 4) ELSE ?3 END
    AND c.ns = ?2 AND c.id = ?3;
