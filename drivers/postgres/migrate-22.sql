-- migrate-22.sql: schema version 22 — id_pack() and ver_pack() give the same
-- bytes as before without a regular expression: a UUID is told by
-- translate() (every hex digit to 0, the rest kept) and a count by the text
-- before the first '.', and ver_pack() is one SQL expression the planner
-- inlines instead of a PL/pgSQL call. Each regular expression cost about 30
-- us a call on the loaded test machine (10,000 id_pack() calls 374 ms against
-- 41 ms for the rest of it), and a LangGraph put packs two ids and three or
-- four versions. Nothing stored changes.
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).

-- version 18's id_pack
CREATE OR REPLACE FUNCTION @S.id_pack(p text) RETURNS bytea
LANGUAGE sql STABLE AS $fn$
SELECT CASE WHEN length(p) = 36 AND translate(p, '0123456789abcdef', '0000000000000000')
                 = '00000000-0000-0000-0000-000000000000'
            THEN decode(translate(p, '-', ''), 'hex')
            WHEN octet_length(p) = 16 THEN '\x00'::bytea || convert_to(p, 'UTF8')
            ELSE convert_to(p, 'UTF8') END
$fn$;

-- version 19's ver_pack: 1, the width, the count and the rest for a count
-- in 6 to 255 digits (below 10^9) before the first '.'; 2 and a UUID's
-- bytes; else the UTF-8 bytes, behind a 0 when empty or starting below 3
CREATE OR REPLACE FUNCTION @S.ver_pack(p text) RETURNS bytea
LANGUAGE sql STABLE AS $fn$
SELECT CASE
       WHEN strpos(p, '.') BETWEEN 7 AND 256
            AND translate(left(p, strpos(p, '.') - 1), '0123456789', '') = ''
            AND length(ltrim(left(p, strpos(p, '.') - 1), '0')) <= 9
       THEN set_byte('\x0100'::bytea, 1, strpos(p, '.') - 1)
            || int4send(coalesce(nullif(ltrim(left(p, strpos(p, '.') - 1), '0'), ''),
                                 '0')::int4)
            || convert_to(substring(p FROM strpos(p, '.') + 1), 'UTF8')
       WHEN length(p) = 36 AND translate(p, '0123456789abcdef', '0000000000000000')
            = '00000000-0000-0000-0000-000000000000'
       THEN '\x02'::bytea || decode(translate(p, '-', ''), 'hex')
       WHEN p = '' OR ascii(p) < 3 THEN '\x00'::bytea || convert_to(p, 'UTF8')
       ELSE convert_to(p, 'UTF8') END
$fn$;
