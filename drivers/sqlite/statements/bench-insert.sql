-- one bare insert per transaction into the scratch table (see bench-create)
INSERT INTO "convo_bench_scratch_%ld"(body) VALUES(?1);
