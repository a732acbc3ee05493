-- migrate-1.sql: schema version 1 — threads, messages, idempotency keys and
-- the functions that change them.
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).
CREATE TABLE @S.threads (
    thread_id  text COLLATE "C" NOT NULL,
    length     bigint NOT NULL DEFAULT 0,
    extra      jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (thread_id));
CREATE TABLE @S.messages (
    thread_id  text COLLATE "C" NOT NULL,
    seq        bigint NOT NULL,
    role       text NOT NULL,
    created_at timestamptz NOT NULL,
    body       bytea NOT NULL,
    PRIMARY KEY (thread_id, seq));
CREATE TABLE @S.idempotency_keys (
    thread_id  text COLLATE "C" NOT NULL,
    key        text COLLATE "C" NOT NULL,
    first_seq  bigint NOT NULL,
    count      integer NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (thread_id, key));
-- The size of jsonb's text with the space after each ':' and ',' removed:
-- the compact JSON the other drivers measure.
CREATE FUNCTION @S.json_compact_size(j jsonb) RETURNS bigint
LANGUAGE sql IMMUTABLE AS $fn$
    SELECT octet_length(j::text) - coalesce(sum(CASE jsonb_typeof(v)
        WHEN 'object' THEN greatest(2 * (SELECT count(*) FROM jsonb_object_keys(v)) - 1, 0)
        WHEN 'array' THEN greatest(jsonb_array_length(v) - 1, 0)
        ELSE 0 END), 0)
    FROM jsonb_path_query(j, 'strict $.**') AS v
$fn$;
CREATE FUNCTION @S.append(p_thread text, p_bodies bytea[], p_roles text[],
    p_at timestamptz, p_key text, p_expected bigint,
    OUT first_seq bigint, OUT count integer, OUT replayed boolean)
LANGUAGE plpgsql AS $fn$
DECLARE
    n integer := cardinality(p_bodies);
    len bigint;
BEGIN
    IF p_key IS NULL THEN
        -- one statement locks the row, checks the length and allocates seqs
        UPDATE @S.threads t SET length = t.length + n, updated_at = p_at
         WHERE t.thread_id = p_thread AND (p_expected < 0 OR t.length = p_expected)
        RETURNING t.length - n INTO len;
    END IF;
    IF len IS NULL THEN
        LOOP
            SELECT t.length INTO len FROM @S.threads t
             WHERE t.thread_id = p_thread FOR UPDATE;
            EXIT WHEN FOUND;
            INSERT INTO @S.threads (thread_id, created_at, updated_at)
            VALUES (p_thread, p_at, p_at) ON CONFLICT (thread_id) DO NOTHING;
        END LOOP;
        -- the row lock is held: this statement's snapshot sees every
        -- committed key of the thread
        IF p_key IS NOT NULL THEN
            SELECT k.first_seq, k.count INTO first_seq, count
              FROM @S.idempotency_keys k WHERE k.thread_id = p_thread AND k.key = p_key;
            IF FOUND THEN
                replayed := true;
                RETURN;
            END IF;
        END IF;
        IF p_expected >= 0 AND p_expected <> len THEN
            RAISE EXCEPTION USING ERRCODE = 'CV409',
                MESSAGE = format('thread has %s messages, expected %s', len, p_expected);
        END IF;
        UPDATE @S.threads t SET length = len + n, updated_at = p_at
         WHERE t.thread_id = p_thread;
    END IF;
    INSERT INTO @S.messages (thread_id, seq, role, created_at, body)
    SELECT p_thread, len + u.o - 1, u.r, p_at, u.b
      FROM unnest(p_bodies, p_roles) WITH ORDINALITY AS u(b, r, o);
    IF p_key IS NOT NULL THEN
        INSERT INTO @S.idempotency_keys (thread_id, key, first_seq, count)
        VALUES (p_thread, p_key, len, n);
    END IF;
    first_seq := len;
    count := n;
    replayed := false;
END
$fn$;
CREATE FUNCTION @S.save_extra(p_thread text, p_patch jsonb, p_max bigint) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    merged jsonb;
    size bigint;
BEGIN
    INSERT INTO @S.threads AS t (thread_id, extra) VALUES (p_thread, p_patch)
    ON CONFLICT (thread_id)
    DO UPDATE SET extra = t.extra || excluded.extra, updated_at = now()
    RETURNING t.extra INTO merged;
    -- jsonb's text is never shorter than the compact form: count only when needed
    IF octet_length(merged::text) > p_max THEN
        size := @S.json_compact_size(merged);
        IF size > p_max THEN
            RAISE EXCEPTION USING ERRCODE = 'CV413', MESSAGE = format(
                'merged extra of %s bytes would exceed the limit of %s bytes', size, p_max);
        END IF;
    END IF;
END
$fn$;
CREATE FUNCTION @S.thread_delete(p_thread text) RETURNS boolean
LANGUAGE plpgsql AS $fn$
BEGIN
    -- wait for appenders first, so no message they commit is left behind
    PERFORM 1 FROM @S.threads t WHERE t.thread_id = p_thread FOR UPDATE;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    DELETE FROM @S.messages m WHERE m.thread_id = p_thread;
    DELETE FROM @S.idempotency_keys k WHERE k.thread_id = p_thread;
    DELETE FROM @S.threads t WHERE t.thread_id = p_thread;
    RETURN true;
END
$fn$;
CREATE FUNCTION @S.thread_fork(p_src text, p_dst text, p_upto bigint) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    len bigint;
    x jsonb;
    n bigint;
BEGIN
    SELECT t.length, t.extra INTO len, x FROM @S.threads t
     WHERE t.thread_id = p_src FOR SHARE;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'CV404', MESSAGE = 'source thread not found';
    END IF;
    n := CASE WHEN p_upto < 0 THEN len ELSE least(p_upto, len) END;
    INSERT INTO @S.threads (thread_id, length, extra) VALUES (p_dst, n, x)
    ON CONFLICT (thread_id) DO NOTHING;
    IF NOT FOUND THEN
        RAISE EXCEPTION USING ERRCODE = 'CV409',
            MESSAGE = 'destination thread already exists';
    END IF;
    IF p_upto > len THEN
        RAISE EXCEPTION USING ERRCODE = 'CV400',
            MESSAGE = format('fork upto %s is past the end (%s)', p_upto, len);
    END IF;
    INSERT INTO @S.messages (thread_id, seq, role, created_at, body)
    SELECT p_dst, m.seq, m.role, m.created_at, m.body FROM @S.messages m
     WHERE m.thread_id = p_src AND m.seq < n;
END
$fn$;
