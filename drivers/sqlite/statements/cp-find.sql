-- where checkpoint (?1 thread number, ?2 ns, ?3 id) stands (layout 14): an
-- ordered row is in the block of 16 positions of the greatest first ordered
-- row of a block at or below its id (convo_checkpoints_ordered_by_id, then
-- that block's keys); an unordered row has its entry in convo_checkpoints_by_id
-- (bytes 5-8 of a 16-byte id, or a text id), read only when the first finds
-- nothing (LIMIT 1); no temporary table; the same look-up, as the key of a
-- row, in cp-get, cp-log-at-least and blob-swap
-- layout 17: the moved columns of a hot row from convo_checkpoint_hot, of a sealed
-- one from its block's segment (convo_sealed: segments.c)
SELECT key, CASE WHEN sealed IS NULL THEN created_at WHEN sealed = 0 THEN (SELECT h.created_at FROM convo_checkpoint_hot AS h WHERE h.key = convo_checkpoints.key) ELSE convo_sealed((SELECT g.data FROM convo_checkpoint_segments AS g WHERE g.block = convo_checkpoints.key >> 4), convo_checkpoints.key, 4) END, put_order FROM convo_checkpoints
  WHERE key BETWEEN (SELECT key FROM convo_checkpoints
                     WHERE thread = ?1 AND id <= ?3 AND unordered = 2
                     ORDER BY id DESC LIMIT 1)
            AND (SELECT key FROM convo_checkpoints
                     WHERE thread = ?1 AND id <= ?3 AND unordered = 2
                     ORDER BY id DESC LIMIT 1) | 15
    AND id = ?3 AND ns = ?2 AND unordered <> 1
UNION ALL
SELECT key, CASE WHEN sealed IS NULL THEN created_at WHEN sealed = 0 THEN (SELECT h.created_at FROM convo_checkpoint_hot AS h WHERE h.key = convo_checkpoints.key) ELSE convo_sealed((SELECT g.data FROM convo_checkpoint_segments AS g WHERE g.block = convo_checkpoints.key >> 4), convo_checkpoints.key, 4) END, put_order FROM convo_checkpoints
  WHERE unordered = 1
    AND CASE WHEN typeof(id) = 'blob' THEN substr(id, 5, 4) ELSE id END
        = CASE WHEN typeof(?3) = 'blob' THEN substr(?3, 5, 4) ELSE ?3 END
    AND key BETWEEN ?1 << 32 AND (?1 << 32) + 4294967295 AND id = ?3 AND ns = ?2
LIMIT 1;
