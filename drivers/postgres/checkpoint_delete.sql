-- checkpoint_delete.sql: removes the checkpoints (namespace $2[i], id $3[i])
-- of thread $1 (with their pending writes, in their rows since v24) and the
-- values no remaining checkpoint of their namespace lists, in one statement; returns how many were removed. A
-- missing or expired thread removes nothing. $4: the store's ttl. All parts
-- see one snapshot, so "remaining" leaves the doomed rows out by name.
-- (schema 42) A thread with segments: CV042, the driver unseals it first.
WITH t AS (
    SELECT CASE WHEN @S.segments_none($1::text, NULL)
                THEN @S.thread_live($1::text, $4::interval, false) END AS tid),
doomed AS (
    DELETE FROM @S.checkpoints c USING t, unnest($2::text[], $3::text[]) AS k(ns, id)
     WHERE c.tid = t.tid AND c.checkpoint_ns = k.ns AND c.checkpoint_id = @S.id_pack(k.id)
    RETURNING c.tid, c.checkpoint_ns, c.checkpoint_id, c.channel_set, c.versions),
freed AS (
    SELECT d.tid, d.checkpoint_ns AS ns, u.ch, u.ver
      FROM doomed d, @S.channel_list(d.channel_set, d.versions) AS u
    EXCEPT
    SELECT c.tid, c.checkpoint_ns, u.ch, u.ver
      FROM t, @S.checkpoints c, @S.channel_list(c.channel_set, c.versions) AS u
     WHERE c.tid = t.tid AND NOT EXISTS (
           SELECT 1 FROM doomed d
            WHERE d.checkpoint_ns = c.checkpoint_ns AND d.checkpoint_id = c.checkpoint_id)),
blobs AS (
    DELETE FROM @S.checkpoint_blobs b USING freed x
     WHERE b.tid = x.tid AND b.checkpoint_ns = x.ns AND b.channel = x.ch
       AND b.version = x.ver)
SELECT count(*)::int8 FROM doomed;
