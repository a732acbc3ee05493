-- the waiting pending writes of the checkpoints with keys in [?1, ?2] (layout
-- 13: a new checkpoint's put, after its swaps, for the rows before the one
-- before it): each goes into its row (cp-pending-set.sql), then
-- cp-pending-settled.sql deletes them
SELECT key, pending FROM convo_checkpoint_pending WHERE key >= ?1 AND key <= ?2;
