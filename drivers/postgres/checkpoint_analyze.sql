-- checkpoint_analyze.sql: run once by a store handle, after its
-- ANALYZE_AFTER_PUTS-th checkpoint put (checkpoints.c), and only when the
-- server has never analyzed the checkpoints table (reltuples < 0: a new store
-- before autovacuum's first analyze, which comes a minute or more later, or
-- never with autovacuum off). Without statistics the planner costs a get by id
-- (checkpoint_get.sql, checkpoint_list.sql's `before`) the same on
-- checkpoints_pkey and on the smaller checkpoints_by_ns_put with the id as a
-- filter, and takes the latter: every get read every checkpoint of its thread
-- through its HOT chain (200 gets of a 200-checkpoint thread read 40,000 index
-- entries; a LangGraph run's saver time at turn 300 doubled). ANALYZE takes a
-- lock that lets reads and writes go on; a role that does not own the table
-- gets a warning, not an error. Nothing stored changes.
DO $fn$
BEGIN
    IF (SELECT c.reltuples < 0 FROM pg_class c WHERE c.oid = '@S.checkpoints'::regclass) THEN
        ANALYZE @S.checkpoints;
    END IF;
END
$fn$
