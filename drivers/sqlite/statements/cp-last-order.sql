-- the store's last put_order, kept in convo_meta (layout 7: no index on
-- put_order to seek the largest)
SELECT CAST(value AS INTEGER) FROM convo_meta WHERE key = 'checkpoint_order';
