-- bench_drop.sql: the raw baseline table goes after its run.
DROP TABLE IF EXISTS @S.@T
