-- bench_create.sql: convo bench's raw baseline, a table @T shaped like
-- messages, created for one run and dropped after it (bench_drop.sql).
CREATE TABLE @S.@T (thread_id text COLLATE "C" NOT NULL, seq bigint NOT NULL,
    role text NOT NULL, created_at timestamptz NOT NULL, body bytea NOT NULL,
    PRIMARY KEY (thread_id, seq))
