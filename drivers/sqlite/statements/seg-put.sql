-- layout 17: block ?1's segment ?2; nothing when the block has one (then its
-- rows are not sealed again: segments.c)
INSERT OR IGNORE INTO convo_checkpoint_segments(block, data) VALUES (?1, ?2);
