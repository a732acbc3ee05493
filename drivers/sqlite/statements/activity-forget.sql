-- a repair, after a layout-4 libconvo wrote thread ?1 without moving its
-- entry: every entry of the thread, found by a walk of the whole order
DELETE FROM convo_activity WHERE num = ?1;
