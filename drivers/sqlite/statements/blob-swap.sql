-- a put with log references: the value of (?4 channel, ?5 version) in thread
-- ?1, namespace ?2 becomes ?8 type, ?9 value, only while it is exactly ?6
-- type, ?7 value and checkpoint ?3 (which names it) exists; channel and types
-- are numbers in convo_names, the version in its stored form
UPDATE convo_blobs SET type = ?8, value = ?9
  WHERE thread = ?1 AND ns = ?2 AND channel = ?4 AND version = ?5
    AND type = ?6 AND value = ?7
    AND EXISTS (SELECT 1 FROM convo_checkpoints
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
                  AND ns = ?2);
