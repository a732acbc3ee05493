-- checkpoint ?1's pending writes become record ?2, waiting apart from the row
-- until the thread's next put (layout 13)
INSERT OR REPLACE INTO convo_checkpoint_pending(key, pending) VALUES (?1, ?2);
