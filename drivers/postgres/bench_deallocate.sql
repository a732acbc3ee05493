-- bench_deallocate.sql: forgets the raw baseline's prepared INSERT (bench_insert.sql)
-- after its run, so the connection goes back to the pool as it came.
DEALLOCATE convo_bench_raw
