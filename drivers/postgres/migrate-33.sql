-- migrate-33.sql: schema version 33 — a NULL write element is refused like
-- one too short (nothing stored changes). Version 30's write_fields() read a
-- NULL element as NULL fields: get and list gave CONVO_ECORRUPT, but
-- checkpoint_put_writes' merge compared those NULLs, kept neither branch,
-- and so dropped the element: a put_writes succeeded and the corrupt write
-- was gone without a word (tests/postgres_compact.c,
-- test_corrupt_writes_are_ecorrupt). Now write_fields() raises SQLSTATE
-- 2202E on a NULL element too (get_byte() of an empty value at -1), which
-- get, list and put_writes give as CONVO_ECORRUPT.
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).

-- version 30's write_fields: an element too short for its header or its task
-- id, or NULL, reads get_byte(.., -1), which raises
CREATE OR REPLACE FUNCTION @S.write_fields(p bytea, OUT idx bigint, OUT task_path integer,
    OUT channel integer, OUT type integer, OUT task_id bytea, OUT value bytea)
LANGUAGE sql IMMUTABLE AS $fn$
    SELECT ('x' || encode(substring(p FROM 1 FOR 8), 'hex'))::bit(64)::bigint,
           ('x' || encode(substring(p FROM 9 FOR 4), 'hex'))::bit(32)::integer,
           ('x' || encode(substring(p FROM 13 FOR 4), 'hex'))::bit(32)::integer,
           ('x' || encode(substring(p FROM 17 FOR 4), 'hex'))::bit(32)::integer,
           substring(p FROM 25 FOR x.tlen),
           substring(p FROM 25 + x.tlen)
      FROM (SELECT CASE WHEN octet_length(p) >= 24 AND t.len >= 0
                             AND 24 + t.len <= octet_length(p)
                        THEN t.len ELSE get_byte(coalesce(p, '\x'::bytea), -1) END AS tlen
              FROM (SELECT ('x' || encode(substring(p FROM 21 FOR 4), 'hex'))::bit(32)::integer
                           AS len) t) x
$fn$;
