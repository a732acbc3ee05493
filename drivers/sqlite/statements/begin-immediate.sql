-- a write transaction: the write lock is taken first, so no transaction ever
-- has to upgrade a read lock and no writer can deadlock
BEGIN IMMEDIATE;
