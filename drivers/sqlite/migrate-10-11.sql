-- Layout 10 -> 11: a small channel value is kept in the channel-list entry of
-- the checkpoint that brings its version (drivers/sqlite/values.c; docs/sqlite.md,
-- "Layout 11: values in the channel list"), not in a convo_blobs row.
--
-- Nothing is rewritten: every value of layout 10 stays in convo_blobs, where a
-- list entry without a value still finds it. The number is what changes: a
-- layout-10 libconvo refuses this file (its version is newer), and one that had
-- it open before the migration reads an entry holding a value as a malformed
-- list (CONVO_ECORRUPT) instead of reading the value as missing.
SELECT 1;
