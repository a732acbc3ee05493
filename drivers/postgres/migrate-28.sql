-- migrate-28.sql: schema version 28 — channel_list() checks a checkpoint's
-- versions value against itself: its width byte is 1 or 4 and the width, the
-- lengths and the versions fill it exactly. Before, a value one byte short or
-- long in a length read back as other versions without an error (a length
-- too small gave its version's tail to the next channel, trailing bytes were
-- ignored, a width of 0 or 2 read as 4). A value that does not check raises
-- SQLSTATE 2202E (get_byte at -1), which a read gives as CONVO_ECORRUPT
-- (checkpoints.c, read_failed()). Nothing stored changes.
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).

-- version 24's channel_list, with the check: the row's version, or for a
-- value that does not check, int4send(get_byte(p_versions, -1)), which raises
-- (p_versions is never a constant here: the calls pass a column, so the
-- planner does not fold the branch)
CREATE OR REPLACE FUNCTION @S.channel_list(p_set integer, p_versions bytea, OUT ch integer,
    OUT ver bytea)
RETURNS SETOF record
LANGUAGE sql STABLE AS $fn$
    SELECT x.ch,
           CASE WHEN x.w IN (1, 4) AND 1 + x.w * x.n + x.total = octet_length(p_versions)
                THEN substring(p_versions FROM x.start + 1 FOR x.len)
                ELSE int4send(get_byte(p_versions, -1)) END
      FROM (SELECT l.ch, l.len, l.w, l.n, sum(l.len) OVER () AS total,
                   (1 + l.w * l.n + sum(l.len) OVER (ORDER BY l.o) - l.len)::int AS start
              FROM (SELECT u.ch, u.o, w, cardinality(s.channels) AS n,
                           CASE w WHEN 1 THEN get_byte(p_versions, u.o::int)
                                  ELSE (get_byte(p_versions, 4 * u.o::int - 3) << 24)
                                       | (get_byte(p_versions, 4 * u.o::int - 2) << 16)
                                       | (get_byte(p_versions, 4 * u.o::int - 1) << 8)
                                       | get_byte(p_versions, 4 * u.o::int) END AS len
                      FROM @S.checkpoint_channel_sets s,
                           get_byte(p_versions, 0) AS w,
                           unnest(s.channels) WITH ORDINALITY AS u(ch, o)
                     WHERE s.num = p_set) l) x
     ORDER BY x.start
$fn$;
