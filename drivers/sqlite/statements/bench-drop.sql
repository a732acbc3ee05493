-- the scratch table dropped after the run (see bench-create)
DROP TABLE IF EXISTS "convo_bench_scratch_%ld";
