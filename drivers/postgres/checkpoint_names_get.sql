-- checkpoint_names_get.sql: the checkpoint names and channel sets the driver
-- has not seen, for its copy of them (readback.c: a stored checkpoint's
-- numbers become names in C). Both tables only grow and never renumber;
-- numbers come from identities, so one may commit after a higher one: the
-- driver asks for those above the highest it has ($1 names, $3 sets) and for
-- the ones below that it lacks ($2, $4). Kind 0: a name; 1: a set.
SELECT 0 AS kind, n.num, n.name, NULL::integer[] AS channels
  FROM @S.checkpoint_names n WHERE n.num > $1::int4 OR n.num = ANY($2::int4[])
UNION ALL
SELECT 1, s.num, NULL, s.channels
  FROM @S.checkpoint_channel_sets s WHERE s.num > $3::int4 OR s.num = ANY($4::int4[])
