-- replace_tail_fast.sql: the tail rewrite without an idempotency key in one
-- statement ($1 thread, $2 keep, $3 bodies, $4 roles, $5 created_at, $6
-- expected length and $7 expected generation, below 0: any, $8 ttl); the
-- messages removed and the new generation back. No row back (the thread is
-- missing or expired, a condition fails, keep is past the end, a checkpoint
-- (sealed or not, schema 42) refers past keep, or the row changed after this statement's snapshot) sends
-- the call to replace_tail.sql, which says why or does it.
-- cur reads the thread row in the statement's snapshot. The update locks the
-- row; when it had to wait for a writer that changed it, it rechecks its
-- conditions on the new version, whose xmin (the writer's transaction) is
-- not cur's: it matches nothing. So when it matches, the snapshot holds every
-- write made under the row's lock (each changes the row: length, updated_at),
-- and the rest of the statement (the checkpoint check, the messages) may
-- trust it: the new messages go over seqs [keep, keep + n) (an upsert:
-- replaced where they were, inserted past the old end), and those past keep +
-- n go. The xmin test is a plain condition (a ctid one would become a TID
-- scan's, which the recheck skips). The seqs to delete are a range with both
-- ends, of one tid, each a value: the planner's estimate for that stays small
-- whatever the statistics (one end and a join made it choose a sequential
-- scan of every message of the store once a long thread was analyzed).
WITH cur AS (
    SELECT s.xmin AS version, s.length FROM @S.threads s WHERE s.thread_id = $1::text),
upd AS (
    UPDATE @S.threads t SET length = $2::int8 + cardinality($3::bytea[]),
        generation = t.generation + 1, updated_at = $5::timestamptz,
        listed_at = @S.listed_at(t.listed_at, $5::timestamptz), expires_at = now() + $8::interval
      FROM cur
     WHERE t.thread_id = $1::text AND t.xmin = cur.version
       AND (t.expires_at IS NULL OR t.expires_at > now()) AND t.length >= $2::int8
       AND ($6::int8 < 0 OR t.length = $6::int8)
       AND ($7::int8 < 0 OR t.generation = $7::int8)
       AND NOT EXISTS (SELECT 1 FROM @S.checkpoints c
                        WHERE c.tid = t.tid AND c.log_length > $2::int8)
       AND NOT EXISTS (SELECT 1 FROM @S.checkpoint_segments s
                        WHERE s.tid = t.tid AND s.max_log > $2::int8)
    RETURNING t.tid, cur.length AS old_length, t.generation),
put AS (
    INSERT INTO @S.messages AS m (tid, seq, created_at, role, body)
    SELECT upd.tid, $2::int8 + u.o - 1, $5::timestamptz, u.r, u.b
      FROM upd, unnest($3::bytea[], $4::text[]) WITH ORDINALITY AS u(b, r, o)
    ON CONFLICT (tid, seq) DO UPDATE SET created_at = excluded.created_at,
        role = excluded.role, body = excluded.body),
cut AS (
    DELETE FROM @S.messages m
     WHERE m.tid = (SELECT upd.tid FROM upd)
       AND m.seq >= $2::int8 + cardinality($3::bytea[])
       AND m.seq < (SELECT upd.old_length FROM upd))
SELECT old_length - $2::int8, generation FROM upd
