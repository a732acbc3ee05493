-- a put with log references: pending write (?4 task_id, ?5 idx) of checkpoint
-- (?1 thread number, ?2 ns, ?3 id) becomes ?8 type, ?9 value, only while it
-- is exactly ?6 type, ?7 value (blobs compare byte for byte); types are
-- numbers in convo_names, ids as sq_bind_id() binds them
UPDATE convo_checkpoint_writes SET type = ?8, value = ?9
  WHERE checkpoint = (SELECT key FROM convo_checkpoints
                      WHERE thread = ?1 AND ns = ?2 AND id = ?3)
    AND task_id = ?4 AND idx = ?5 AND type = ?6 AND value = ?7;
