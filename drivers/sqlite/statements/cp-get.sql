-- checkpoint (?1 thread number, ?2 ns, ?3 id: found as cp-find.sql finds it);
-- the columns are the ones cp_from_row() reads, in its order (tests/sqlite.c
-- checks them)
-- layout 17: the moved columns of a hot row from convo_checkpoint_hot, of a sealed
-- one from its block's segment (convo_sealed: segments.c)
SELECT c.key, c.ns, c.id, coalesce(c.parent_id, p.id) AS parent_id, convo_metadata(ms.name, CASE WHEN c.sealed IS NULL THEN c.meta WHEN c.sealed = 0 THEN h.meta ELSE convo_sealed(g.data, c.key, 1) END) AS metadata,
       bt.name AS body_type, CASE WHEN c.sealed IS NULL THEN c.body WHEN c.sealed = 0 THEN h.body ELSE convo_sealed(g.data, c.key, 3) END AS body,
       c.log_length, CASE WHEN c.sealed IS NULL THEN c.created_at WHEN c.sealed = 0 THEN h.created_at ELSE convo_sealed(g.data, c.key, 4) END AS created_at,
       CASE WHEN c.sealed IS NULL THEN c.channel_list WHEN c.sealed = 0 THEN h.channel_list ELSE convo_sealed(g.data, c.key, 5) END AS channel_list
  FROM convo_checkpoints AS c
  LEFT JOIN convo_checkpoint_hot AS h ON c.sealed = 0 AND h.key = c.key
  LEFT JOIN convo_checkpoint_segments AS g ON c.sealed = 1 AND g.block = c.key >> 4
  LEFT JOIN convo_names AS bt ON bt.num = CASE WHEN c.sealed IS NULL THEN c.body_type WHEN c.sealed = 0 THEN h.body_type ELSE convo_sealed(g.data, c.key, 2) END
  LEFT JOIN convo_names AS ms ON ms.num = CASE WHEN c.sealed IS NULL THEN c.meta_shape WHEN c.sealed = 0 THEN h.meta_shape ELSE convo_sealed(g.data, c.key, 6) END
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
