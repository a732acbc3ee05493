-- the store's last put_order: one seek to the end of the put_order index
SELECT max(put_order) FROM convo_checkpoints;
