-- migrate-24.sql: schema version 24 — a checkpoint's pending writes in its own
-- row (issue 24). A LangGraph checkpoint has one or two pending writes, each a
-- row of checkpoint_writes: a 24-byte tuple header and 4-byte line pointer, the
-- checkpoint's key again (tid, namespace, 17-byte id) and an entry in a
-- primary key of its own (85 bytes), about 205 bytes for a 10-byte value. Now
-- they are an array of pending_write in the checkpoint's row, in (task_id,
-- idx) order: about 80 bytes a write, no index entry, and a get reads them
-- with the row. put_writes and the swaps of checkpoint_put_refs update the row
-- (not an indexed column: a HOT update, the old version pruned in place, as
-- the raise of log_length already was); prune, delete, the tail rewrite and
-- copy take them with the row. Two put_writes to one checkpoint serialize on
-- its row lock, and the second merges into what the first wrote (READ
-- COMMITTED re-reads the row).
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).

-- version 23's channel_list, its channels by unnest() WITH ORDINALITY instead of
-- generate_series(): the planner takes a generate_series() it cannot see the
-- bounds of for 1,000 rows, so the list and get statements were costed at
-- 250,000 and JIT-compiled on every run (about 250 ms a list of 10 checkpoints
-- on the test machine, against 0.5 ms of execution); an unnest() is taken for 10.
CREATE OR REPLACE FUNCTION @S.channel_list(p_set integer, p_versions bytea, OUT ch integer,
    OUT ver bytea)
RETURNS SETOF record
LANGUAGE sql STABLE AS $fn$
    SELECT x.ch, substring(p_versions FROM x.start + 1 FOR x.len)
      FROM (SELECT l.ch, l.len,
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

-- fixed-size fields first: no padding between them
CREATE TYPE @S.pending_write AS (
    idx       bigint,
    task_path integer,                  -- checkpoint_names.num, as channel and type
    channel   integer,
    type      integer,
    task_id   bytea,                    -- id_pack(task id)
    value     bytea);

ALTER TABLE @S.checkpoints ADD COLUMN writes @S.pending_write[];
UPDATE @S.checkpoints c SET writes = w.a
  FROM (SELECT x.tid, x.checkpoint_ns, x.checkpoint_id,
               array_agg(ROW(x.idx, x.task_path, x.channel, x.type, x.task_id,
                             x.value)::@S.pending_write ORDER BY x.task_id, x.idx) AS a
          FROM @S.checkpoint_writes x GROUP BY 1, 2, 3) w
 WHERE c.tid = w.tid AND c.checkpoint_ns = w.checkpoint_ns
   AND c.checkpoint_id = w.checkpoint_id;
DROP TABLE @S.checkpoint_writes;

-- version 19's checkpoint_put_writes: the writes merged into the row's array
-- (a new (task, idx) added, one with idx < 0 replaced, one with idx >= 0 kept)
CREATE OR REPLACE FUNCTION @S.checkpoint_put_writes(p_thread text, p_ns text, p_id text,
    p_task text, p_path text, p_idx bigint[], p_channels text[], p_types text[],
    p_values bytea[], p_ttl interval) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    v_tid bigint;
    v_id bytea := @S.id_pack(p_id);
    v_task bytea := @S.id_pack(p_task);
    n integer := coalesce(cardinality(p_idx), 0);
    names integer[];
BEGIN
    -- a key-share lock: a concurrent delete or prune either ran first (and the
    -- checkpoint is gone) or waits for these writes and sees them
    v_tid := @S.thread_live(p_thread, p_ttl, true);
    IF v_tid IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'CV404', MESSAGE = 'checkpoint not found';
    END IF;
    names := @S.name_nums(coalesce(p_channels, '{}') || coalesce(p_types, '{}') || p_path);
    UPDATE @S.checkpoints c SET writes = (
        SELECT array_agg(x.w ORDER BY (x.w).task_id, (x.w).idx) FROM (
            SELECT o AS w FROM unnest(c.writes) AS o
             WHERE o.task_id <> v_task OR o.idx >= 0
                OR NOT (o.idx = ANY (p_idx))
            UNION ALL
            SELECT ROW(u.i, names[2 * n + 1], names[u.o], names[n + u.o], v_task,
                       u.b)::@S.pending_write
              FROM unnest(p_idx, p_values) WITH ORDINALITY AS u(i, b, o)
             WHERE u.i < 0 OR NOT EXISTS (
                   SELECT 1 FROM unnest(c.writes) AS o
                    WHERE o.task_id = v_task AND o.idx = u.i)) x)
     WHERE c.tid = v_tid AND c.checkpoint_ns = p_ns AND c.checkpoint_id = v_id;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'CV404', MESSAGE = 'checkpoint not found';
    END IF;
END
$fn$;

-- version 23's checkpoint_put_refs: a write's swap and the raise of its
-- checkpoint's log_length are one update of the checkpoint's row
CREATE OR REPLACE FUNCTION @S.checkpoint_put_refs(p_thread text, p_ns text, p_id text,
    p_parent text, p_metadata json, p_body_type text, p_body bytea,
    p_log_length bigint, p_channels text[], p_versions text[], p_types text[],
    p_values bytea[], p_bodies bytea[], p_roles text[], p_expected bigint,
    p_generation bigint, p_at timestamptz, p_ttl interval, p_sw_ids text[],
    p_sw_tasks text[], p_sw_idx bigint[], p_sw_channels text[], p_sw_versions text[],
    p_sw_old_types text[], p_sw_old bytea[], p_sw_new_types text[], p_sw_new bytea[],
    p_sw_log bigint[]) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    v_tid bigint;
    gen bigint;
    v_id bytea;
    v_task bytea;
    n integer := coalesce(cardinality(p_sw_ids), 0);
    names integer[];
BEGIN
    IF coalesce(cardinality(p_bodies), 0) > 0 THEN
        -- append() checks the length and the generation before it writes
        PERFORM @S.checkpoint_put_log(p_thread, p_ns, p_id, p_parent, p_metadata,
            p_body_type, p_body, p_log_length, p_channels, p_versions, p_types, p_values,
            p_bodies, p_roles, p_expected, p_generation, p_at, p_ttl);
    ELSE
        PERFORM @S.checkpoint_put(p_thread, p_ns, p_id, p_parent, p_metadata, p_body_type,
            p_body, p_log_length, p_channels, p_versions, p_types, p_values, p_at, p_ttl);
    END IF;
    -- the put holds the thread's row lock from its claim on: the generation
    -- read here is the one it wrote under; a mismatch undoes the put with the
    -- rest of the statement (a thread the put created is at 0)
    SELECT t.tid, t.generation INTO v_tid, gen FROM @S.threads t WHERE t.thread_id = p_thread;
    IF p_generation >= 0 AND gen <> p_generation THEN
        RAISE EXCEPTION USING ERRCODE = 'CV409', MESSAGE = format(
            'thread is at generation %s, expected %s', gen, p_generation);
    END IF;
    IF n = 0 THEN
        RETURN;
    END IF;
    -- an old type no row has names nothing: its number is NULL and no row matches
    names := @S.name_nums(p_sw_old_types || p_sw_new_types || p_sw_channels);
    -- each value changes only while it is exactly the old one (type and
    -- bytes); the checkpoint of one that changed covers what it refers to
    -- (log_length is in no index: the raise is a HOT update)
    FOR i IN 1 .. n LOOP
        v_id := @S.id_pack(p_sw_ids[i]);
        IF p_sw_tasks[i] IS NOT NULL THEN
            v_task := @S.id_pack(p_sw_tasks[i]);
            UPDATE @S.checkpoints k SET log_length = greatest(k.log_length, p_sw_log[i]),
                writes = ARRAY(
                    SELECT CASE WHEN o.task_id = v_task AND o.idx = p_sw_idx[i]
                                 AND o.type = names[i] AND o.value = p_sw_old[i]
                           THEN ROW(o.idx, o.task_path, o.channel, names[n + i], o.task_id,
                                    p_sw_new[i])::@S.pending_write
                           ELSE ROW(o.idx, o.task_path, o.channel, o.type, o.task_id,
                                    o.value)::@S.pending_write END
                      FROM unnest(k.writes) WITH ORDINALITY AS o(idx, task_path, channel,
                           type, task_id, value, ord)
                     ORDER BY o.ord)
             WHERE k.tid = v_tid AND k.checkpoint_ns = p_ns AND k.checkpoint_id = v_id
               AND EXISTS (SELECT 1 FROM unnest(k.writes) AS o
                            WHERE o.task_id = v_task AND o.idx = p_sw_idx[i]
                              AND o.type = names[i] AND o.value = p_sw_old[i]);
        ELSE
            UPDATE @S.checkpoint_blobs x SET type = names[n + i], value = p_sw_new[i]
             WHERE x.tid = v_tid AND x.checkpoint_ns = p_ns AND x.channel = names[2 * n + i]
               AND x.version = @S.ver_pack(p_sw_versions[i])
               AND x.type = names[i] AND x.value = p_sw_old[i]
               AND EXISTS (SELECT 1 FROM @S.checkpoints k WHERE k.tid = v_tid
                             AND k.checkpoint_ns = p_ns AND k.checkpoint_id = v_id);
            IF FOUND THEN
                UPDATE @S.checkpoints k SET log_length = p_sw_log[i]
                 WHERE k.tid = v_tid AND k.checkpoint_ns = p_ns AND k.checkpoint_id = v_id
                   AND k.log_length < p_sw_log[i];
            END IF;
        END IF;
    END LOOP;
END
$fn$;

-- version 18's checkpoint_prune: the writes go with their rows
CREATE OR REPLACE FUNCTION @S.checkpoint_prune(p_thread text, p_keep bigint,
    p_ttl interval) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    v_tid bigint;
BEGIN
    v_tid := @S.thread_live(p_thread, p_ttl, false);
    IF v_tid IS NULL THEN
        RAISE EXCEPTION USING ERRCODE = 'CV404', MESSAGE = 'thread not found';
    END IF;
    DELETE FROM @S.checkpoints c
     USING (SELECT x.checkpoint_ns, x.checkpoint_id FROM (
            SELECT k.checkpoint_ns, k.checkpoint_id, row_number() OVER (
                   PARTITION BY k.checkpoint_ns ORDER BY k.put_seq DESC) AS rn
              FROM @S.checkpoints k WHERE k.tid = v_tid) x
            WHERE x.rn > p_keep) d
     WHERE c.tid = v_tid AND c.checkpoint_ns = d.checkpoint_ns
       AND c.checkpoint_id = d.checkpoint_id;
    DELETE FROM @S.checkpoint_blobs b WHERE b.tid = v_tid AND NOT EXISTS (
        SELECT 1 FROM @S.checkpoints c, @S.channel_list(c.channel_set, c.versions) AS u
         WHERE c.tid = v_tid AND c.checkpoint_ns = b.checkpoint_ns
           AND u.ch = b.channel AND u.ver = b.version);
END
$fn$;

-- version 18's thread_copy: the writes copied with their rows
CREATE OR REPLACE FUNCTION @S.thread_copy(p_src text, p_dst text, p_upto bigint,
    p_generation bigint, p_at timestamptz, p_ttl interval) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    src bigint;
    dst bigint;
    len bigint;
    n bigint;
    seqs bigint[];
BEGIN
    PERFORM @S.thread_fork(p_src, p_dst, p_upto, p_generation, p_at, p_ttl);
    SELECT t.tid INTO src FROM @S.threads t WHERE t.thread_id = p_src;
    SELECT t.tid, t.length INTO dst, len FROM @S.threads t WHERE t.thread_id = p_dst;
    SELECT count(*) INTO n FROM @S.checkpoints k WHERE k.tid = src AND k.log_length <= len;
    IF n = 0 THEN
        RETURN;
    END IF;
    SELECT array_agg(x.s ORDER BY x.s) INTO seqs FROM (
        SELECT nextval('@S.checkpoint_put_seq') AS s FROM generate_series(1, n)) x;
    INSERT INTO @S.checkpoints (tid, put_seq, log_length, created_at, channel_set,
        checkpoint_ns, checkpoint_id, parent_id, body_type, metadata, versions, body, writes)
    SELECT dst, seqs[k.rank], k.log_length, p_at, k.channel_set, k.checkpoint_ns,
           k.checkpoint_id, k.parent_id, k.body_type, k.metadata, k.versions, k.body, k.writes
      FROM (SELECT c.*, row_number() OVER (ORDER BY c.put_seq) AS rank
              FROM @S.checkpoints c WHERE c.tid = src AND c.log_length <= len) k;
    INSERT INTO @S.checkpoint_blobs (tid, checkpoint_ns, channel, version, type, value)
    SELECT dst, b.checkpoint_ns, b.channel, b.version, b.type, b.value
      FROM @S.checkpoint_blobs b
     WHERE b.tid = src AND (b.checkpoint_ns, b.channel, b.version) IN (
           SELECT DISTINCT k.checkpoint_ns, u.ch, u.ver
             FROM @S.checkpoints k, @S.channel_list(k.channel_set, k.versions) AS u
            WHERE k.tid = dst);
END
$fn$;

-- version 6's threads_purge: no writes table
CREATE OR REPLACE FUNCTION @S.threads_purge(p_threads text[]) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    keys bigint[];
BEGIN
    SELECT array_agg(t.tid) INTO keys FROM @S.threads t WHERE t.thread_id = ANY (p_threads);
    IF keys IS NULL THEN
        RETURN;
    END IF;
    DELETE FROM @S.messages m WHERE m.tid = ANY (keys);
    DELETE FROM @S.idempotency_keys k WHERE k.tid = ANY (keys);
    DELETE FROM @S.checkpoint_blobs b WHERE b.tid = ANY (keys);
    DELETE FROM @S.checkpoints c WHERE c.tid = ANY (keys);
    DELETE FROM @S.thread_extra x WHERE x.tid = ANY (keys);
    DELETE FROM @S.threads t WHERE t.tid = ANY (keys);
END
$fn$;

-- version 18's replace_tail: the dropped checkpoints' writes go with their rows
CREATE OR REPLACE FUNCTION @S.replace_tail(p_thread text, p_keep bigint, p_bodies bytea[],
    p_roles text[], p_at timestamptz, p_key text, p_expected bigint, p_generation bigint,
    p_drop boolean, p_ttl interval,
    OUT first_seq bigint, OUT count integer, OUT removed bigint, OUT generation bigint,
    OUT replayed boolean)
LANGUAGE plpgsql AS $fn$
DECLARE
    n integer := coalesce(cardinality(p_bodies), 0);
    v_tid bigint;
    len bigint;
    gen bigint;
    deadline timestamptz;
    cp_ns text;
    cp_id text;
    cp_len bigint;
BEGIN
    SELECT t.tid, t.length, t.generation, t.expires_at INTO v_tid, len, gen, deadline
      FROM @S.threads t WHERE t.thread_id = p_thread FOR UPDATE;
    IF NOT FOUND OR deadline <= now() THEN
        RAISE EXCEPTION USING ERRCODE = 'CV404', MESSAGE = 'thread not found';
    END IF;
    IF p_key IS NOT NULL THEN
        SELECT k.first_seq, k.count INTO first_seq, count
          FROM @S.idempotency_keys k WHERE k.tid = v_tid AND k.key = p_key;
        IF FOUND THEN
            removed := 0;
            generation := gen;
            replayed := true;
            RETURN;
        END IF;
    END IF;
    IF (p_expected >= 0 AND p_expected <> len) OR (p_generation >= 0 AND p_generation <> gen)
    THEN
        RAISE EXCEPTION USING ERRCODE = 'CV409', MESSAGE = format(
            'thread has %s messages at generation %s: not the expected tail', len, gen);
    END IF;
    IF p_keep > len THEN
        RAISE EXCEPTION USING ERRCODE = 'CV400',
            MESSAGE = format('keep %s is past the %s messages', p_keep, len);
    END IF;
    IF p_drop THEN
        WITH doomed AS (
            DELETE FROM @S.checkpoints c WHERE c.tid = v_tid AND c.log_length > p_keep
            RETURNING c.checkpoint_ns, c.checkpoint_id, c.channel_set, c.versions),
        freed AS (
            SELECT d.checkpoint_ns AS ns, u.ch, u.ver
              FROM doomed d, @S.channel_list(d.channel_set, d.versions) AS u
            EXCEPT
            SELECT c.checkpoint_ns, u.ch, u.ver
              FROM @S.checkpoints c, @S.channel_list(c.channel_set, c.versions) AS u
             WHERE c.tid = v_tid AND c.log_length <= p_keep)
        DELETE FROM @S.checkpoint_blobs b USING freed x
         WHERE b.tid = v_tid AND b.checkpoint_ns = x.ns AND b.channel = x.ch
           AND b.version = x.ver;
    ELSE
        SELECT c.checkpoint_ns, @S.id_text(c.checkpoint_id), c.log_length INTO cp_ns, cp_id, cp_len
          FROM @S.checkpoints c WHERE c.tid = v_tid AND c.log_length > p_keep
         ORDER BY c.put_seq LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION USING ERRCODE = 'CV409', MESSAGE = format(
                'checkpoint %s (namespace ''%s'') refers to %s messages; the rewrite keeps '
                '%s: nothing written (drop_checkpoints removes such checkpoints)',
                cp_id, cp_ns, cp_len, p_keep);
        END IF;
    END IF;
    -- the new messages over [p_keep, p_keep + n), replacing a row where there
    -- is one (an update, kept on its page when there is room: no index entry),
    -- and what is left past them deleted (both ends given: a plan cached for
    -- any values still takes the index)
    IF p_keep + n < len THEN
        DELETE FROM @S.messages m WHERE m.tid = v_tid AND m.seq >= p_keep + n
           AND m.seq < len;
    END IF;
    IF n > 0 THEN
        INSERT INTO @S.messages AS m (tid, seq, created_at, role, body)
        SELECT v_tid, p_keep + u.o - 1, p_at, u.r, u.b
          FROM unnest(p_bodies, p_roles) WITH ORDINALITY AS u(b, r, o)
        ON CONFLICT (tid, seq) DO UPDATE SET created_at = excluded.created_at,
            role = excluded.role, body = excluded.body;
    END IF;
    UPDATE @S.threads t SET length = p_keep + n, generation = gen + 1, updated_at = p_at,
        listed_at = @S.listed_at(t.listed_at, p_at), expires_at = now() + p_ttl
     WHERE t.tid = v_tid;
    IF p_key IS NOT NULL THEN
        INSERT INTO @S.idempotency_keys (tid, key, first_seq, count)
        VALUES (v_tid, p_key, p_keep, n);
    END IF;
    first_seq := p_keep;
    count := n;
    removed := len - p_keep;
    generation := gen + 1;
    replayed := false;
END
$fn$;
