-- ?1 more put_orders are taken (inside the write transaction)
UPDATE convo_meta SET value = CAST(value AS INTEGER) + ?1 WHERE key = 'checkpoint_order';
