/* postgres.c — the PostgreSQL driver (libpq): threads, messages, idempotency
 * keys and checkpoints in one schema, migrated forward on open. Every call is
 * one statement and one round trip; a write locks its thread's row first and,
 * with ttl=S, gives the thread a deadline after which it is gone. */
#include "config.h"
#include <convo/driver.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define DEFAULT_SCHEMA "convo"
#define DEFAULT_POOL 4
#define MAX_POOL 100
#define MAX_RETRIES 5
#define FRESH_MICROS 1000 /* see conn_get */
#define SWEEP_BATCH 256 /* expired threads removed per transaction */
/* PostgreSQL timestamps count microseconds from 2000-01-01, not 1970-01-01. */
#define PG_EPOCH_MICROS INT64_C(946684800000000)
/* The earliest time timestamptz holds (4714-11-24 BC), in microseconds since
 * 1970; below it the conversion to PostgreSQL's epoch overflows (INT64_MIN was
 * stored as the year 294247). Every int64 above it fits (INT64_MAX is 294247 AD). */
#define PG_MIN_MICROS (INT64_C(-211813488000000000) + PG_EPOCH_MICROS)
/* Two-key advisory lock namespace for migrations: "conv". */
#define MIGRATION_LOCK_CLASS 1668247158
#define OID_BYTEA 17
#define OID_INT8 20
#define OID_TEXT 25
#define OID_TIMESTAMPTZ 1184
#define TTL_LEN 16 /* an interval in binary: microseconds, days, months */

/* ---------------------------------------------------------------- schema */

/* Every statement below names the schema as @S, replaced by the quoted,
 * validated schema name. Migrations run in order; never edit a released one. */
static const char *const migrations[] = {
    /* 1: threads, messages, idempotency keys and the functions that change them */
    "CREATE TABLE @S.threads (\n"
    "    thread_id  text COLLATE \"C\" NOT NULL,\n"
    "    length     bigint NOT NULL DEFAULT 0,\n"
    "    extra      jsonb NOT NULL DEFAULT '{}',\n"
    "    created_at timestamptz NOT NULL DEFAULT now(),\n"
    "    updated_at timestamptz NOT NULL DEFAULT now(),\n"
    "    PRIMARY KEY (thread_id));\n"
    "CREATE TABLE @S.messages (\n"
    "    thread_id  text COLLATE \"C\" NOT NULL,\n"
    "    seq        bigint NOT NULL,\n"
    "    role       text NOT NULL,\n"
    "    created_at timestamptz NOT NULL,\n"
    "    body       bytea NOT NULL,\n"
    "    PRIMARY KEY (thread_id, seq));\n"
    "CREATE TABLE @S.idempotency_keys (\n"
    "    thread_id  text COLLATE \"C\" NOT NULL,\n"
    "    key        text COLLATE \"C\" NOT NULL,\n"
    "    first_seq  bigint NOT NULL,\n"
    "    count      integer NOT NULL,\n"
    "    created_at timestamptz NOT NULL DEFAULT now(),\n"
    "    PRIMARY KEY (thread_id, key));\n"
    /* The size of jsonb's text with the space after each ':' and ',' removed:
     * the compact JSON the other drivers measure. */
    "CREATE FUNCTION @S.json_compact_size(j jsonb) RETURNS bigint\n"
    "LANGUAGE sql IMMUTABLE AS $fn$\n"
    "    SELECT octet_length(j::text) - coalesce(sum(CASE jsonb_typeof(v)\n"
    "        WHEN 'object' THEN greatest(2 * (SELECT count(*) FROM jsonb_object_keys(v)) - 1, 0)\n"
    "        WHEN 'array' THEN greatest(jsonb_array_length(v) - 1, 0)\n"
    "        ELSE 0 END), 0)\n"
    "    FROM jsonb_path_query(j, 'strict $.**') AS v\n"
    "$fn$;\n"
    "CREATE FUNCTION @S.append(p_thread text, p_bodies bytea[], p_roles text[],\n"
    "    p_at timestamptz, p_key text, p_expected bigint,\n"
    "    OUT first_seq bigint, OUT count integer, OUT replayed boolean)\n"
    "LANGUAGE plpgsql AS $fn$\n"
    "DECLARE\n"
    "    n integer := cardinality(p_bodies);\n"
    "    len bigint;\n"
    "BEGIN\n"
    "    IF p_key IS NULL THEN\n"
    "        -- one statement locks the row, checks the length and allocates seqs\n"
    "        UPDATE @S.threads t SET length = t.length + n, updated_at = p_at\n"
    "         WHERE t.thread_id = p_thread AND (p_expected < 0 OR t.length = p_expected)\n"
    "        RETURNING t.length - n INTO len;\n"
    "    END IF;\n"
    "    IF len IS NULL THEN\n"
    "        LOOP\n"
    "            SELECT t.length INTO len FROM @S.threads t\n"
    "             WHERE t.thread_id = p_thread FOR UPDATE;\n"
    "            EXIT WHEN FOUND;\n"
    "            INSERT INTO @S.threads (thread_id, created_at, updated_at)\n"
    "            VALUES (p_thread, p_at, p_at) ON CONFLICT (thread_id) DO NOTHING;\n"
    "        END LOOP;\n"
    "        -- the row lock is held: this statement's snapshot sees every\n"
    "        -- committed key of the thread\n"
    "        IF p_key IS NOT NULL THEN\n"
    "            SELECT k.first_seq, k.count INTO first_seq, count\n"
    "              FROM @S.idempotency_keys k WHERE k.thread_id = p_thread AND k.key = p_key;\n"
    "            IF FOUND THEN\n"
    "                replayed := true;\n"
    "                RETURN;\n"
    "            END IF;\n"
    "        END IF;\n"
    "        IF p_expected >= 0 AND p_expected <> len THEN\n"
    "            RAISE EXCEPTION USING ERRCODE = 'CV409',\n"
    "                MESSAGE = format('thread has %s messages, expected %s', len, p_expected);\n"
    "        END IF;\n"
    "        UPDATE @S.threads t SET length = len + n, updated_at = p_at\n"
    "         WHERE t.thread_id = p_thread;\n"
    "    END IF;\n"
    "    INSERT INTO @S.messages (thread_id, seq, role, created_at, body)\n"
    "    SELECT p_thread, len + u.o - 1, u.r, p_at, u.b\n"
    "      FROM unnest(p_bodies, p_roles) WITH ORDINALITY AS u(b, r, o);\n"
    "    IF p_key IS NOT NULL THEN\n"
    "        INSERT INTO @S.idempotency_keys (thread_id, key, first_seq, count)\n"
    "        VALUES (p_thread, p_key, len, n);\n"
    "    END IF;\n"
    "    first_seq := len;\n"
    "    count := n;\n"
    "    replayed := false;\n"
    "END\n"
    "$fn$;\n"
    "CREATE FUNCTION @S.save_extra(p_thread text, p_patch jsonb, p_max bigint) RETURNS void\n"
    "LANGUAGE plpgsql AS $fn$\n"
    "DECLARE\n"
    "    merged jsonb;\n"
    "    size bigint;\n"
    "BEGIN\n"
    "    INSERT INTO @S.threads AS t (thread_id, extra) VALUES (p_thread, p_patch)\n"
    "    ON CONFLICT (thread_id)\n"
    "    DO UPDATE SET extra = t.extra || excluded.extra, updated_at = now()\n"
    "    RETURNING t.extra INTO merged;\n"
    "    -- jsonb's text is never shorter than the compact form: count only when needed\n"
    "    IF octet_length(merged::text) > p_max THEN\n"
    "        size := @S.json_compact_size(merged);\n"
    "        IF size > p_max THEN\n"
    "            RAISE EXCEPTION USING ERRCODE = 'CV413', MESSAGE = format(\n"
    "                'merged extra of %s bytes would exceed the limit of %s bytes', size, p_max);\n"
    "        END IF;\n"
    "    END IF;\n"
    "END\n"
    "$fn$;\n"
    "CREATE FUNCTION @S.thread_delete(p_thread text) RETURNS boolean\n"
    "LANGUAGE plpgsql AS $fn$\n"
    "BEGIN\n"
    "    -- wait for appenders first, so no message they commit is left behind\n"
    "    PERFORM 1 FROM @S.threads t WHERE t.thread_id = p_thread FOR UPDATE;\n"
    "    IF NOT FOUND THEN\n"
    "        RETURN false;\n"
    "    END IF;\n"
    "    DELETE FROM @S.messages m WHERE m.thread_id = p_thread;\n"
    "    DELETE FROM @S.idempotency_keys k WHERE k.thread_id = p_thread;\n"
    "    DELETE FROM @S.threads t WHERE t.thread_id = p_thread;\n"
    "    RETURN true;\n"
    "END\n"
    "$fn$;\n"
    "CREATE FUNCTION @S.thread_fork(p_src text, p_dst text, p_upto bigint) RETURNS void\n"
    "LANGUAGE plpgsql AS $fn$\n"
    "DECLARE\n"
    "    len bigint;\n"
    "    x jsonb;\n"
    "    n bigint;\n"
    "BEGIN\n"
    "    SELECT t.length, t.extra INTO len, x FROM @S.threads t\n"
    "     WHERE t.thread_id = p_src FOR SHARE;\n"
    "    IF NOT FOUND THEN\n"
    "        RAISE EXCEPTION USING ERRCODE = 'CV404', MESSAGE = 'source thread not found';\n"
    "    END IF;\n"
    "    n := CASE WHEN p_upto < 0 THEN len ELSE least(p_upto, len) END;\n"
    "    INSERT INTO @S.threads (thread_id, length, extra) VALUES (p_dst, n, x)\n"
    "    ON CONFLICT (thread_id) DO NOTHING;\n"
    "    IF NOT FOUND THEN\n"
    "        RAISE EXCEPTION USING ERRCODE = 'CV409',\n"
    "            MESSAGE = 'destination thread already exists';\n"
    "    END IF;\n"
    "    IF p_upto > len THEN\n"
    "        RAISE EXCEPTION USING ERRCODE = 'CV400',\n"
    "            MESSAGE = format('fork upto %s is past the end (%s)', p_upto, len);\n"
    "    END IF;\n"
    "    INSERT INTO @S.messages (thread_id, seq, role, created_at, body)\n"
    "    SELECT p_dst, m.seq, m.role, m.created_at, m.body FROM @S.messages m\n"
    "     WHERE m.thread_id = p_src AND m.seq < n;\n"
    "END\n"
    "$fn$;\n",
    /* 2: checkpoints, their channel values (once per version) and pending writes */
    "ALTER TABLE @S.threads ADD COLUMN checkpoint_seq bigint NOT NULL DEFAULT 0;\n"
    "CREATE TABLE @S.checkpoints (\n"
    "    thread_id     text COLLATE \"C\" NOT NULL,\n"
    "    checkpoint_ns text COLLATE \"C\" NOT NULL,\n"
    "    checkpoint_id text COLLATE \"C\" NOT NULL,\n"
    "    put_seq       bigint NOT NULL,\n"
    "    parent_id     text COLLATE \"C\",\n"
    "    metadata      jsonb NOT NULL,\n"
    "    body_type     text,\n"
    "    body          bytea,\n"
    "    log_length    bigint NOT NULL,\n"
    "    channels      text[] NOT NULL,\n"
    "    versions      text[] NOT NULL,\n"
    "    created_at    timestamptz NOT NULL,\n"
    "    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id));\n"
    "CREATE INDEX checkpoints_by_put ON @S.checkpoints (thread_id, put_seq DESC);\n"
    "CREATE INDEX checkpoints_by_ns_put ON @S.checkpoints (thread_id, checkpoint_ns, put_seq);\n"
    "CREATE TABLE @S.checkpoint_blobs (\n"
    "    thread_id     text COLLATE \"C\" NOT NULL,\n"
    "    checkpoint_ns text COLLATE \"C\" NOT NULL,\n"
    "    channel       text COLLATE \"C\" NOT NULL,\n"
    "    version       text COLLATE \"C\" NOT NULL,\n"
    "    type          text NOT NULL,\n"
    "    value         bytea NOT NULL,\n"
    "    PRIMARY KEY (thread_id, checkpoint_ns, channel, version));\n"
    "CREATE TABLE @S.checkpoint_writes (\n"
    "    thread_id     text COLLATE \"C\" NOT NULL,\n"
    "    checkpoint_ns text COLLATE \"C\" NOT NULL,\n"
    "    checkpoint_id text COLLATE \"C\" NOT NULL,\n"
    "    task_id       text COLLATE \"C\" NOT NULL,\n"
    "    idx           bigint NOT NULL,\n"
    "    task_path     text NOT NULL,\n"
    "    channel       text NOT NULL,\n"
    "    type          text NOT NULL,\n"
    "    value         bytea NOT NULL,\n"
    "    PRIMARY KEY (thread_id, checkpoint_ns, checkpoint_id, task_id, idx));\n"
    "CREATE FUNCTION @S.checkpoint_put(p_thread text, p_ns text, p_id text, p_parent text,\n"
    "    p_metadata jsonb, p_body_type text, p_body bytea, p_log_length bigint,\n"
    "    p_channels text[], p_versions text[], p_types text[], p_values bytea[],\n"
    "    p_at timestamptz) RETURNS void\n"
    "LANGUAGE plpgsql AS $fn$\n"
    "DECLARE\n"
    "    pos bigint;\n"
    "BEGIN\n"
    "    -- the thread row orders the puts of a thread and locks out prune and delete\n"
    "    LOOP\n"
    "        UPDATE @S.threads t SET checkpoint_seq = t.checkpoint_seq + 1\n"
    "         WHERE t.thread_id = p_thread RETURNING t.checkpoint_seq INTO pos;\n"
    "        EXIT WHEN FOUND;\n"
    "        INSERT INTO @S.threads (thread_id, created_at, updated_at)\n"
    "        VALUES (p_thread, p_at, p_at) ON CONFLICT (thread_id) DO NOTHING;\n"
    "    END LOOP;\n"
    "    INSERT INTO @S.checkpoint_blobs\n"
    "        (thread_id, checkpoint_ns, channel, version, type, value)\n"
    "    SELECT p_thread, p_ns, u.c, u.v, u.t, u.b\n"
    "      FROM unnest(p_channels, p_versions, p_types, p_values) AS u(c, v, t, b)\n"
    "     WHERE u.t IS NOT NULL\n"
    "    ON CONFLICT DO NOTHING;\n"
    "    INSERT INTO @S.checkpoints AS c (thread_id, checkpoint_ns, checkpoint_id, put_seq,\n"
    "        parent_id, metadata, body_type, body, log_length, channels, versions, created_at)\n"
    "    VALUES (p_thread, p_ns, p_id, pos, p_parent, p_metadata, p_body_type, p_body,\n"
    "        p_log_length, p_channels, p_versions, p_at)\n"
    "    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET\n"
    "        parent_id = excluded.parent_id, metadata = excluded.metadata,\n"
    "        body_type = excluded.body_type, body = excluded.body,\n"
    "        log_length = excluded.log_length, channels = excluded.channels,\n"
    "        versions = excluded.versions;\n"
    "END\n"
    "$fn$;\n"
    "CREATE FUNCTION @S.checkpoint_put_writes(p_thread text, p_ns text, p_id text,\n"
    "    p_task text, p_path text, p_idx bigint[], p_channels text[], p_types text[],\n"
    "    p_values bytea[]) RETURNS void\n"
    "LANGUAGE plpgsql AS $fn$\n"
    "BEGIN\n"
    "    -- a key-share lock: a concurrent delete or prune either ran first (and the\n"
    "    -- checkpoint is gone) or waits for these writes and sees them\n"
    "    PERFORM 1 FROM @S.threads t WHERE t.thread_id = p_thread FOR KEY SHARE;\n"
    "    PERFORM 1 FROM @S.checkpoints c WHERE c.thread_id = p_thread\n"
    "       AND c.checkpoint_ns = p_ns AND c.checkpoint_id = p_id;\n"
    "    IF NOT FOUND THEN\n"
    "        RAISE EXCEPTION USING ERRCODE = 'CV404', MESSAGE = 'checkpoint not found';\n"
    "    END IF;\n"
    "    INSERT INTO @S.checkpoint_writes AS w (thread_id, checkpoint_ns, checkpoint_id,\n"
    "        task_id, idx, task_path, channel, type, value)\n"
    "    SELECT p_thread, p_ns, p_id, p_task, u.i, p_path, u.c, u.t, u.b\n"
    "      FROM unnest(p_idx, p_channels, p_types, p_values) AS u(i, c, t, b)\n"
    "    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET\n"
    "        task_path = excluded.task_path, channel = excluded.channel,\n"
    "        type = excluded.type, value = excluded.value\n"
    "     WHERE excluded.idx < 0;\n"
    "END\n"
    "$fn$;\n"
    "CREATE FUNCTION @S.checkpoint_prune(p_thread text, p_keep bigint) RETURNS void\n"
    "LANGUAGE plpgsql AS $fn$\n"
    "BEGIN\n"
    "    PERFORM 1 FROM @S.threads t WHERE t.thread_id = p_thread FOR UPDATE;\n"
    "    IF NOT FOUND THEN\n"
    "        RAISE EXCEPTION USING ERRCODE = 'CV404', MESSAGE = 'thread not found';\n"
    "    END IF;\n"
    "    WITH doomed AS (\n"
    "        DELETE FROM @S.checkpoints c\n"
    "         USING (SELECT x.checkpoint_ns, x.checkpoint_id FROM (\n"
    "                SELECT k.checkpoint_ns, k.checkpoint_id, row_number() OVER (\n"
    "                       PARTITION BY k.checkpoint_ns ORDER BY k.put_seq DESC) AS rn\n"
    "                  FROM @S.checkpoints k WHERE k.thread_id = p_thread) x\n"
    "                WHERE x.rn > p_keep) d\n"
    "         WHERE c.thread_id = p_thread AND c.checkpoint_ns = d.checkpoint_ns\n"
    "           AND c.checkpoint_id = d.checkpoint_id\n"
    "        RETURNING c.checkpoint_ns, c.checkpoint_id)\n"
    "    DELETE FROM @S.checkpoint_writes w USING doomed d\n"
    "     WHERE w.thread_id = p_thread AND w.checkpoint_ns = d.checkpoint_ns\n"
    "       AND w.checkpoint_id = d.checkpoint_id;\n"
    "    DELETE FROM @S.checkpoint_blobs b WHERE b.thread_id = p_thread AND NOT EXISTS (\n"
    "        SELECT 1 FROM @S.checkpoints c, unnest(c.channels, c.versions) AS u(ch, ver)\n"
    "         WHERE c.thread_id = p_thread AND c.checkpoint_ns = b.checkpoint_ns\n"
    "           AND u.ch = b.channel AND u.ver = b.version);\n"
    "END\n"
    "$fn$;\n"
    "CREATE OR REPLACE FUNCTION @S.thread_delete(p_thread text) RETURNS boolean\n"
    "LANGUAGE plpgsql AS $fn$\n"
    "BEGIN\n"
    "    -- wait for appenders and writers first, so nothing they commit is left behind\n"
    "    PERFORM 1 FROM @S.threads t WHERE t.thread_id = p_thread FOR UPDATE;\n"
    "    IF NOT FOUND THEN\n"
    "        RETURN false;\n"
    "    END IF;\n"
    "    DELETE FROM @S.messages m WHERE m.thread_id = p_thread;\n"
    "    DELETE FROM @S.idempotency_keys k WHERE k.thread_id = p_thread;\n"
    "    DELETE FROM @S.checkpoint_writes w WHERE w.thread_id = p_thread;\n"
    "    DELETE FROM @S.checkpoint_blobs b WHERE b.thread_id = p_thread;\n"
    "    DELETE FROM @S.checkpoints c WHERE c.thread_id = p_thread;\n"
    "    DELETE FROM @S.threads t WHERE t.thread_id = p_thread;\n"
    "    RETURN true;\n"
    "END\n"
    "$fn$;\n",
    /* 3: restoring dumps (convo import, convo copy) */
    "CREATE FUNCTION @S.thread_import(p_thread text, p_first bigint, p_bodies bytea[],\n"
    "    p_roles text[], p_at timestamptz[]) RETURNS boolean\n"
    "LANGUAGE plpgsql AS $fn$\n"
    "DECLARE\n"
    "    n integer := cardinality(p_bodies);\n"
    "    len bigint;\n"
    "BEGIN\n"
    "    LOOP\n"
    "        SELECT t.length INTO len FROM @S.threads t\n"
    "         WHERE t.thread_id = p_thread FOR UPDATE;\n"
    "        EXIT WHEN FOUND;\n"
    "        INSERT INTO @S.threads (thread_id, created_at, updated_at)\n"
    "        VALUES (p_thread, p_at[1], p_at[1]) ON CONFLICT (thread_id) DO NOTHING;\n"
    "    END LOOP;\n"
    "    IF len >= p_first + n THEN\n"
    "        RETURN true; -- imported before: skipped\n"
    "    END IF;\n"
    "    IF len <> p_first THEN\n"
    "        RAISE EXCEPTION USING ERRCODE = 'CV409', MESSAGE = format(\n"
    "            'thread has %s messages, the dump continues at %s', len, p_first);\n"
    "    END IF;\n"
    "    UPDATE @S.threads t SET length = len + n,\n"
    "        updated_at = greatest(t.updated_at, p_at[n]) WHERE t.thread_id = p_thread;\n"
    "    INSERT INTO @S.messages (thread_id, seq, role, created_at, body)\n"
    "    SELECT p_thread, len + u.o - 1, u.r, u.a, u.b\n"
    "      FROM unnest(p_bodies, p_roles, p_at) WITH ORDINALITY AS u(b, r, a, o);\n"
    "    RETURN false;\n"
    "END\n"
    "$fn$;\n",
    /* 4: ttl (threads.expires_at, sweep). extra moves to a table of its own, so
     * that the row every append rewrites is narrow; fillfactor 50 leaves room on
     * its page for that new version (a HOT update: no index touched). The
     * functions that write take the store's ttl (p_ttl; NULL: none). */
    "CREATE TABLE @S.thread_extra (\n"
    "    thread_id text COLLATE \"C\" NOT NULL,\n"
    "    extra     jsonb NOT NULL,\n"
    "    PRIMARY KEY (thread_id));\n"
    "INSERT INTO @S.thread_extra (thread_id, extra)\n"
    "SELECT t.thread_id, t.extra FROM @S.threads t WHERE t.extra <> '{}'::jsonb;\n"
    "DROP FUNCTION @S.append(text, bytea[], text[], timestamptz, text, bigint);\n"
    "DROP FUNCTION @S.save_extra(text, jsonb, bigint);\n"
    "DROP FUNCTION @S.thread_delete(text);\n"
    "DROP FUNCTION @S.thread_fork(text, text, bigint);\n"
    "DROP FUNCTION @S.checkpoint_put(text, text, text, text, jsonb, text, bytea, bigint,\n"
    "    text[], text[], text[], bytea[], timestamptz);\n"
    "DROP FUNCTION @S.checkpoint_put_writes(text, text, text, text, text, bigint[], text[],\n"
    "    text[], bytea[]);\n"
    "DROP FUNCTION @S.checkpoint_prune(text, bigint);\n"
    "DROP FUNCTION @S.thread_import(text, bigint, bytea[], text[], timestamptz[]);\n"
    "ALTER TABLE @S.threads DROP COLUMN extra, ADD COLUMN expires_at timestamptz;\n"
    "ALTER TABLE @S.threads SET (fillfactor = 50);\n"
    /* partial: a write without ttl leaves it NULL, unchanged, so HOT stays possible */
    "CREATE INDEX threads_by_expiry ON @S.threads (expires_at) WHERE expires_at IS NOT NULL;\n"
        "CREATE FUNCTION @S.threads_purge(p_threads text[]) RETURNS void\n"
    "LANGUAGE plpgsql AS $fn$\n"
    "BEGIN\n"
    "    DELETE FROM @S.messages m WHERE m.thread_id = ANY (p_threads);\n"
    "    DELETE FROM @S.idempotency_keys k WHERE k.thread_id = ANY (p_threads);\n"
    "    DELETE FROM @S.checkpoint_writes w WHERE w.thread_id = ANY (p_threads);\n"
    "    DELETE FROM @S.checkpoint_blobs b WHERE b.thread_id = ANY (p_threads);\n"
    "    DELETE FROM @S.checkpoints c WHERE c.thread_id = ANY (p_threads);\n"
    "    DELETE FROM @S.thread_extra x WHERE x.thread_id = ANY (p_threads);\n"
    "    DELETE FROM @S.threads t WHERE t.thread_id = ANY (p_threads);\n"
    "END\n"
    "$fn$;\n"
    /* Locks a thread's row for a write: creates a missing thread, starts one whose
     * deadline has passed afresh (its remains go), records the write's time and
     * deadline, and with p_checkpoint takes the next checkpoint position. */
    "CREATE FUNCTION @S.thread_claim(p_thread text, p_ttl interval, p_at timestamptz,\n"
    "    p_checkpoint boolean, OUT length bigint, OUT checkpoint_seq bigint)\n"
    "LANGUAGE plpgsql AS $fn$\n"
    "DECLARE\n"
    "    step bigint := CASE WHEN p_checkpoint THEN 1 ELSE 0 END;\n"
    "BEGIN\n"
    "    -- a row that is not updated (its deadline passed) is locked all the same\n"
    "    INSERT INTO @S.threads AS t (thread_id, created_at, updated_at, expires_at,\n"
    "        checkpoint_seq)\n"
    "    VALUES (p_thread, p_at, p_at, now() + p_ttl, step)\n"
    "    ON CONFLICT (thread_id) DO UPDATE SET\n"
    "        updated_at = greatest(t.updated_at, excluded.updated_at),\n"
    "        expires_at = excluded.expires_at, checkpoint_seq = t.checkpoint_seq + step\n"
    "     WHERE t.expires_at IS NULL OR t.expires_at > now()\n"
    "    RETURNING t.length, t.checkpoint_seq INTO length, checkpoint_seq;\n"
    "    IF NOT FOUND THEN\n"
    "        PERFORM @S.threads_purge(ARRAY[p_thread]);\n"
    "        INSERT INTO @S.threads (thread_id, created_at, updated_at, expires_at,\n"
    "            checkpoint_seq)\n"
    "        VALUES (p_thread, p_at, p_at, now() + p_ttl, step);\n"
    "        length := 0;\n"
    "        checkpoint_seq := step;\n"
    "    END IF;\n"
    "END\n"
    "$fn$;\n"
    /* Live: the thread exists and its deadline, if any, has not passed. Locks
     * its row in the given mode; records the deadline of a write when asked. */
    "CREATE FUNCTION @S.thread_live(p_thread text, p_ttl interval, p_share boolean)\n"
    "RETURNS boolean\n"
    "LANGUAGE plpgsql AS $fn$\n"
    "DECLARE\n"
    "    deadline timestamptz;\n"
    "BEGIN\n"
    "    IF p_share THEN\n"
    "        SELECT t.expires_at INTO deadline FROM @S.threads t\n"
    "         WHERE t.thread_id = p_thread FOR KEY SHARE;\n"
    "    ELSE\n"
    "        SELECT t.expires_at INTO deadline FROM @S.threads t\n"
    "         WHERE t.thread_id = p_thread FOR UPDATE;\n"
    "    END IF;\n"
    "    IF NOT FOUND OR deadline <= now() THEN\n"
    "        RETURN false;\n"
    "    END IF;\n"
    "    -- without ttl and without a deadline there is nothing to record\n"
    "    IF p_ttl IS NOT NULL OR deadline IS NOT NULL THEN\n"
    "        UPDATE @S.threads t SET expires_at = now() + p_ttl\n"
    "         WHERE t.thread_id = p_thread;\n"
    "    END IF;\n"
    "    RETURN true;\n"
    "END\n"
    "$fn$;\n"
    "CREATE FUNCTION @S.append(p_thread text, p_bodies bytea[], p_roles text[],\n"
    "    p_at timestamptz, p_key text, p_expected bigint, p_ttl interval,\n"
    "    OUT first_seq bigint, OUT count integer, OUT replayed boolean)\n"
    "LANGUAGE plpgsql AS $fn$\n"
    "DECLARE\n"
    "    n integer := cardinality(p_bodies);\n"
    "    len bigint;\n"
    "BEGIN\n"
    "    SELECT c.length INTO len FROM @S.thread_claim(p_thread, p_ttl, p_at, false) c;\n"
    "    -- the row lock is held: this statement's snapshot sees every\n"
    "    -- committed key of the thread\n"
    "    IF p_key IS NOT NULL THEN\n"
    "        SELECT k.first_seq, k.count INTO first_seq, count\n"
    "          FROM @S.idempotency_keys k WHERE k.thread_id = p_thread AND k.key = p_key;\n"
    "        IF FOUND THEN\n"
    "            replayed := true;\n"
    "            RETURN;\n"
    "        END IF;\n"
    "    END IF;\n"
    "    IF p_expected >= 0 AND p_expected <> len THEN\n"
    "        RAISE EXCEPTION USING ERRCODE = 'CV409',\n"
    "            MESSAGE = format('thread has %s messages, expected %s', len, p_expected);\n"
    "    END IF;\n"
    "    UPDATE @S.threads t SET length = len + n WHERE t.thread_id = p_thread;\n"
    "    INSERT INTO @S.messages (thread_id, seq, role, created_at, body)\n"
    "    SELECT p_thread, len + u.o - 1, u.r, p_at, u.b\n"
    "      FROM unnest(p_bodies, p_roles) WITH ORDINALITY AS u(b, r, o);\n"
    "    IF p_key IS NOT NULL THEN\n"
    "        INSERT INTO @S.idempotency_keys (thread_id, key, first_seq, count)\n"
    "        VALUES (p_thread, p_key, len, n);\n"
    "    END IF;\n"
    "    first_seq := len;\n"
    "    count := n;\n"
    "    replayed := false;\n"
    "END\n"
    "$fn$;\n"
    "CREATE FUNCTION @S.save_extra(p_thread text, p_patch jsonb, p_max bigint, p_ttl interval)\n"
    "RETURNS void\n"
    "LANGUAGE plpgsql AS $fn$\n"
    "DECLARE\n"
    "    merged jsonb;\n"
    "    size bigint;\n"
    "BEGIN\n"
    "    PERFORM @S.thread_claim(p_thread, p_ttl, now(), false);\n"
    "    INSERT INTO @S.thread_extra AS x (thread_id, extra) VALUES (p_thread, p_patch)\n"
    "    ON CONFLICT (thread_id) DO UPDATE SET extra = x.extra || excluded.extra\n"
    "    RETURNING x.extra INTO merged;\n"
    "    -- jsonb's text is never shorter than the compact form: count only when needed\n"
    "    IF octet_length(merged::text) > p_max THEN\n"
    "        size := @S.json_compact_size(merged);\n"
    "        IF size > p_max THEN\n"
    "            RAISE EXCEPTION USING ERRCODE = 'CV413', MESSAGE = format(\n"
    "                'merged extra of %s bytes would exceed the limit of %s bytes', size, p_max);\n"
    "        END IF;\n"
    "    END IF;\n"
    "END\n"
    "$fn$;\n"
    "CREATE FUNCTION @S.thread_delete(p_thread text) RETURNS boolean\n"
    "LANGUAGE plpgsql AS $fn$\n"
    "DECLARE\n"
    "    deadline timestamptz;\n"
    "BEGIN\n"
    "    -- wait for appenders and writers first, so nothing they commit is left behind\n"
    "    SELECT t.expires_at INTO deadline FROM @S.threads t\n"
    "     WHERE t.thread_id = p_thread FOR UPDATE;\n"
    "    IF NOT FOUND THEN\n"
    "        RETURN false;\n"
    "    END IF;\n"
    "    PERFORM @S.threads_purge(ARRAY[p_thread]);\n"
    "    -- one whose deadline had passed was not there any more: only its remains went\n"
    "    RETURN deadline IS NULL OR deadline > now();\n"
    "END\n"
    "$fn$;\n"
    "CREATE FUNCTION @S.thread_fork(p_src text, p_dst text, p_upto bigint, p_ttl interval)\n"
    "RETURNS void\n"
    "LANGUAGE plpgsql AS $fn$\n"
    "DECLARE\n"
    "    len bigint;\n"
    "    deadline timestamptz;\n"
    "    n bigint;\n"
    "BEGIN\n"
    "    SELECT t.length, t.expires_at INTO len, deadline FROM @S.threads t\n"
    "     WHERE t.thread_id = p_src FOR SHARE;\n"
    "    IF NOT FOUND OR deadline <= now() THEN\n"
    "        RAISE EXCEPTION USING ERRCODE = 'CV404', MESSAGE = 'source thread not found';\n"
    "    END IF;\n"
    "    n := CASE WHEN p_upto < 0 THEN len ELSE least(p_upto, len) END;\n"
    "    LOOP\n"
    "        INSERT INTO @S.threads (thread_id, length, expires_at)\n"
    "        VALUES (p_dst, n, now() + p_ttl) ON CONFLICT (thread_id) DO NOTHING;\n"
    "        EXIT WHEN FOUND;\n"
    "        -- a destination whose deadline has passed is not there: its remains go\n"
    "        SELECT t.expires_at INTO deadline FROM @S.threads t\n"
    "         WHERE t.thread_id = p_dst FOR UPDATE;\n"
    "        IF FOUND AND (deadline IS NULL OR deadline > now()) THEN\n"
    "            RAISE EXCEPTION USING ERRCODE = 'CV409',\n"
    "                MESSAGE = 'destination thread already exists';\n"
    "        END IF;\n"
    "        IF FOUND THEN\n"
    "            PERFORM @S.threads_purge(ARRAY[p_dst]);\n"
    "        END IF;\n"
    "    END LOOP;\n"
    "    IF p_upto > len THEN\n"
    "        RAISE EXCEPTION USING ERRCODE = 'CV400',\n"
    "            MESSAGE = format('fork upto %s is past the end (%s)', p_upto, len);\n"
    "    END IF;\n"
    "    INSERT INTO @S.thread_extra (thread_id, extra)\n"
    "    SELECT p_dst, x.extra FROM @S.thread_extra x WHERE x.thread_id = p_src;\n"
    "    INSERT INTO @S.messages (thread_id, seq, role, created_at, body)\n"
    "    SELECT p_dst, m.seq, m.role, m.created_at, m.body FROM @S.messages m\n"
    "     WHERE m.thread_id = p_src AND m.seq < n;\n"
    "END\n"
    "$fn$;\n"
    "CREATE FUNCTION @S.checkpoint_put(p_thread text, p_ns text, p_id text, p_parent text,\n"
    "    p_metadata jsonb, p_body_type text, p_body bytea, p_log_length bigint,\n"
    "    p_channels text[], p_versions text[], p_types text[], p_values bytea[],\n"
    "    p_at timestamptz, p_ttl interval) RETURNS void\n"
    "LANGUAGE plpgsql AS $fn$\n"
    "DECLARE\n"
    "    pos bigint;\n"
    "BEGIN\n"
    "    -- the thread row orders the puts of a thread and locks out prune and delete\n"
    "    SELECT c.checkpoint_seq INTO pos FROM @S.thread_claim(p_thread, p_ttl, p_at, true) c;\n"
    "    INSERT INTO @S.checkpoint_blobs\n"
    "        (thread_id, checkpoint_ns, channel, version, type, value)\n"
    "    SELECT p_thread, p_ns, u.c, u.v, u.t, u.b\n"
    "      FROM unnest(p_channels, p_versions, p_types, p_values) AS u(c, v, t, b)\n"
    "     WHERE u.t IS NOT NULL\n"
    "    ON CONFLICT DO NOTHING;\n"
    "    INSERT INTO @S.checkpoints AS c (thread_id, checkpoint_ns, checkpoint_id, put_seq,\n"
    "        parent_id, metadata, body_type, body, log_length, channels, versions, created_at)\n"
    "    VALUES (p_thread, p_ns, p_id, pos, p_parent, p_metadata, p_body_type, p_body,\n"
    "        p_log_length, p_channels, p_versions, p_at)\n"
    "    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET\n"
    "        parent_id = excluded.parent_id, metadata = excluded.metadata,\n"
    "        body_type = excluded.body_type, body = excluded.body,\n"
    "        log_length = excluded.log_length, channels = excluded.channels,\n"
    "        versions = excluded.versions;\n"
    "END\n"
    "$fn$;\n"
    "CREATE FUNCTION @S.checkpoint_put_writes(p_thread text, p_ns text, p_id text,\n"
    "    p_task text, p_path text, p_idx bigint[], p_channels text[], p_types text[],\n"
    "    p_values bytea[], p_ttl interval) RETURNS void\n"
    "LANGUAGE plpgsql AS $fn$\n"
    "BEGIN\n"
    "    -- a key-share lock: a concurrent delete or prune either ran first (and the\n"
    "    -- checkpoint is gone) or waits for these writes and sees them\n"
    "    IF NOT @S.thread_live(p_thread, p_ttl, true) THEN\n"
    "        RAISE EXCEPTION USING ERRCODE = 'CV404', MESSAGE = 'checkpoint not found';\n"
    "    END IF;\n"
    "    PERFORM 1 FROM @S.checkpoints c WHERE c.thread_id = p_thread\n"
    "       AND c.checkpoint_ns = p_ns AND c.checkpoint_id = p_id;\n"
    "    IF NOT FOUND THEN\n"
    "        RAISE EXCEPTION USING ERRCODE = 'CV404', MESSAGE = 'checkpoint not found';\n"
    "    END IF;\n"
    "    INSERT INTO @S.checkpoint_writes AS w (thread_id, checkpoint_ns, checkpoint_id,\n"
    "        task_id, idx, task_path, channel, type, value)\n"
    "    SELECT p_thread, p_ns, p_id, p_task, u.i, p_path, u.c, u.t, u.b\n"
    "      FROM unnest(p_idx, p_channels, p_types, p_values) AS u(i, c, t, b)\n"
    "    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) DO UPDATE SET\n"
    "        task_path = excluded.task_path, channel = excluded.channel,\n"
    "        type = excluded.type, value = excluded.value\n"
    "     WHERE excluded.idx < 0;\n"
    "END\n"
    "$fn$;\n"
    "CREATE FUNCTION @S.checkpoint_prune(p_thread text, p_keep bigint, p_ttl interval)\n"
    "RETURNS void\n"
    "LANGUAGE plpgsql AS $fn$\n"
    "BEGIN\n"
    "    IF NOT @S.thread_live(p_thread, p_ttl, false) THEN\n"
    "        RAISE EXCEPTION USING ERRCODE = 'CV404', MESSAGE = 'thread not found';\n"
    "    END IF;\n"
    "    WITH doomed AS (\n"
    "        DELETE FROM @S.checkpoints c\n"
    "         USING (SELECT x.checkpoint_ns, x.checkpoint_id FROM (\n"
    "                SELECT k.checkpoint_ns, k.checkpoint_id, row_number() OVER (\n"
    "                       PARTITION BY k.checkpoint_ns ORDER BY k.put_seq DESC) AS rn\n"
    "                  FROM @S.checkpoints k WHERE k.thread_id = p_thread) x\n"
    "                WHERE x.rn > p_keep) d\n"
    "         WHERE c.thread_id = p_thread AND c.checkpoint_ns = d.checkpoint_ns\n"
    "           AND c.checkpoint_id = d.checkpoint_id\n"
    "        RETURNING c.checkpoint_ns, c.checkpoint_id)\n"
    "    DELETE FROM @S.checkpoint_writes w USING doomed d\n"
    "     WHERE w.thread_id = p_thread AND w.checkpoint_ns = d.checkpoint_ns\n"
    "       AND w.checkpoint_id = d.checkpoint_id;\n"
    "    DELETE FROM @S.checkpoint_blobs b WHERE b.thread_id = p_thread AND NOT EXISTS (\n"
    "        SELECT 1 FROM @S.checkpoints c, unnest(c.channels, c.versions) AS u(ch, ver)\n"
    "         WHERE c.thread_id = p_thread AND c.checkpoint_ns = b.checkpoint_ns\n"
    "           AND u.ch = b.channel AND u.ver = b.version);\n"
    "END\n"
    "$fn$;\n"
    "CREATE FUNCTION @S.thread_import(p_thread text, p_first bigint, p_bodies bytea[],\n"
    "    p_roles text[], p_at timestamptz[], p_ttl interval) RETURNS boolean\n"
    "LANGUAGE plpgsql AS $fn$\n"
    "DECLARE\n"
    "    n integer := cardinality(p_bodies);\n"
    "    len bigint;\n"
    "BEGIN\n"
    "    SELECT c.length INTO len FROM @S.thread_claim(p_thread, p_ttl, p_at[1], false) c;\n"
    "    IF len >= p_first + n THEN\n"
    "        RETURN true; -- imported before: skipped\n"
    "    END IF;\n"
    "    IF len <> p_first THEN\n"
    "        RAISE EXCEPTION USING ERRCODE = 'CV409', MESSAGE = format(\n"
    "            'thread has %s messages, the dump continues at %s', len, p_first);\n"
    "    END IF;\n"
    "    UPDATE @S.threads t SET length = len + n,\n"
    "        updated_at = greatest(t.updated_at, p_at[n]) WHERE t.thread_id = p_thread;\n"
    "    INSERT INTO @S.messages (thread_id, seq, role, created_at, body)\n"
    "    SELECT p_thread, len + u.o - 1, u.r, u.a, u.b\n"
    "      FROM unnest(p_bodies, p_roles, p_at) WITH ORDINALITY AS u(b, r, a, o);\n"
    "    RETURN false;\n"
    "END\n"
    "$fn$;\n"
    /* Removes up to p_limit threads whose deadline has passed, with all they
     * hold; a thread being written (locked) waits for the next sweep. */
    "CREATE FUNCTION @S.sweep(p_limit integer) RETURNS integer\n"
    "LANGUAGE plpgsql AS $fn$\n"
    "DECLARE\n"
    "    doomed text[];\n"
    "BEGIN\n"
    "    SELECT array_agg(s.thread_id) INTO doomed FROM (\n"
    "        SELECT t.thread_id FROM @S.threads t WHERE t.expires_at <= now()\n"
    "         ORDER BY t.expires_at LIMIT p_limit FOR UPDATE SKIP LOCKED) s;\n"
    "    IF doomed IS NULL THEN\n"
    "        RETURN 0;\n"
    "    END IF;\n"
    "    PERFORM @S.threads_purge(doomed);\n"
    "    RETURN cardinality(doomed);\n"
    "END\n"
    "$fn$;\n",
    /* 5: one put order for the whole store, so that a list `before` a checkpoint
     * of one thread compares with every thread's checkpoints: put_seq comes from
     * a sequence, started above every position the per-thread counters gave (a
     * thread's old checkpoints keep their order and come before its new ones;
     * threads.checkpoint_seq is no longer used). checkpoint_put_log: messages
     * and a checkpoint in one transaction. */
    "CREATE SEQUENCE @S.checkpoint_put_seq AS bigint;\n"
    "SELECT setval('@S.checkpoint_put_seq', greatest(\n"
    "    (SELECT max(c.put_seq) FROM @S.checkpoints c),\n"
    "    (SELECT max(t.checkpoint_seq) FROM @S.threads t), 0) + 1, false);\n"
    "CREATE OR REPLACE FUNCTION @S.checkpoint_put(p_thread text, p_ns text, p_id text,\n"
    "    p_parent text, p_metadata jsonb, p_body_type text, p_body bytea,\n"
    "    p_log_length bigint, p_channels text[], p_versions text[], p_types text[],\n"
    "    p_values bytea[], p_at timestamptz, p_ttl interval) RETURNS void\n"
    "LANGUAGE plpgsql AS $fn$\n"
    "BEGIN\n"
    "    -- the thread's row lock keeps prune and delete out; the position is taken\n"
    "    -- under it, so a later put of the same thread always gets a higher one\n"
    "    PERFORM @S.thread_claim(p_thread, p_ttl, p_at, false);\n"
    "    INSERT INTO @S.checkpoint_blobs\n"
    "        (thread_id, checkpoint_ns, channel, version, type, value)\n"
    "    SELECT p_thread, p_ns, u.c, u.v, u.t, u.b\n"
    "      FROM unnest(p_channels, p_versions, p_types, p_values) AS u(c, v, t, b)\n"
    "     WHERE u.t IS NOT NULL\n"
    "    ON CONFLICT DO NOTHING;\n"
    "    INSERT INTO @S.checkpoints AS c (thread_id, checkpoint_ns, checkpoint_id, put_seq,\n"
    "        parent_id, metadata, body_type, body, log_length, channels, versions, created_at)\n"
    "    VALUES (p_thread, p_ns, p_id, nextval('@S.checkpoint_put_seq'), p_parent,\n"
    "        p_metadata, p_body_type, p_body, p_log_length, p_channels, p_versions, p_at)\n"
    "    ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET\n"
    "        parent_id = excluded.parent_id, metadata = excluded.metadata,\n"
    "        body_type = excluded.body_type, body = excluded.body,\n"
    "        log_length = excluded.log_length, channels = excluded.channels,\n"
    "        versions = excluded.versions;\n"
    "END\n"
    "$fn$;\n"
    /* The append (no idempotency key, an expected length) and the put, in the
     * caller's one transaction: append's CV409 undoes both, a thread it created
     * included. */
    "CREATE FUNCTION @S.checkpoint_put_log(p_thread text, p_ns text, p_id text,\n"
    "    p_parent text, p_metadata jsonb, p_body_type text, p_body bytea,\n"
    "    p_log_length bigint, p_channels text[], p_versions text[], p_types text[],\n"
    "    p_values bytea[], p_bodies bytea[], p_roles text[], p_expected bigint,\n"
    "    p_at timestamptz, p_ttl interval) RETURNS void\n"
    "LANGUAGE plpgsql AS $fn$\n"
    "BEGIN\n"
    "    PERFORM @S.append(p_thread, p_bodies, p_roles, p_at, NULL, p_expected, p_ttl);\n"
    "    PERFORM @S.checkpoint_put(p_thread, p_ns, p_id, p_parent, p_metadata, p_body_type,\n"
    "        p_body, p_log_length, p_channels, p_versions, p_types, p_values, p_at, p_ttl);\n"
    "END\n"
    "$fn$;\n",
};
#define SCHEMA_VERSION ((int)(sizeof migrations / sizeof *migrations))

enum {
    ST_APPEND_ONE, ST_APPEND_MANY, ST_APPEND_ONE_IF, ST_APPEND_MANY_IF, ST_APPEND, ST_LOAD,
    ST_SAVE_EXTRA, ST_DELETE, ST_LIST, ST_FORK, ST_CP_PUT, ST_CP_WRITES, ST_CP_GET, ST_CP_LATEST,
    ST_CP_LIST, ST_CP_PRUNE, ST_IMPORT, ST_SWEEP, ST_CP_PUT_LOG,
    ST_COUNT
};

/* A thread row t is live when it has no deadline or its deadline is ahead. */
#define LIVE(t) " (" t ".expires_at IS NULL OR " t ".expires_at > now())"
/* The checkpoints c of live threads only. */
#define CP_LIVE " JOIN @S.threads t ON t.thread_id = c.thread_id AND" LIVE("t")

/* Checkpoint results, one row per item, ordered by checkpoint (r), then kind:
 * 0 the checkpoint itself, 1 a channel and its value, 2 a pending write.
 * Columns: kind, r, thread_id, ns, id, s1, s2, s3, n, at, type, value. */
#define CP_ROWS                                                                              \
    " SELECT 0 AS kind, s.r, s.thread_id, s.checkpoint_ns, s.checkpoint_id, s.parent_id,"     \
    "  s.metadata::text, NULL::text, s.log_length, s.created_at, s.body_type, s.body"        \
    "  FROM sel s"                                                                           \
    " UNION ALL SELECT 1, s.r, NULL, NULL, NULL, u.ch, u.ver, NULL, NULL, NULL, v.type,"      \
    "  v.value FROM sel s CROSS JOIN LATERAL unnest(s.channels, s.versions) AS u(ch, ver)"    \
    "  LEFT JOIN @S.checkpoint_blobs v ON v.thread_id = s.thread_id"                          \
    "  AND v.checkpoint_ns = s.checkpoint_ns AND v.channel = u.ch AND v.version = u.ver"       \
    " UNION ALL SELECT 2, s.r, NULL, NULL, NULL, w.task_id, w.task_path, w.channel, w.idx,"   \
    "  NULL, w.type, w.value FROM sel s JOIN @S.checkpoint_writes w"                          \
    "  ON w.thread_id = s.thread_id AND w.checkpoint_ns = s.checkpoint_ns"                    \
    "  AND w.checkpoint_id = s.checkpoint_id"

/* Appends without an idempotency key, in one statement ($1 thread, $2 body or
 * bodies, $3 role or roles, $4 created_at, $5 expected length, $6 ttl). The
 * first part takes the thread's row lock, checks the length (rechecked on the
 * latest row when it had to wait) and the deadline, and allocates the seqs:
 * with no expected length (or 0) an upsert, which also creates a new thread;
 * with one, an update (a missing thread has length 0). The insert uses them.
 * No row back (a length mismatch, a thread whose deadline has passed) sends
 * the call to @S.append(). A write without ttl clears a deadline: as NULL
 * stays NULL, the update stays HOT. */
#define ALLOC_UPSERT(n)                                                                      \
    "WITH alloc AS (INSERT INTO @S.threads AS t (thread_id, length, created_at, updated_at,"  \
    " expires_at) VALUES ($1::text, " n ", $4::timestamptz, $4::timestamptz,"                \
    " now() + $6::interval) ON CONFLICT (thread_id) DO UPDATE SET length = t.length + " n     \
    ", updated_at = excluded.updated_at, expires_at = excluded.expires_at"                    \
    " WHERE ($5::int8 < 0 OR t.length = $5::int8) AND" LIVE("t")                              \
    " RETURNING t.length - " n " AS first_seq)"
#define ALLOC_UPDATE(n)                                                                      \
    "WITH alloc AS (UPDATE @S.threads t SET length = t.length + " n ","                       \
    " updated_at = $4::timestamptz, expires_at = now() + $6::interval"                         \
    " WHERE t.thread_id = $1::text AND t.length = $5::int8 AND" LIVE("t")                     \
    " RETURNING t.length - " n " AS first_seq)"
/* One message: scalars, the seq back. */
#define INSERT_ONE                                                                           \
    " INSERT INTO @S.messages (thread_id, seq, role, created_at, body)"                      \
    " SELECT $1::text, a.first_seq, $3::text, $4::timestamptz, $2::bytea FROM alloc a"       \
    " RETURNING seq"
#define INSERT_MANY                                                                          \
    ", ins AS (INSERT INTO @S.messages (thread_id, seq, role, created_at, body)"             \
    " SELECT $1::text, a.first_seq + u.o - 1, u.r, $4::timestamptz, u.b FROM alloc a,"        \
    " unnest($2::bytea[], $3::text[]) WITH ORDINALITY AS u(b, r, o))"                         \
    " SELECT first_seq FROM alloc"
#define MANY "cardinality($2::bytea[])"

static const struct {
    const char *name;
    int nparams;
    const char *sql;
} statements[ST_COUNT] = {
    [ST_APPEND_ONE] = {"convo_append_one", 6, ALLOC_UPSERT("1") INSERT_ONE},
    [ST_APPEND_MANY] = {"convo_append_many", 6, ALLOC_UPSERT(MANY) INSERT_MANY},
    [ST_APPEND_ONE_IF] = {"convo_append_one_if", 6, ALLOC_UPDATE("1") INSERT_ONE},
    [ST_APPEND_MANY_IF] = {"convo_append_many_if", 6, ALLOC_UPDATE(MANY) INSERT_MANY},
    [ST_APPEND] = {"convo_append", 7,
                   "SELECT first_seq, count, replayed FROM @S.append($1::text, $2::bytea[], "
                   "$3::text[], $4::timestamptz, $5::text, $6::int8, $7::interval)"},
    /* One snapshot for length, extra and the range: the tail and limit are
     * resolved against the length read in the same statement. The extra
     * rides on the first row only (the subquery runs for that row only). No
     * outer ORDER BY: the lateral join runs the ordered index scan once for
     * the one thread row, and a sort there would copy every body (load_rows
     * checks the order). */
    [ST_LOAD] = {"convo_load", 5,
                 "SELECT r.length, CASE WHEN $5::bool AND (m.seq IS NULL OR m.seq = r.f)"
                 " THEN coalesce((SELECT x.extra::text FROM @S.thread_extra x"
                 "  WHERE x.thread_id = $1::text), '{}') END,"
                 " m.seq, m.role, m.created_at, m.body"
                 " FROM (SELECT t.length, b.f,"
                 "  CASE WHEN $3::int8 > 0 AND $3::int8 < t.length - b.f THEN b.f + $3::int8"
                 "  ELSE t.length END AS e"
                 "  FROM @S.threads t, LATERAL (SELECT least(greatest($2::int8,"
                 "   CASE WHEN $4::int8 > 0 THEN t.length - $4::int8 ELSE 0 END), t.length)"
                 "   AS f) b"
                 "  WHERE t.thread_id = $1::text AND" LIVE("t") ") r"
                 " LEFT JOIN LATERAL (SELECT seq, role, created_at, body FROM @S.messages"
                 "  WHERE thread_id = $1::text AND seq >= r.f AND seq < r.e ORDER BY seq) m"
                 " ON true"},
    [ST_SAVE_EXTRA] = {"convo_save_extra", 4,
                       "SELECT @S.save_extra($1::text, $2::text::jsonb, $3::int8, $4::interval)"},
    [ST_DELETE] = {"convo_delete", 1, "SELECT @S.thread_delete($1::text)"},
    [ST_LIST] = {"convo_list", 2,
                 "SELECT thread_id FROM @S.threads t WHERE thread_id > $1::text AND" LIVE("t")
                 " ORDER BY thread_id LIMIT $2::int8"},
    [ST_FORK] = {"convo_fork", 4,
                 "SELECT @S.thread_fork($1::text, $2::text, $3::int8, $4::interval)"},
    [ST_CP_PUT] = {"convo_cp_put", 14,
                   "SELECT @S.checkpoint_put($1::text, $2::text, $3::text, $4::text,"
                   " $5::text::jsonb, $6::text, $7::bytea, $8::int8, $9::text[], $10::text[],"
                   " $11::text[], $12::bytea[], $13::timestamptz, $14::interval)"},
    [ST_CP_WRITES] = {"convo_cp_writes", 10,
                      "SELECT @S.checkpoint_put_writes($1::text, $2::text, $3::text, $4::text,"
                      " $5::text, $6::int8[], $7::text[], $8::text[], $9::bytea[], $10::interval)"},
    [ST_CP_GET] = {"convo_cp_get", 3,
                   "WITH sel AS (SELECT c.*, 0::int8 AS r FROM @S.checkpoints c" CP_LIVE
                   " WHERE c.thread_id = $1::text AND c.checkpoint_ns = $2::text"
                   " AND c.checkpoint_id = $3::text)" CP_ROWS " ORDER BY 2, 1"},
    [ST_CP_LATEST] = {"convo_cp_latest", 2,
                      "WITH sel AS (SELECT c.*, 0::int8 AS r FROM @S.checkpoints c" CP_LIVE
                      " WHERE c.thread_id = $1::text AND c.checkpoint_ns = $2::text"
                      " ORDER BY c.put_seq DESC LIMIT 1)" CP_ROWS " ORDER BY 2, 1"},
    /* Newest first per thread, threads in id order; kind 9 says `before` ($3,
     * of thread $6 and namespace $7) names no checkpoint. put_seq is one order
     * for the whole store, so `before` compares with every thread's. */
    [ST_CP_LIST] = {"convo_cp_list", 7,
                    "WITH bp AS (SELECT min(c.put_seq) AS p FROM @S.checkpoints c" CP_LIVE
                    "  WHERE $3::text IS NOT NULL AND c.thread_id = $6::text"
                    "  AND c.checkpoint_ns = $7::text AND c.checkpoint_id = $3::text),"
                    " sel AS (SELECT c.*, row_number() OVER (ORDER BY c.thread_id,"
                    "  c.put_seq DESC) AS r FROM @S.checkpoints c" CP_LIVE ", bp"
                    "  WHERE ($1::text IS NULL OR c.thread_id = $1::text)"
                    "  AND ($2::text IS NULL OR c.checkpoint_ns = $2::text)"
                    "  AND ($3::text IS NULL OR c.put_seq < bp.p)"
                    "  AND ($4::text IS NULL OR c.metadata @> $4::text::jsonb)"
                    "  ORDER BY c.thread_id, c.put_seq DESC LIMIT $5::int8)" CP_ROWS
                    " UNION ALL SELECT 9, 0, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL,"
                    "  NULL, NULL FROM bp WHERE $3::text IS NOT NULL AND bp.p IS NULL"
                    " ORDER BY 2, 1"},
    [ST_CP_PRUNE] = {"convo_cp_prune", 3,
                     "SELECT @S.checkpoint_prune($1::text, $2::int8, $3::interval)"},
    [ST_IMPORT] = {"convo_import", 6,
                   "SELECT @S.thread_import($1::text, $2::int8, $3::bytea[], $4::text[],"
                   " $5::timestamptz[], $6::interval)"},
    [ST_SWEEP] = {"convo_sweep", 1, "SELECT @S.sweep($1::int4)"},
    [ST_CP_PUT_LOG] = {"convo_cp_put_log", 17,
                       "SELECT @S.checkpoint_put_log($1::text, $2::text, $3::text, $4::text,"
                       " $5::text::jsonb, $6::text, $7::bytea, $8::int8, $9::text[],"
                       " $10::text[], $11::text[], $12::bytea[], $13::bytea[], $14::text[],"
                       " $15::int8, $16::timestamptz, $17::interval)"},
};

/* ---------------------------------------------------------------- backend */

typedef struct pg_conn {
    PGconn *pg;
    unsigned prepared; /* bit i: statements[i] is prepared on this connection */
    int fatal;         /* the server said FATAL while the connection was idle */
    int64_t done_at;   /* monotonic microseconds when its last call succeeded; 0: never */
} pg_conn;

struct convo_backend {
    convo_pool *pool;
    char *conninfo;     /* the URL for libpq: convo's parameters removed */
    char qschema[70];   /* "name", quoted */
    char schema[64];
    char *sql[ST_COUNT];
    convo_limits limits;
    char ttl_interval[16]; /* ttl=S as a binary interval parameter */
    const char *ttl;       /* ttl_interval, or NULL (SQL NULL) when threads never expire */
};

/* Replaces every @S in template with the quoted schema; caller frees. */
static char *with_schema(const convo_backend *b, const char *template)
{
    size_t n = 0, q = strlen(b->qschema);
    for (const char *p = template; *p; p++)
        n += (p[0] == '@' && p[1] == 'S') ? (p++, q) : 1;
    char *out = malloc(n + 1), *o = out;
    if (!out)
        return NULL;
    for (const char *p = template; *p; p++) {
        if (p[0] == '@' && p[1] == 'S') {
            memcpy(o, b->qschema, q);
            o += q;
            p++;
        } else {
            *o++ = *p;
        }
    }
    *o = '\0';
    return out;
}

/* SQLSTATE to convo code. CVxxx are raised by convo's own functions. */
static int code_for_state(const char *state, int broken)
{
    if (broken || !state)
        return CONVO_EIO;
    if (strcmp(state, "CV409") == 0)
        return CONVO_ECONFLICT;
    if (strcmp(state, "CV404") == 0)
        return CONVO_ENOTFOUND;
    if (strcmp(state, "CV413") == 0 || strcmp(state, "54000") == 0)
        return CONVO_ETOOLARGE;
    if (strcmp(state, "CV400") == 0)
        return CONVO_EINVAL;
    if (strcmp(state, "57014") == 0 || strcmp(state, "55P03") == 0)
        return CONVO_ETIMEOUT; /* statement or lock timeout */
    if (strcmp(state, "53200") == 0)
        return CONVO_ENOMEM;
    if (strncmp(state, "08", 2) == 0 || strncmp(state, "57P", 3) == 0 ||
        strncmp(state, "53", 2) == 0 || strncmp(state, "58", 2) == 0 ||
        strncmp(state, "40", 2) == 0)
        return CONVO_EIO; /* connection, shutdown, resources, retries used up */
    if (strncmp(state, "22", 2) == 0)
        return CONVO_EINVAL; /* data the server cannot store, e.g. in jsonb */
    return CONVO_ERROR;
}

/* Fills err from a failed result (or the connection when r is NULL). */
static int fail(const convo_backend *b, PGconn *pg, const PGresult *r, convo_error *err)
{
    const char *state = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = r ? PQresultErrorField(r, PG_DIAG_MESSAGE_PRIMARY) : NULL;
    int broken = !pg || PQstatus(pg) != CONNECTION_OK;
    if (!msg || broken)
        msg = pg ? PQerrorMessage(pg) : "out of memory";
    int code = code_for_state(state, broken); /* the core masks passwords in msg */
    if (state && state[0] == 'C' && state[1] == 'V')
        return convo__error(err, code, state, "%s", msg);
    return convo__error(err, code, state, "postgres: %s", msg);
}

/* Notices are not printed (no "schema already exists, skipping" on stderr);
 * a FATAL one, sent to an idle session, means the server is closing it. */
static void on_notice(void *arg, const PGresult *r)
{
    pg_conn *c = arg;
    const char *severity = PQresultErrorField(r, PG_DIAG_SEVERITY_NONLOCALIZED);
    if (severity && (strcmp(severity, "FATAL") == 0 || strcmp(severity, "PANIC") == 0))
        c->fatal = 1;
}

/* Every statement is its own transaction, written for READ COMMITTED: a row
 * lock, then statements (or a re-check) that see what the lock waited for.
 * A stricter default (a role's or the server's) would only make calls fail
 * with serialization errors under contention. */
static int session_setup(const convo_backend *b, PGconn *pg, convo_error *err)
{
    PGresult *r = PQexec(pg, "SET default_transaction_isolation TO 'read committed'");
    int rc = r && PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : fail(b, pg, r, err);
    PQclear(r);
    return rc;
}

static int pg_connect(void *ctx, void **out, convo_error *err)
{
    convo_backend *b = ctx;
    /* Later entries win over the URL (client_encoding); earlier ones are
     * defaults the URL may override (connect_timeout). */
    const char *keys[] = {"connect_timeout", "dbname", "client_encoding",
                          "fallback_application_name", NULL};
    const char *values[] = {"10", b->conninfo, "UTF8", "convo", NULL};
    pg_conn *c = calloc(1, sizeof *c);
    if (!c)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    c->pg = PQconnectdbParams(keys, values, 1);
    if (!c->pg || PQstatus(c->pg) != CONNECTION_OK) {
        int rc = fail(b, c->pg, NULL, err);
        PQfinish(c->pg);
        free(c);
        return rc;
    }
    PQsetNoticeReceiver(c->pg, on_notice, c);
    int rc = session_setup(b, c->pg, err);
    if (rc != 0) {
        PQfinish(c->pg);
        free(c);
        return rc;
    }
    *out = c;
    return 0;
}

static void pg_disconnect(void *ctx, void *conn)
{
    (void)ctx;
    pg_conn *c = conn;
    PQfinish(c->pg);
    free(c);
}

static const convo_pool_ops pool_ops = {pg_connect, pg_disconnect};

/* An idle connection has nothing to read: if it does, the server is closing
 * it (restart, pg_terminate_backend, idle timeout: a FATAL message, then end
 * of file) or sent a notification. Consume and look. */
static int conn_alive(pg_conn *c)
{
    struct pollfd pfd = {PQsocket(c->pg), POLLIN, 0};
    for (int i = 0; i < 4; i++) {
        if (c->fatal || PQstatus(c->pg) != CONNECTION_OK || pfd.fd < 0)
            return 0;
        if (poll(&pfd, 1, 0) <= 0)
            return 1;
        if (!PQconsumeInput(c->pg))
            return 0;
        PGnotify *note;
        while ((note = PQnotifies(c->pg)) != NULL)
            PQfreemem(note);
    }
    return !c->fatal && PQstatus(c->pg) == CONNECTION_OK;
}

static int64_t monotonic_micros(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* A connection from the pool, reconnected when the server dropped it idle.
 * One that answered less than FRESH_MICROS ago is not polled: a server
 * closing it in that moment is no different from one closing it during the
 * call (CONVO_EIO), and back-to-back calls save a system call each. */
static int conn_get(convo_backend *b, pg_conn **out, convo_error *err)
{
    void *conn;
    int rc = convo__pool_acquire(b->pool, &conn, err);
    if (rc != 0)
        return rc;
    pg_conn *c = conn;
    int fresh = c->done_at && monotonic_micros() - c->done_at < FRESH_MICROS && !c->fatal &&
                PQstatus(c->pg) == CONNECTION_OK;
    if (!fresh && !conn_alive(c)) {
        PQreset(c->pg);
        c->prepared = 0;
        c->fatal = 0;
        rc = PQstatus(c->pg) == CONNECTION_OK ? session_setup(b, c->pg, err)
                                               : fail(b, c->pg, NULL, err);
        if (rc != 0) {
            convo__pool_release(b->pool, c, true);
            return rc;
        }
    }
    *out = c;
    return 0;
}

static int is_state(const PGresult *r, const char *state)
{
    const char *s = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    return s && strcmp(s, state) == 0;
}

/* Formats of every parameter: binary. At least as many as the longest statement
 * (ST_CP_PUT_LOG, 17). */
static const int binary[20] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};

/* Reads results up to the NULL that ends the current query's. */
static void drain(PGconn *pg)
{
    PGresult *r;
    while ((r = PQgetResult(pg)) != NULL)
        PQclear(r);
}

/* The first run of st on a connection: Parse, Bind, Execute and one Sync in
 * one round trip (libpq pipeline mode) instead of a PQprepare round trip
 * first. Returns the Execute's result, or the Parse's when that failed (the
 * Execute is then skipped by the server); NULL when the connection broke or
 * could not leave pipeline mode (then c->fatal is set: it is not reused). */
static PGresult *exec_first(convo_backend *b, pg_conn *c, int st, const char *const *values,
                            const int *lengths)
{
    PGconn *pg = c->pg;
    const char *name = statements[st].name;
    if (!PQenterPipelineMode(pg))
        return NULL;
    PGresult *parse = NULL, *exec = NULL, *sync = NULL;
    if (PQsendPrepare(pg, name, b->sql[st], 0, NULL) &&
        PQsendQueryPrepared(pg, name, statements[st].nparams, values, lengths, binary, 1) &&
        PQpipelineSync(pg)) {
        if ((parse = PQgetResult(pg)) != NULL)
            drain(pg);
        if ((exec = PQgetResult(pg)) != NULL)
            drain(pg);
        sync = PQgetResult(pg);
    }
    int synced = sync && PQresultStatus(sync) == PGRES_PIPELINE_SYNC;
    PQclear(sync);
    if (!synced || !PQexitPipelineMode(pg)) {
        c->fatal = 1; /* out of step with the server: never reuse it */
        PQclear(parse);
        PQclear(exec);
        return NULL;
    }
    ExecStatusType ps = parse ? PQresultStatus(parse) : PGRES_FATAL_ERROR;
    if (ps == PGRES_COMMAND_OK || is_state(parse, "42P05")) { /* 42P05: it exists already */
        c->prepared |= 1u << st;
        PQclear(parse);
        if (ps == PGRES_COMMAND_OK)
            return exec;
        PQclear(exec); /* skipped: run it now */
        return PQexecPrepared(pg, name, statements[st].nparams, values, lengths, binary, 1);
    }
    PQclear(exec);
    return parse;
}

/* Runs prepared statement st with binary parameters and a binary result.
 * Serialization failures and deadlocks are retried: every statement is one
 * transaction, so a retry is safe. A dead connection is dropped. */
static int run(convo_backend *b, int st, const char *const *values, const int *lengths,
               PGresult **out, convo_error *err)
{
    _Static_assert(ST_COUNT <= 32, "one bit per statement in pg_conn.prepared");
    for (int attempt = 0;; attempt++) {
        pg_conn *c;
        int rc = conn_get(b, &c, err);
        if (rc != 0)
            return rc;
        PGresult *r = c->prepared & (1u << st)
                          ? PQexecPrepared(c->pg, statements[st].name, statements[st].nparams,
                                           values, lengths, binary, 1)
                          : exec_first(b, c, st, values, lengths);
        ExecStatusType status = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
        if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) {
            c->done_at = monotonic_micros();
            convo__pool_release(b->pool, c, false);
            *out = r;
            return 0;
        }
        int broken = PQstatus(c->pg) != CONNECTION_OK || c->fatal;
        int retry = !broken && attempt < MAX_RETRIES &&
                    (is_state(r, "40001") || is_state(r, "40P01") || is_state(r, "26000"));
        if (is_state(r, "26000")) /* prepared statement gone (DISCARD ALL, a pooler) */
            c->prepared &= ~(1u << st);
        if (!retry)
            rc = fail(b, c->pg, r, err);
        PQclear(r);
        convo__pool_release(b->pool, c, broken);
        if (!retry)
            return rc;
    }
}

/* ---------------------------------------------------------------- binary values */

static void put32(char *p, uint32_t v)
{
    p[0] = (char)(v >> 24);
    p[1] = (char)(v >> 16);
    p[2] = (char)(v >> 8);
    p[3] = (char)v;
}

static void put64(char *p, uint64_t v)
{
    put32(p, (uint32_t)(v >> 32));
    put32(p + 4, (uint32_t)v);
}

static uint64_t get_be(const char *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | (unsigned char)p[i];
    return v;
}

static int64_t get_int(const PGresult *r, int row, int col)
{
    int n = PQgetlength(r, row, col);
    uint64_t v = get_be(PQgetvalue(r, row, col), n);
    if (n == 4)
        return (int32_t)(uint32_t)v;
    return (int64_t)v;
}

/* A one-dimensional array in PostgreSQL's binary format (array_recv):
 * a header, then each element as length + bytes (-1 for NULL). */
typedef struct pg_array {
    char *buf;
    size_t len, cap;
    uint32_t count;
    int has_null;
    int failed; /* 1: out of memory, 2: over 1 GiB */
} pg_array;

static void array_start(pg_array *a, uint32_t elem_oid, size_t size_hint)
{
    memset(a, 0, sizeof *a);
    a->cap = 20 + size_hint;
    if (!(a->buf = malloc(a->cap))) {
        a->failed = 1;
        return;
    }
    put32(a->buf, 1);            /* one dimension */
    put32(a->buf + 8, elem_oid); /* +4: NULLs flag, +12: count, set at the end */
    put32(a->buf + 16, 1);       /* lower bound */
    a->len = 20;
}

/* bytes NULL: a NULL element. */
static void array_add(pg_array *a, const void *bytes, size_t len)
{
    if (a->failed)
        return;
    size_t need = a->len + 4 + (bytes ? len : 0);
    if (need >= (size_t)1 << 30) { /* PostgreSQL's cap on one value */
        a->failed = 2;
        return;
    }
    if (need > a->cap) {
        size_t cap = a->cap * 2 > need ? a->cap * 2 : need;
        char *grown = realloc(a->buf, cap);
        if (!grown) {
            a->failed = 1;
            return;
        }
        a->buf = grown;
        a->cap = cap;
    }
    put32(a->buf + a->len, bytes ? (uint32_t)len : UINT32_MAX);
    if (bytes && len)
        memcpy(a->buf + a->len + 4, bytes, len);
    a->len = need;
    a->has_null |= !bytes;
    a->count++;
}

/* The finished value, or NULL (freed) when it failed or grew past 1 GiB. */
static char *array_finish(pg_array *a, int *len)
{
    if (a->failed) {
        free(a->buf);
        return NULL;
    }
    put32(a->buf + 4, (uint32_t)a->has_null);
    put32(a->buf + 12, a->count);
    if (a->count == 0)
        put32(a->buf, 0); /* an empty array has no dimensions */
    *len = a->count ? (int)a->len : 12;
    return a->buf;
}

/* Copies the number token [tok, tok+n) to out. jsonb prints a real such as
 * 1e300 as a 301-digit integer, which JSON parsers (jansson) reject as too
 * big: such an integer, past 64 bits, is written back in exponent form. */
static size_t put_number(const char *tok, size_t n, char *out)
{
    size_t sign = tok[0] == '-', digits = n - sign;
    int integer = memchr(tok, '.', n) == NULL;
    const char *max = sign ? "9223372036854775808" : "9223372036854775807";
    if (!integer || digits < 19 || (digits == 19 && strncmp(tok + sign, max, 19) <= 0)) {
        memcpy(out, tok, n);
        return n;
    }
    size_t end = n, o = 0;
    while (end > sign + 1 && tok[end - 1] == '0')
        end--;
    if (sign)
        out[o++] = '-';
    out[o++] = tok[sign];
    if (end > sign + 1) {
        out[o++] = '.';
        memcpy(out + o, tok + sign + 1, end - sign - 1);
        o += end - sign - 1;
    }
    return o + (size_t)sprintf(out + o, "e%zu", digits - 1);
}

/* jsonb prints ", " and ": "; convo hands out compact JSON. Returns a
 * malloc'd NUL-terminated compact copy of column col, or NULL. */
static char *compact_json(const PGresult *r, int row, int col, size_t *len)
{
    const char *in = PQgetvalue(r, row, col);
    size_t n = (size_t)PQgetlength(r, row, col), o = 0;
    char *out = malloc(2 * n + 64); /* exponent forms may be longer */
    int in_string = 0, escaped = 0;
    for (size_t i = 0; out && i < n; i++) {
        char ch = in[i];
        if (in_string) {
            if (escaped)
                escaped = 0;
            else if (ch == '\\')
                escaped = 1;
            else if (ch == '"')
                in_string = 0;
        } else if (ch == '"') {
            in_string = 1;
        } else if (ch == ' ' && o > 0 && (out[o - 1] == ',' || out[o - 1] == ':')) {
            continue;
        } else if (ch == '-' || (ch >= '0' && ch <= '9')) {
            size_t end = i + 1;
            while (end < n && strchr("0123456789.eE+-", in[end]))
                end++;
            o += put_number(in + i, end - i, out + o);
            i = end - 1;
            continue;
        }
        out[o++] = ch;
    }
    if (out)
        out[o] = '\0';
    *len = o;
    return out;
}

/* ---------------------------------------------------------------- open, migrate */

/* /^[a-z_][a-z0-9_]{0,62}$/, not pg_*: safe to quote and use as is. */
static int valid_schema(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > 63 || !((s[0] >= 'a' && s[0] <= 'z') || s[0] == '_'))
        return 0;
    for (size_t i = 1; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '_'))
            return 0;
    return strncmp(s, "pg_", 3) != 0;
}

static int take_params(convo_backend *b, convo_url *url, convo_error *err)
{
    char *schema = convo__url_take(url, "schema");
    long long size = DEFAULT_POOL;
    int64_t seconds = 0;
    int rc = convo__url_take_int(url, "pool", 1, MAX_POOL, &size, err);
    if (rc == 0)
        rc = convo__url_take_ttl(url, &seconds, err);
    if (rc == 0 && schema && !valid_schema(schema))
        rc = convo__error(err, CONVO_EINVAL, NULL,
                          "postgres: schema must match [a-z_][a-z0-9_]{0,62} and not start "
                          "with pg_");
    snprintf(b->schema, sizeof b->schema, "%s", rc == 0 && schema ? schema : DEFAULT_SCHEMA);
    put64(b->ttl_interval, (uint64_t)seconds * 1000000);
    b->ttl = seconds > 0 ? b->ttl_interval : NULL;
    free(schema);
    snprintf(b->qschema, sizeof b->qschema, "\"%s\"", b->schema);
    if (rc == 0 && convo__pool_new(&b->pool, (size_t)size, &pool_ops, b) != 0)
        rc = convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    return rc;
}

/* Whatever is left must be a libpq connection option ("ssl" is libpq's
 * URI alias for sslmode=require). */
static int check_libpq_params(const convo_url *url, convo_error *err)
{
    PQconninfoOption *defaults = PQconndefaults();
    if (!defaults)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    int rc = 0;
    for (size_t i = 0; i < url->nparams && rc == 0; i++) {
        const char *key = url->params[i].key;
        int known = strcmp(key, "ssl") == 0;
        for (PQconninfoOption *o = defaults; o->keyword && !known; o++)
            known = strcmp(o->keyword, key) == 0;
        if (!known)
            rc = convo__error(err, CONVO_EINVAL, NULL,
                              "unknown URL parameter '%s' for %s: (neither convo's schema, "
                              "pool, ttl nor a libpq connection option)",
                              key, url->scheme);
    }
    PQconninfoFree(defaults);
    return rc;
}

static int exec_simple(const convo_backend *b, PGconn *pg, const char *sql, convo_error *err)
{
    PGresult *r = PQexec(pg, sql);
    ExecStatusType st = r ? PQresultStatus(r) : PGRES_FATAL_ERROR;
    int rc = (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK) ? 0 : fail(b, pg, r, err);
    PQclear(r);
    return rc;
}

/* The schema's version: 0 when it has no version table yet. */
static int read_version(const convo_backend *b, PGconn *pg, int *version, convo_error *err)
{
    char sql[160];
    snprintf(sql, sizeof sql, "SELECT coalesce(max(version), 0) FROM %s.schema_version",
             b->qschema);
    PGresult *r = PQexec(pg, sql);
    int rc = 0;
    if (is_state(r, "42P01") || is_state(r, "3F000"))
        *version = 0; /* no table, or no schema */
    else if (r && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
        *version = atoi(PQgetvalue(r, 0, 0));
    else
        rc = fail(b, pg, r, err);
    PQclear(r);
    if (rc == 0 && *version < 0)
        rc = convo__error(err, CONVO_ECORRUPT, NULL,
                          "postgres: schema %s records version %d; versions start at 1",
                          b->schema, *version);
    return rc;
}

static int apply_migrations(convo_backend *b, PGconn *pg, convo_error *err)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "BEGIN ISOLATION LEVEL READ COMMITTED;"
             " SELECT pg_advisory_xact_lock(%d, hashtext('%s'));"
             " CREATE SCHEMA IF NOT EXISTS %s;"
             " CREATE TABLE IF NOT EXISTS %s.schema_version (version integer PRIMARY KEY,"
             " applied_at timestamptz NOT NULL DEFAULT now())",
             MIGRATION_LOCK_CLASS, b->schema, b->qschema, b->qschema);
    int version = 0, rc = exec_simple(b, pg, sql, err);
    if (rc == 0)
        rc = read_version(b, pg, &version, err); /* again: another opener may have won */
    if (rc == 0 && version > SCHEMA_VERSION)
        rc = convo__error(err, CONVO_ENOTSUP, NULL,
                          "postgres: schema %s is at version %d, newer than this libconvo (%d)",
                          b->schema, version, SCHEMA_VERSION);
    for (int v = version + 1; rc == 0 && v <= SCHEMA_VERSION; v++) {
        char *script = with_schema(b, migrations[v - 1]);
        if (!script)
            return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
        rc = exec_simple(b, pg, script, err);
        free(script);
        snprintf(sql, sizeof sql, "INSERT INTO %s.schema_version (version) VALUES (%d)",
                 b->qschema, v);
        if (rc == 0)
            rc = exec_simple(b, pg, sql, err);
    }
    if (rc == 0)
        return exec_simple(b, pg, "COMMIT", err);
    if (PQstatus(pg) == CONNECTION_OK)
        PQclear(PQexec(pg, "ROLLBACK"));
    return rc;
}

static int migrate(convo_backend *b, convo_error *err)
{
    pg_conn *c;
    int rc = conn_get(b, &c, err);
    if (rc != 0)
        return rc;
    int version = 0;
    rc = read_version(b, c->pg, &version, err);
    if (rc == 0 && version > SCHEMA_VERSION)
        rc = convo__error(err, CONVO_ENOTSUP, NULL,
                          "postgres: schema %s is at version %d, newer than this libconvo (%d)",
                          b->schema, version, SCHEMA_VERSION);
    else if (rc == 0 && version < SCHEMA_VERSION)
        rc = apply_migrations(b, c->pg, err);
    convo__pool_release(b->pool, c, PQstatus(c->pg) != CONNECTION_OK || rc != 0);
    return rc;
}

static void pg_close(convo_backend *b)
{
    if (!b)
        return;
    convo__pool_free(b->pool);
    for (int i = 0; i < ST_COUNT; i++)
        free(b->sql[i]);
    free(b->conninfo);
    free(b);
}

/* A URI libpq cannot read is CONVO_EINVAL, found before connecting. */
static int check_uri(const convo_backend *b, convo_error *err)
{
    char *why = NULL;
    PQconninfoOption *parsed = PQconninfoParse(b->conninfo, &why);
    if (parsed) {
        PQconninfoFree(parsed);
        return 0;
    }
    int code = why ? CONVO_EINVAL : CONVO_ENOMEM;
    code = convo__error(err, code, NULL, "postgres: %s", why ? why : "out of memory");
    PQfreemem(why);
    return code;
}

static int setup(convo_backend *b, convo_url *url, convo_error *err)
{
    if (strncmp(url->rest, "//", 2) != 0)
        return convo__error(err, CONVO_EINVAL, NULL,
                            "postgres: expected %s://[user[:password]@]host[:port]/database",
                            url->scheme);
    int rc = take_params(b, url, err);
    if (rc == 0)
        rc = check_libpq_params(url, err);
    if (rc != 0)
        return rc;
    if (!(b->conninfo = convo__url_rebuild(url)))
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    if ((rc = check_uri(b, err)) != 0)
        return rc;
    for (int i = 0; i < ST_COUNT; i++)
        if (!(b->sql[i] = with_schema(b, statements[i].sql)))
            return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    return 0;
}

static int pg_open(convo_backend **out, convo_url *url, const convo_limits *limits,
                   convo_error *err)
{
    convo_backend *b = calloc(1, sizeof *b);
    if (!b)
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    b->limits = *limits;
    int rc = setup(b, url, err);
    if (rc == 0)
        rc = migrate(b, err);
    if (rc != 0) {
        pg_close(b);
        return rc;
    }
    *out = b;
    return 0;
}

/* ---------------------------------------------------------------- calls */

static int too_large_or_nomem(int rc, convo_error *err)
{
    if (rc == CONVO_ETOOLARGE)
        return convo__error(err, rc, NULL, "postgres: over 1 GiB in one parameter");
    return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
}

/* The message bodies (bytea[]) and their roles (text[]) as two array parameters. */
static int encode_batch(const convo_message_in *msgs, size_t n, char **bodies, int *blen,
                        char **roles, int *rlen)
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += 4 + msgs[i].len;
    pg_array b, r;
    array_start(&b, OID_BYTEA, total);
    array_start(&r, OID_TEXT, n * 16);
    for (size_t i = 0; i < n; i++) {
        array_add(&b, msgs[i].bytes, msgs[i].len);
        array_add(&r, msgs[i].role, strlen(msgs[i].role));
    }
    *bodies = array_finish(&b, blen);
    *roles = array_finish(&r, rlen);
    if (*bodies && *roles)
        return 0;
    free(*bodies);
    free(*roles);
    return b.failed == 2 || r.failed == 2 ? CONVO_ETOOLARGE : CONVO_ENOMEM;
}

/* The one-statement append (ST_APPEND_ONE, _MANY, or with an expected length
 * above 0, _IF); *done is 0 when the length is not the expected one or the
 * thread's deadline has passed. */
static int append_fast(convo_backend *b, const char *thread_id, const convo_message_in *msgs,
                       size_t n, const char *at, int64_t expected_length, int *done,
                       convo_append_result *res, convo_error *err)
{
    char expected[8];
    put64(expected, (uint64_t)expected_length);
    const char *values[6] = {thread_id, msgs[0].bytes, msgs[0].role, at, expected, b->ttl};
    int lens[6] = {(int)strlen(thread_id), (int)msgs[0].len, (int)strlen(msgs[0].role), 8, 8,
                   TTL_LEN};
    char *bodies = NULL, *roles = NULL;
    int rc = n > 1 ? encode_batch(msgs, n, &bodies, &lens[1], &roles, &lens[2])
                   : msgs[0].len >= (size_t)1 << 30 ? CONVO_ETOOLARGE : 0;
    if (rc != 0)
        return too_large_or_nomem(rc, err);
    if (n > 1) {
        values[1] = bodies;
        values[2] = roles;
    }
    PGresult *r;
    int st = expected_length > 0 ? (n == 1 ? ST_APPEND_ONE_IF : ST_APPEND_MANY_IF)
                                 : (n == 1 ? ST_APPEND_ONE : ST_APPEND_MANY);
    rc = run(b, st, values, lens, &r, err);
    free(bodies);
    free(roles);
    if (rc != 0)
        return rc;
    *done = PQntuples(r) == 1;
    if (*done) {
        res->first_seq = get_int(r, 0, 0);
        res->count = n;
        res->replayed = 0;
    }
    PQclear(r);
    return 0;
}

/* @S.append(): claims the thread (creating it, or starting it afresh when its
 * deadline has passed), checks the idempotency key, then the length. */
static int append_function(convo_backend *b, const char *thread_id,
                           const convo_message_in *msgs, size_t n, const char *at,
                           int64_t expected_length, const char *key, convo_append_result *res,
                           convo_error *err)
{
    char expected[8];
    put64(expected, (uint64_t)expected_length);
    int lens[7] = {(int)strlen(thread_id), 0, 0, 8, key ? (int)strlen(key) : 0, 8, TTL_LEN};
    char *bodies, *roles;
    int rc = encode_batch(msgs, n, &bodies, &lens[1], &roles, &lens[2]);
    if (rc != 0)
        return too_large_or_nomem(rc, err);
    const char *values[7] = {thread_id, bodies, roles, at, key, expected, b->ttl};
    PGresult *r;
    rc = run(b, ST_APPEND, values, lens, &r, err);
    free(bodies);
    free(roles);
    if (rc != 0)
        return rc;
    res->first_seq = get_int(r, 0, 0);
    res->count = (size_t)get_int(r, 0, 1);
    res->replayed = PQgetvalue(r, 0, 2)[0] != 0;
    PQclear(r);
    return 0;
}

static int pg_append(convo_backend *b, const char *thread_id, const convo_message_in *msgs,
                     size_t n, const convo_append_opts *opts, convo_append_result *res,
                     convo_error *err)
{
    char at[8];
    put64(at, (uint64_t)(convo__now_micros() - PG_EPOCH_MICROS));
    int64_t expected = opts->expected_length;
    int done = 0, rc = 0;
    if (!opts->idempotency_key) /* with a key, the key is looked up under the row lock */
        rc = append_fast(b, thread_id, msgs, n, at, expected, &done, res, err);
    if (rc == 0 && !done)
        rc = append_function(b, thread_id, msgs, n, at, expected, opts->idempotency_key, res,
                             err);
    return rc;
}

/* Fills h from the rows of ST_LOAD. CONVO_ECORRUPT unless they are exactly
 * the seqs [from, to) the options ask for, in order. */
static int load_rows(const PGresult *r, const convo_load_opts *opts, convo_history *h)
{
    int64_t length = get_int(r, 0, 0), from, to;
    convo__history_set_length(h, length);
    convo__load_range(opts, length, &from, &to);
    if (opts->with_extra && !PQgetisnull(r, 0, 1)) {
        size_t n;
        char *x = compact_json(r, 0, 1, &n);
        int rc = x ? convo__history_set_extra(h, x, n) : CONVO_ENOMEM;
        free(x);
        if (rc != 0)
            return CONVO_ENOMEM;
    }
    int rows = PQgetisnull(r, 0, 2) ? 0 : PQntuples(r); /* one NULL row: empty range */
    if (rows != to - from)
        return CONVO_ECORRUPT;
    if (convo__history_reserve(h, (size_t)rows) != 0)
        return CONVO_ENOMEM;
    for (int i = 0; i < rows; i++) {
        int64_t seq = get_int(r, i, 2), at = get_int(r, i, 4) + PG_EPOCH_MICROS;
        if (seq != from + i)
            return CONVO_ECORRUPT;
        if (convo__history_add(h, PQgetvalue(r, i, 5), (size_t)PQgetlength(r, i, 5),
                               PQgetvalue(r, i, 3), seq, at) != 0)
            return CONVO_ENOMEM;
    }
    return 0;
}

static int pg_load(convo_backend *b, const char *thread_id, const convo_load_opts *opts,
                   convo_history **out, convo_error *err)
{
    char from[8], limit[8], tail[8], with_extra = opts->with_extra ? 1 : 0;
    put64(from, (uint64_t)opts->from_seq);
    put64(limit, (uint64_t)opts->limit);
    put64(tail, (uint64_t)opts->tail);
    const char *values[5] = {thread_id, from, limit, tail, &with_extra};
    const int lens[5] = {(int)strlen(thread_id), 8, 8, 8, 1};
    PGresult *r;
    int rc = run(b, ST_LOAD, values, lens, &r, err);
    if (rc != 0)
        return rc;
    if (PQntuples(r) == 0) {
        PQclear(r);
        return convo__error(err, CONVO_ENOTFOUND, NULL, "thread not found");
    }
    convo_history *h = convo__history_new();
    rc = h ? load_rows(r, opts, h) : CONVO_ENOMEM;
    if (rc != 0) {
        PQclear(r);
        convo_history_free(h);
        if (rc == CONVO_ECORRUPT)
            return convo__error(err, rc, NULL, "postgres: messages missing or out of order");
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    }
    PQclear(r);
    *out = h;
    return 0;
}

static int pg_save_extra(convo_backend *b, const char *thread_id, const char *patch,
                         void *patch_obj, convo_error *err)
{
    (void)patch_obj;
    char max[8];
    put64(max, (uint64_t)b->limits.max_extra_bytes);
    const char *values[4] = {thread_id, patch, max, b->ttl};
    const int lens[4] = {(int)strlen(thread_id), (int)strlen(patch), 8, TTL_LEN};
    PGresult *r;
    int rc = run(b, ST_SAVE_EXTRA, values, lens, &r, err);
    if (rc == 0)
        PQclear(r);
    return rc;
}

static int pg_thread_delete(convo_backend *b, const char *thread_id, convo_error *err)
{
    const char *values[1] = {thread_id};
    const int lens[1] = {(int)strlen(thread_id)};
    PGresult *r;
    int rc = run(b, ST_DELETE, values, lens, &r, err);
    if (rc != 0)
        return rc;
    int found = PQgetvalue(r, 0, 0)[0] != 0;
    PQclear(r);
    return found ? 0 : convo__error(err, CONVO_ENOTFOUND, NULL, "thread not found");
}

static int pg_thread_list(convo_backend *b, const char *after, size_t limit,
                          convo_thread_page **out, convo_error *err)
{
    char lim[8];
    put64(lim, (uint64_t)limit + 1); /* one more tells whether there is a next page */
    const char *values[2] = {after ? after : "", lim};
    const int lens[2] = {(int)strlen(values[0]), 8};
    PGresult *r;
    int rc = run(b, ST_LIST, values, lens, &r, err);
    if (rc != 0)
        return rc;
    convo_thread_page *p = convo__thread_page_new();
    size_t rows = (size_t)PQntuples(r), shown = rows > limit ? limit : rows;
    for (size_t i = 0; p && rc == 0 && i < shown; i++)
        rc = convo__thread_page_add(p, PQgetvalue(r, (int)i, 0),
                                    (size_t)PQgetlength(r, (int)i, 0));
    if (p && rc == 0 && rows > limit)
        rc = convo__thread_page_set_next(p, PQgetvalue(r, (int)limit - 1, 0));
    PQclear(r);
    if (!p || rc != 0) {
        convo_thread_page_free(p);
        return convo__error(err, CONVO_ENOMEM, NULL, "out of memory");
    }
    *out = p;
    return 0;
}

static int pg_thread_fork(convo_backend *b, const char *src, const char *dst, int64_t upto,
                          convo_error *err)
{
    char up[8];
    put64(up, (uint64_t)upto);
    const char *values[4] = {src, dst, up, b->ttl};
    const int lens[4] = {(int)strlen(src), (int)strlen(dst), 8, TTL_LEN};
    PGresult *r;
    int rc = run(b, ST_FORK, values, lens, &r, err);
    if (rc == 0)
        PQclear(r);
    return rc;
}

/* ---------------------------------------------------------------- checkpoints */

static const void *bytes_or_empty(const void *bytes)
{
    return bytes ? bytes : ""; /* NULL would be an SQL NULL, not zero bytes */
}

/* Every channel's name and version, and type and value where it brings one. */
static int encode_channels(const convo_checkpoint_in *cp, char *out[4], int lens[4])
{
    size_t total = 0;
    for (size_t i = 0; i < cp->nchannels; i++)
        total += 4 + (cp->channels[i].value ? cp->channels[i].value->len : 0);
    pg_array a[4];
    array_start(&a[0], OID_TEXT, cp->nchannels * 16);
    array_start(&a[1], OID_TEXT, cp->nchannels * 16);
    array_start(&a[2], OID_TEXT, cp->nchannels * 16);
    array_start(&a[3], OID_BYTEA, total);
    for (size_t i = 0; i < cp->nchannels; i++) {
        const convo_channel_in *c = &cp->channels[i];
        array_add(&a[0], c->channel, strlen(c->channel));
        array_add(&a[1], c->version, strlen(c->version));
        array_add(&a[2], c->value ? c->value->type : NULL, c->value ? strlen(c->value->type) : 0);
        array_add(&a[3], c->value ? bytes_or_empty(c->value->bytes) : NULL,
                  c->value ? c->value->len : 0);
    }
    int rc = 0;
    for (int i = 0; i < 4; i++) {
        if (a[i].failed)
            rc = a[i].failed == 2 ? CONVO_ETOOLARGE : CONVO_ENOMEM;
        out[i] = array_finish(&a[i], &lens[i]);
    }
    if (rc != 0)
        for (int i = 0; i < 4; i++)
            free(out[i]), out[i] = NULL;
    return rc;
}

/* The parameters of @S.checkpoint_put, the store's ttl last (14); the
 * arrays are the caller's to free, also when this fails. */
typedef struct cp_params {
    const char *values[14];
    int lens[14];
    char *arrays[4];
    char log_length[8], at[8];
} cp_params;

static int checkpoint_params(const convo_backend *b, const convo_checkpoint_in *cp,
                             cp_params *p)
{
    int rc = encode_channels(cp, p->arrays, &p->lens[8]);
    if (rc != 0)
        return rc;
    put64(p->log_length, (uint64_t)cp->log_length);
    put64(p->at, (uint64_t)(convo__now_micros() - PG_EPOCH_MICROS));
    const char *values[14] = {cp->thread_id, cp->checkpoint_ns, cp->checkpoint_id,
                              cp->parent_id, cp->metadata_json, cp->body.type,
                              cp->body.type ? bytes_or_empty(cp->body.bytes) : NULL,
                              p->log_length, p->arrays[0], p->arrays[1], p->arrays[2],
                              p->arrays[3], p->at, b->ttl};
    memcpy(p->values, values, sizeof values);
    for (int i = 0; i < 6; i++)
        p->lens[i] = values[i] ? (int)strlen(values[i]) : 0;
    p->lens[6] = cp->body.type ? (int)cp->body.len : 0;
    p->lens[7] = 8;
    p->lens[12] = 8;
    p->lens[13] = TTL_LEN;
    return 0;
}

static void checkpoint_params_free(cp_params *p)
{
    for (int i = 0; i < 4; i++)
        free(p->arrays[i]);
}

static int pg_checkpoint_put(convo_backend *b, const convo_checkpoint_in *cp, convo_error *err)
{
    cp_params p = {0};
    int rc = checkpoint_params(b, cp, &p);
    if (rc != 0)
        return too_large_or_nomem(rc, err);
    PGresult *r;
    rc = run(b, ST_CP_PUT, p.values, p.lens, &r, err);
    checkpoint_params_free(&p);
    if (rc == 0)
        PQclear(r);
    return rc;
}

/* @S.checkpoint_put_log(): the checkpoint's parameters, the messages, the
 * expected length, then time and ttl; one statement, one transaction. */
static int pg_checkpoint_put_log(convo_backend *b, const convo_checkpoint_in *cp,
                                 const convo_message_in *msgs, convo_error *err)
{
    cp_params p = {0};
    char *bodies = NULL, *roles = NULL, expected[8];
    int blen = 0, rlen = 0;
    int rc = checkpoint_params(b, cp, &p);
    if (rc == 0)
        rc = encode_batch(msgs, cp->nmessages, &bodies, &blen, &roles, &rlen);
    if (rc != 0) {
        checkpoint_params_free(&p);
        return too_large_or_nomem(rc, err);
    }
    put64(expected, (uint64_t)cp->expected_length);
    const char *values[17];
    int lens[17];
    memcpy(values, p.values, 12 * sizeof *values);
    memcpy(lens, p.lens, 12 * sizeof *lens);
    values[12] = bodies, lens[12] = blen;
    values[13] = roles, lens[13] = rlen;
    values[14] = expected, lens[14] = 8;
    values[15] = p.values[12], lens[15] = p.lens[12]; /* at */
    values[16] = p.values[13], lens[16] = p.lens[13]; /* ttl */
    PGresult *r;
    rc = run(b, ST_CP_PUT_LOG, values, lens, &r, err);
    checkpoint_params_free(&p);
    free(bodies);
    free(roles);
    if (rc == 0)
        PQclear(r);
    return rc;
}

static int encode_writes(const convo_write_in *writes, size_t n, char *out[4], int lens[4])
{
    size_t total = 0;
    for (size_t i = 0; i < n; i++)
        total += 4 + writes[i].value.len;
    pg_array a[4];
    array_start(&a[0], OID_INT8, n * 12);
    array_start(&a[1], OID_TEXT, n * 16);
    array_start(&a[2], OID_TEXT, n * 16);
    array_start(&a[3], OID_BYTEA, total);
    for (size_t i = 0; i < n; i++) {
        char idx[8];
        put64(idx, (uint64_t)writes[i].idx);
        array_add(&a[0], idx, 8);
        array_add(&a[1], writes[i].channel, strlen(writes[i].channel));
        array_add(&a[2], writes[i].value.type, strlen(writes[i].value.type));
        array_add(&a[3], bytes_or_empty(writes[i].value.bytes), writes[i].value.len);
    }
    int rc = 0;
    for (int i = 0; i < 4; i++) {
        if (a[i].failed)
            rc = a[i].failed == 2 ? CONVO_ETOOLARGE : CONVO_ENOMEM;
        out[i] = array_finish(&a[i], &lens[i]);
    }
    if (rc != 0)
        for (int i = 0; i < 4; i++)
            free(out[i]), out[i] = NULL;
    return rc;
}

static int pg_checkpoint_put_writes(convo_backend *b, const char *thread_id, const char *ns,
                                    const char *checkpoint_id, const char *task_id,
                                    const char *task_path, const convo_write_in *writes,
                                    size_t n, convo_error *err)
{
    char *arrays[4];
    int lens[10];
    int rc = encode_writes(writes, n, arrays, &lens[5]);
    if (rc != 0)
        return too_large_or_nomem(rc, err);
    const char *values[10] = {thread_id, ns, checkpoint_id, task_id, task_path,
                              arrays[0], arrays[1], arrays[2], arrays[3], b->ttl};
    lens[9] = TTL_LEN;
    for (int i = 0; i < 5; i++)
        lens[i] = (int)strlen(values[i]);
    PGresult *r;
    rc = run(b, ST_CP_WRITES, values, lens, &r, err);
    for (int i = 0; i < 4; i++)
        free(arrays[i]);
    if (rc == 0)
        PQclear(r);
    return rc;
}

/* Column col of row, or NULL when it is SQL NULL. */
static const char *text_or_null(const PGresult *r, int row, int col)
{
    return PQgetisnull(r, row, col) ? NULL : PQgetvalue(r, row, col);
}

/* The checkpoint of a kind-0 row into *out: CONVO_ECORRUPT when its metadata
 * is not an object or its log length is negative (nothing convo writes). */
static int checkpoint_from_row(const PGresult *r, int row, convo_checkpoint **out)
{
    size_t mlen;
    if (PQgetisnull(r, row, 6) || PQgetvalue(r, row, 6)[0] != '{' || get_int(r, row, 8) < 0)
        return CONVO_ECORRUPT;
    char *metadata = compact_json(r, row, 6, &mlen);
    if (!metadata)
        return CONVO_ENOMEM;
    convo_checkpoint *cp = convo__checkpoint_new(
        PQgetvalue(r, row, 2), PQgetvalue(r, row, 3), PQgetvalue(r, row, 4),
        text_or_null(r, row, 5), metadata, text_or_null(r, row, 10), PQgetvalue(r, row, 11),
        (size_t)PQgetlength(r, row, 11), get_int(r, row, 8),
        get_int(r, row, 9) + PG_EPOCH_MICROS);
    free(metadata);
    *out = cp;
    return cp ? 0 : CONVO_ENOMEM;
}

/* Adds a channel (kind 1) or a pending write (kind 2) row to cp. */
static int item_from_row(convo_checkpoint *cp, const PGresult *r, int row, int kind)
{
    const char *value = PQgetvalue(r, row, 11);
    size_t len = (size_t)PQgetlength(r, row, 11);
    if (kind == 1)
        return convo__checkpoint_add_channel(cp, PQgetvalue(r, row, 5), PQgetvalue(r, row, 6),
                                             text_or_null(r, row, 10), value, len);
    return convo__checkpoint_add_write(cp, PQgetvalue(r, row, 5), PQgetvalue(r, row, 6),
                                       get_int(r, row, 8), PQgetvalue(r, row, 7),
                                       PQgetvalue(r, row, 10), value, len);
}

/* Turns CP_ROWS rows into checkpoints, adding each to set (or, when set is
 * NULL, returning the only one in *single). CONVO_ENOTFOUND on a kind-9 row,
 * CONVO_ECORRUPT on rows convo never writes, CONVO_ENOMEM. */
static int checkpoints_from_rows(const PGresult *r, convo_checkpoint_set *set,
                                 convo_checkpoint **single)
{
    convo_checkpoint *cp = NULL;
    int rows = PQntuples(r), rc = 0;
    for (int i = 0; i < rows && rc == 0; i++) {
        int kind = (int)get_int(r, i, 0);
        if (kind == 9) {
            rc = CONVO_ENOTFOUND;
        } else if (kind != 0) {
            rc = cp ? item_from_row(cp, r, i, kind) : CONVO_ECORRUPT;
        } else {
            if (cp && set) {
                convo__checkpoint_finish(cp);
                rc = convo__checkpoint_set_add(set, cp); /* owns cp, also on failure */
            } else {
                convo_checkpoint_free(cp);
            }
            cp = NULL;
            if (rc == 0)
                rc = checkpoint_from_row(r, i, &cp);
        }
    }
    if (rc != 0 || !cp) {
        convo_checkpoint_free(cp);
        return rc;
    }
    convo__checkpoint_finish(cp);
    if (set)
        return convo__checkpoint_set_add(set, cp);
    *single = cp;
    return 0;
}

/* The error of a failed checkpoints_from_rows(): corrupt data or memory. */
static int checkpoint_read_error(int rc, convo_error *err)
{
    if (rc == CONVO_ECORRUPT)
        return convo__error(err, rc, NULL,
                            "postgres: a stored checkpoint is corrupt (metadata not an object, "
                            "negative log length, or rows out of order)");
    return convo__error(err, rc, NULL, "out of memory reading checkpoints");
}

static int pg_checkpoint_get(convo_backend *b, const char *thread_id, const char *ns,
                             const char *checkpoint_id, convo_checkpoint **out, convo_error *err)
{
    const char *values[3] = {thread_id, ns, checkpoint_id};
    int lens[3] = {(int)strlen(thread_id), (int)strlen(ns),
                   checkpoint_id ? (int)strlen(checkpoint_id) : 0};
    PGresult *r;
    int rc = run(b, checkpoint_id ? ST_CP_GET : ST_CP_LATEST, values, lens, &r, err);
    if (rc != 0)
        return rc;
    convo_checkpoint *cp = NULL;
    rc = PQntuples(r) ? checkpoints_from_rows(r, NULL, &cp) : CONVO_ENOTFOUND;
    PQclear(r);
    if (rc == CONVO_ENOTFOUND)
        return convo__error(err, rc, NULL, "checkpoint not found");
    if (rc != 0)
        return checkpoint_read_error(rc, err);
    *out = cp;
    return 0;
}

static int pg_checkpoint_list(convo_backend *b, const convo_checkpoint_list_opts *o,
                              void *filter, convo_checkpoint_set **out, convo_error *err)
{
    (void)filter; /* the server applies it: metadata @> filter */
    char limit[8];
    put64(limit, (uint64_t)o->limit);
    const char *values[7] = {o->thread_id, o->checkpoint_ns, o->before, o->filter_json,
                             o->limit ? limit : NULL, o->before_thread_id, o->before_ns};
    int lens[7] = {0, 0, 0, 0, 8, 0, 0};
    for (int i = 0; i < 7; i++)
        if (i != 4)
            lens[i] = values[i] ? (int)strlen(values[i]) : 0;
    PGresult *r;
    int rc = run(b, ST_CP_LIST, values, lens, &r, err);
    if (rc != 0)
        return rc;
    convo_checkpoint_set *set = convo__checkpoint_set_new();
    rc = set ? checkpoints_from_rows(r, set, NULL) : CONVO_ENOMEM;
    PQclear(r);
    if (rc != 0) {
        convo_checkpoint_set_free(set);
        if (rc == CONVO_ENOTFOUND)
            return convo__error(err, rc, NULL, "checkpoint '%s' not found", o->before);
        return checkpoint_read_error(rc, err);
    }
    *out = set;
    return 0;
}

static int pg_checkpoint_prune(convo_backend *b, const char *thread_id, size_t keep_last,
                               convo_error *err)
{
    char keep[8];
    put64(keep, keep_last > INT64_MAX ? (uint64_t)INT64_MAX : (uint64_t)keep_last);
    const char *values[3] = {thread_id, keep, b->ttl};
    const int lens[3] = {(int)strlen(thread_id), 8, TTL_LEN};
    PGresult *r;
    int rc = run(b, ST_CP_PRUNE, values, lens, &r, err);
    if (rc == 0)
        PQclear(r);
    return rc;
}

/* ---------------------------------------------------------------- import */

static int pg_thread_import(convo_backend *b, const char *thread_id, int64_t first_seq,
                            const convo_message_in *msgs, const int64_t *created_at, size_t n,
                            int *skipped, convo_error *err)
{
    for (size_t i = 0; i < n; i++)
        if (created_at[i] < PG_MIN_MICROS)
            return convo__error(err, CONVO_EINVAL, NULL, "message %lld: created_at %lld is "
                                "before the earliest time PostgreSQL stores (4714 BC)",
                                (long long)(first_seq + (int64_t)i), (long long)created_at[i]);
    int lens[6] = {(int)strlen(thread_id), 8, 0, 0, 0, TTL_LEN};
    char *bodies, *roles, first[8];
    int rc = encode_batch(msgs, n, &bodies, &lens[2], &roles, &lens[3]);
    if (rc != 0)
        return too_large_or_nomem(rc, err);
    pg_array at;
    array_start(&at, OID_TIMESTAMPTZ, n * 12);
    for (size_t i = 0; i < n; i++) {
        char t[8];
        put64(t, (uint64_t)(created_at[i] - PG_EPOCH_MICROS));
        array_add(&at, t, 8);
    }
    char *times = array_finish(&at, &lens[4]);
    put64(first, (uint64_t)first_seq);
    const char *values[6] = {thread_id, first, bodies, roles, times, b->ttl};
    PGresult *r = NULL;
    rc = times ? run(b, ST_IMPORT, values, lens, &r, err) : too_large_or_nomem(CONVO_ENOMEM, err);
    free(bodies);
    free(roles);
    free(times);
    if (rc == 0)
        *skipped = PQgetvalue(r, 0, 0)[0] != 0;
    PQclear(r);
    return rc;
}

/* ---------------------------------------------------------------- expiry */

/* In batches, each its own transaction, until a batch comes back short. Any
 * store sweeps what stores with ttl left behind. */
static int pg_sweep(convo_backend *b, uint64_t *removed, convo_error *err)
{
    char limit[4];
    put32(limit, SWEEP_BATCH);
    const char *values[1] = {limit};
    const int lens[1] = {4};
    uint64_t total = 0;
    for (;;) {
        PGresult *r;
        int rc = run(b, ST_SWEEP, values, lens, &r, err);
        if (rc != 0)
            return rc;
        int64_t n = get_int(r, 0, 0);
        PQclear(r);
        total += (uint64_t)n;
        if (n < SWEEP_BATCH)
            break;
    }
    *removed = total;
    return 0;
}

/* ---------------------------------------------------------------- measuring */

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* n prepared single-row INSERTs into a table shaped like messages, each its
 * own transaction and round trip: what an append costs at the least. */
static int bench_inserts(convo_backend *b, PGconn *pg, const char *table, const char *payload,
                         size_t len, size_t n, double *seconds, convo_error *err)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "INSERT INTO %s (thread_id, seq, role, created_at, body)"
             " VALUES ($1::text, $2::int8, 'user', now(), $3::bytea)", table);
    PGresult *r = PQprepare(pg, "convo_bench_raw", sql, 0, NULL);
    int rc = r && PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : fail(b, pg, r, err);
    PQclear(r);
    static const int binary[3] = {1, 1, 1};
    char seq[8];
    const char *values[3] = {"bench", seq, payload};
    const int lens[3] = {5, 8, (int)len};
    double start = now_seconds();
    for (size_t i = 0; i < n && rc == 0; i++) {
        put64(seq, (uint64_t)i);
        r = PQexecPrepared(pg, "convo_bench_raw", 3, values, lens, binary, 1);
        if (!r || PQresultStatus(r) != PGRES_COMMAND_OK)
            rc = fail(b, pg, r, err);
        PQclear(r);
    }
    *seconds = now_seconds() - start;
    if (PQstatus(pg) == CONNECTION_OK)
        PQclear(PQexec(pg, "DEALLOCATE convo_bench_raw"));
    return rc;
}

static int pg_bench_raw(convo_backend *b, const char *payload, size_t payload_len, size_t n,
                        double *seconds, convo_error *err)
{
    if (payload_len >= (size_t)1 << 30)
        return convo__error(err, CONVO_ETOOLARGE, NULL, "postgres: payload over 1 GiB");
    pg_conn *c;
    int rc = conn_get(b, &c, err);
    if (rc != 0)
        return rc;
    char table[128], sql[512];
    snprintf(table, sizeof table, "%s.\"bench_raw_%ld_%lld\"", b->qschema, (long)getpid(),
             (long long)convo__now_micros());
    snprintf(sql, sizeof sql,
             "CREATE TABLE %s (thread_id text COLLATE \"C\" NOT NULL, seq bigint NOT NULL,"
             " role text NOT NULL, created_at timestamptz NOT NULL, body bytea NOT NULL,"
             " PRIMARY KEY (thread_id, seq))", table);
    rc = exec_simple(b, c->pg, sql, err);
    if (rc == 0) {
        rc = bench_inserts(b, c->pg, table, payload, payload_len, n, seconds, err);
        snprintf(sql, sizeof sql, "DROP TABLE IF EXISTS %s", table);
        int drop = PQstatus(c->pg) == CONNECTION_OK ? exec_simple(b, c->pg, sql, err) : 0;
        rc = rc ? rc : drop;
    }
    convo__pool_release(b->pool, c, PQstatus(c->pg) != CONNECTION_OK);
    return rc;
}

/* Tables with their indexes and TOAST, in this store's schema. */
static int pg_stored_bytes(convo_backend *b, int64_t *bytes, convo_error *err)
{
    pg_conn *c;
    int rc = conn_get(b, &c, err);
    if (rc != 0)
        return rc;
    const char *values[1] = {b->schema};
    PGresult *r = PQexecParams(c->pg,
                               "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::int8"
                               " FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n"
                               " ON n.oid = c.relnamespace"
                               " WHERE n.nspname = $1::text AND c.relkind = 'r'",
                               1, NULL, values, NULL, NULL, 1);
    if (r && PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1)
        *bytes = get_int(r, 0, 0);
    else
        rc = fail(b, c->pg, r, err);
    PQclear(r);
    convo__pool_release(b->pool, c, PQstatus(c->pg) != CONNECTION_OK);
    return rc;
}

static const char *const pg_schemes[] = {"postgres", "postgresql", NULL};

const convo_driver convo_driver_postgres = {
    .version = CONVO_DRIVER_VERSION,
    .name = "postgres",
    .schemes = pg_schemes,
    .open = pg_open,
    .close = pg_close,
    .append = pg_append,
    .load = pg_load,
    .save_extra = pg_save_extra,
    .thread_delete = pg_thread_delete,
    .thread_list = pg_thread_list,
    .thread_fork = pg_thread_fork,
    .checkpoint_put = pg_checkpoint_put,
    .checkpoint_put_writes = pg_checkpoint_put_writes,
    .checkpoint_get = pg_checkpoint_get,
    .checkpoint_list = pg_checkpoint_list,
    .checkpoint_prune = pg_checkpoint_prune,
    .bench_raw = pg_bench_raw,
    .stored_bytes = pg_stored_bytes,
    .thread_import = pg_thread_import,
    .sweep = pg_sweep,
    .checkpoint_put_log = pg_checkpoint_put_log,
};
