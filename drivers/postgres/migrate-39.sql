-- migrate-39.sql: schema version 39 — a pending write's element with short
-- fields (issue 24 bytes). Version 30's write_pack() gave each write a 24-byte
-- header: the idx in 8 bytes, the task path, channel and type numbers and the
-- task id's length in 4 each; a LangGraph write's idx is 0 to a few (or -1 to
-- -4), its numbers are checkpoint_names numbers in the tens and its task id 16
-- bytes. An element now starts with its form:
--   1  short: the idx in 2 bytes (signed), the task path, channel and type
--      numbers in 2 each (0 to 65,535), the task id's length in 1, then the
--      task id and the value: a 10-byte header (1.5 writes a checkpoint in a
--      LangGraph run: about 21 bytes a checkpoint);
--   2  long: version 30's 24-byte header behind the byte 2, for a write whose
--      fields do not fit the short one.
-- Elements stored before keep version 30's form, which starts with the idx's
-- top byte: 0 or 255 for any idx within +-2^56; the few stored with another
-- first byte (an idx beyond that) are rewritten here to the long form, so a
-- first byte reads unambiguously. write_fields() reads all three and raises
-- SQLSTATE 2202E (CONVO_ECORRUPT) on any other first byte, an element shorter
-- than its header or task id, or NULL. Only write_pack() and write_fields()
-- change (same signatures): every function that packs or reads a write goes
-- through them. tests/postgres_writes_short.c.
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).

-- version 30 elements whose first byte is not 0 or 255: behind the byte 2
UPDATE @S.checkpoints c
   SET writes = ARRAY(SELECT CASE WHEN get_byte(e, 0) IN (0, 255) THEN e
                                  ELSE '\x02'::bytea || e END
                        FROM unnest(c.writes) WITH ORDINALITY AS x(e, o)
                       ORDER BY x.o)
 WHERE c.writes IS NOT NULL
   AND EXISTS (SELECT 1 FROM unnest(c.writes) AS e
                WHERE e IS NOT NULL AND octet_length(e) > 0 AND get_byte(e, 0) NOT IN (0, 255));

-- version 30's write_pack: the short form when the fields fit it
CREATE OR REPLACE FUNCTION @S.write_pack(p_idx bigint, p_path integer, p_channel integer,
    p_type integer, p_task bytea, p_value bytea) RETURNS bytea
LANGUAGE sql IMMUTABLE AS $fn$
    SELECT CASE WHEN p_idx BETWEEN -32768 AND 32767 AND p_path BETWEEN 0 AND 65535
                     AND p_channel BETWEEN 0 AND 65535 AND p_type BETWEEN 0 AND 65535
                     AND octet_length(p_task) <= 255
                THEN '\x01'::bytea || substring(int4send(p_idx::integer) FROM 3)
                     || substring(int4send(p_path) FROM 3)
                     || substring(int4send(p_channel) FROM 3)
                     || substring(int4send(p_type) FROM 3)
                     || set_byte('\x00'::bytea, 0, octet_length(p_task)) || p_task || p_value
                ELSE '\x02'::bytea || int8send(p_idx) || int4send(p_path) || int4send(p_channel)
                     || int4send(p_type) || int4send(octet_length(p_task)) || p_task || p_value
           END
$fn$;

-- version 33's write_fields: the three forms; an element of another first
-- byte, too short for its header or its task id, or NULL, reads
-- get_byte(.., -1), which raises
CREATE OR REPLACE FUNCTION @S.write_fields(p bytea, OUT idx bigint, OUT task_path integer,
    OUT channel integer, OUT type integer, OUT task_id bytea, OUT value bytea)
LANGUAGE sql IMMUTABLE AS $fn$
    SELECT CASE WHEN y.s THEN ((get_byte(p, 1) << 8) | get_byte(p, 2))
                              - CASE WHEN get_byte(p, 1) >= 128 THEN 65536 ELSE 0 END
                ELSE ('x' || encode(substring(p FROM y.o + 1 FOR 8), 'hex'))::bit(64)::bigint
           END,
           CASE WHEN y.s THEN (get_byte(p, 3) << 8) | get_byte(p, 4)
                ELSE ('x' || encode(substring(p FROM y.o + 9 FOR 4), 'hex'))::bit(32)::integer
           END,
           CASE WHEN y.s THEN (get_byte(p, 5) << 8) | get_byte(p, 6)
                ELSE ('x' || encode(substring(p FROM y.o + 13 FOR 4), 'hex'))::bit(32)::integer
           END,
           CASE WHEN y.s THEN (get_byte(p, 7) << 8) | get_byte(p, 8)
                ELSE ('x' || encode(substring(p FROM y.o + 17 FOR 4), 'hex'))::bit(32)::integer
           END,
           substring(p FROM y.h + 1 FOR y.tlen),
           substring(p FROM y.h + 1 + y.tlen)
      FROM (SELECT x.s, x.o, x.h,
                   CASE WHEN x.ok AND x.len >= 0 AND x.h + x.len <= octet_length(p)
                        THEN x.len ELSE get_byte(coalesce(p, '\x'::bytea), -1) END AS tlen
              FROM (SELECT f.b = 1 AS s, CASE WHEN f.b = 2 THEN 1 ELSE 0 END AS o,
                           CASE f.b WHEN 1 THEN 10 WHEN 2 THEN 25 ELSE 24 END AS h,
                           f.b IN (0, 1, 2, 255)
                           AND octet_length(p) >= CASE f.b WHEN 1 THEN 10 WHEN 2 THEN 25
                                                          ELSE 24 END AS ok,
                           CASE WHEN f.b = 1 AND octet_length(p) >= 10 THEN get_byte(p, 9)
                                WHEN f.b = 1 THEN -1
                                ELSE ('x' || encode(substring(p FROM CASE WHEN f.b = 2 THEN 22
                                                                          ELSE 21 END FOR 4),
                                                    'hex'))::bit(32)::integer END AS len
                      FROM (SELECT CASE WHEN octet_length(p) > 0 THEN get_byte(p, 0) END AS b)
                           f) x) y
$fn$;
