-- checkpoint (?1 thread number, ?2 ns, ?3 id: found as cp-find.sql finds it);
-- the columns are the ones cp_from_row() reads, in its order (tests/sqlite.c
-- checks them)
SELECT c.key, c.ns, c.id, coalesce(c.parent_id, p.id) AS parent_id, convo_metadata(ms.name, c.meta) AS metadata,
       bt.name AS body_type, c.body,
       c.log_length, c.created_at, c.channel_list
  FROM convo_checkpoints AS c
  LEFT JOIN convo_names AS bt ON bt.num = c.body_type
  LEFT JOIN convo_names AS ms ON ms.num = c.meta_shape
  LEFT JOIN convo_checkpoints AS p ON p.key = c.key - c.parent_place
  WHERE c.key = coalesce(
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
    AND c.ns = ?2 AND c.id = ?3;
