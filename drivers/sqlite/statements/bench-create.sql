-- convo bench's raw baseline: a scratch table per process. Its name holds a
-- printf conversion that maint.c fills in with the process id, inside a quoted
-- identifier, so this file is also valid SQL as it stands. The three bench-*
-- files are printf formats: no other percent sign in them.
CREATE TABLE IF NOT EXISTS "convo_bench_scratch_%ld"(id INTEGER PRIMARY KEY, body BLOB);
