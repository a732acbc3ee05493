-- migrate-21.sql: schema version 21 — the values' key in the order values
-- arrive: (tid, version, checkpoint_ns, channel) instead of (tid, channel,
-- checkpoint_ns, version). A thread's versions grow with its puts (LangGraph's
-- start with their count, and ver_pack() keeps that order), so a new value's
-- entry goes at the right end of its thread's range, where PostgreSQL splits a
-- full page 90/10; by channel first it went inside the range of each channel,
-- where a full page splits in half: 4,002 entries took 40 pages (100 a page)
-- in a 1,000-turn LangGraph run; 1,200 values of 400 puts take 13 pages by
-- channel, 10 in this order (tests/postgres_dense.c). Every statement names
-- the whole key or its tid. Nothing else changes.
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).

ALTER TABLE @S.checkpoint_blobs DROP CONSTRAINT checkpoint_blobs_pkey;
ALTER TABLE @S.checkpoint_blobs ADD CONSTRAINT checkpoint_blobs_pkey
    PRIMARY KEY (tid, version, checkpoint_ns, channel);
