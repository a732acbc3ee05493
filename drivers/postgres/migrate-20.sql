-- migrate-20.sql: schema version 20 — a page of the thread index reads only
-- thread rows. Each thread row keeps a copy of its last message (preview,
-- with its seq) and of its extra's text (extra_text) while they are small,
-- so a page no longer looks up each row's message and extra (two index
-- lookups and a jsonb-to-text conversion a row: most of a page's server
-- time). A copy is used only where it is known to be current:
-- - preview when preview_seq = length - 1, preview_gen = generation and
--   preview is not NULL. The appends (and so the checkpoint puts with
--   messages, through append()) set it; a write that changes the log without
--   setting it moves length past preview_seq (an import) or the generation
--   past preview_gen (every tail rewrite); a page then reads the message as
--   before.
-- - extra_text when not NULL. save_extra sets it (NULL when the extra's text
--   is over extra_text_max() bytes), thread_claim sets '{}' in a row it
--   creates; a fork or a copy creates its row without it (NULL until its
--   next save_extra).
-- Caps keep the row under the size PostgreSQL would compress or move out of
-- line (about 2 kB), so an append's row update stays in place (HOT) and
-- copies at most a few hundred bytes more.
--
-- Run by the driver (schema.c) in order, each in the transaction that records
-- its version; @S is the schema's quoted name. Never edit a released migration:
-- a change is a new one (docs/postgres.md).

-- The last message's body as a thread row keeps it: NULL when over 1,024
-- bytes (the page then reads it from messages). Inlined where it is used.
CREATE FUNCTION @S.appended_preview(p_body bytea) RETURNS bytea
LANGUAGE sql IMMUTABLE AS $fn$
SELECT CASE WHEN octet_length(p_body) <= 1024 THEN p_body END
$fn$;

-- The longest extra text a thread row keeps.
CREATE FUNCTION @S.extra_text_max() RETURNS integer
LANGUAGE sql IMMUTABLE AS $fn$ SELECT 768 $fn$;

-- stable columns last: an append's row update changes length, updated_at and
-- the preview, and what follows the last change is not written to the WAL
ALTER TABLE @S.threads ADD COLUMN preview_seq bigint, ADD COLUMN preview_gen bigint,
    ADD COLUMN preview bytea, ADD COLUMN extra_text text;

UPDATE @S.threads t SET preview_seq = t.length - 1, preview_gen = t.generation,
       preview = (SELECT @S.appended_preview(m.body) FROM @S.messages m
                   WHERE m.tid = t.tid AND m.seq = t.length - 1)
 WHERE t.length > 0;
UPDATE @S.threads t SET extra_text = e.text
  FROM (SELECT u.tid, coalesce(x.extra::text, '{}') AS text
          FROM @S.threads u LEFT JOIN @S.thread_extra x ON x.tid = u.tid) e
 WHERE e.tid = t.tid AND octet_length(e.text) <= @S.extra_text_max();

-- version 17's thread_claim: a thread it creates has no extra yet
CREATE OR REPLACE FUNCTION @S.thread_claim(p_thread text, p_ttl interval, p_at timestamptz,
    OUT tid bigint, OUT length bigint)
LANGUAGE plpgsql AS $fn$
BEGIN
    -- a row that is not updated (its deadline passed) is locked all the same
    INSERT INTO @S.threads AS t (thread_id, created_at, updated_at, listed_at, expires_at,
        extra_text)
    VALUES (p_thread, p_at, p_at, p_at, now() + p_ttl, '{}')
    ON CONFLICT (thread_id) DO UPDATE SET
        updated_at = greatest(t.updated_at, excluded.updated_at),
        listed_at = @S.listed_at(t.listed_at, greatest(t.updated_at, excluded.updated_at)),
        expires_at = excluded.expires_at
     WHERE t.expires_at IS NULL OR t.expires_at > now()
    RETURNING t.tid, t.length INTO tid, length;
    IF NOT FOUND THEN
        PERFORM @S.threads_purge(ARRAY[p_thread]);
        INSERT INTO @S.threads AS t (thread_id, created_at, updated_at, listed_at, expires_at,
            extra_text)
        VALUES (p_thread, p_at, p_at, p_at, now() + p_ttl, '{}')
        RETURNING t.tid, t.length INTO tid, length;
    END IF;
END
$fn$;

-- version 8's append, keeping the preview
CREATE OR REPLACE FUNCTION @S.append(p_thread text, p_bodies bytea[], p_roles text[],
    p_at timestamptz, p_key text, p_expected bigint, p_generation bigint, p_ttl interval,
    OUT first_seq bigint, OUT count integer, OUT replayed boolean)
LANGUAGE plpgsql AS $fn$
DECLARE
    n integer := cardinality(p_bodies);
    v_tid bigint;
    len bigint;
    gen bigint;
BEGIN
    SELECT c.tid, c.length INTO v_tid, len FROM @S.thread_claim(p_thread, p_ttl, p_at) c;
    -- the row lock is held: this statement's snapshot sees every
    -- committed key of the thread
    IF p_key IS NOT NULL THEN
        SELECT k.first_seq, k.count INTO first_seq, count
          FROM @S.idempotency_keys k WHERE k.tid = v_tid AND k.key = p_key;
        IF FOUND THEN
            replayed := true;
            RETURN;
        END IF;
    END IF;
    IF p_expected >= 0 AND p_expected <> len THEN
        RAISE EXCEPTION USING ERRCODE = 'CV409',
            MESSAGE = format('thread has %s messages, expected %s', len, p_expected);
    END IF;
    IF p_generation >= 0 THEN
        SELECT t.generation INTO gen FROM @S.threads t WHERE t.tid = v_tid;
        IF gen <> p_generation THEN
            RAISE EXCEPTION USING ERRCODE = 'CV409', MESSAGE = format(
                'thread is at generation %s, expected %s', gen, p_generation);
        END IF;
    END IF;
    UPDATE @S.threads t SET length = len + n, preview_seq = len + n - 1,
        preview_gen = t.generation, preview = @S.appended_preview(p_bodies[n])
     WHERE t.tid = v_tid;
    INSERT INTO @S.messages (tid, seq, created_at, role, body)
    SELECT v_tid, len + u.o - 1, p_at, u.r, u.b
      FROM unnest(p_bodies, p_roles) WITH ORDINALITY AS u(b, r, o);
    IF p_key IS NOT NULL THEN
        INSERT INTO @S.idempotency_keys (tid, key, first_seq, count)
        VALUES (v_tid, p_key, len, n);
    END IF;
    first_seq := len;
    count := n;
    replayed := false;
END
$fn$;

-- version 11's save_extra, keeping extra_text; keyvals set in the same update
-- (keyvals_set's rule: the declared keys read after the extra was written)
CREATE OR REPLACE FUNCTION @S.save_extra(p_thread text, p_patch jsonb, p_max bigint,
    p_at timestamptz, p_ttl interval) RETURNS void
LANGUAGE plpgsql AS $fn$
DECLARE
    v_tid bigint;
    merged jsonb;
    merged_text text;
    size bigint;
    keys text[];
BEGIN
    SELECT c.tid INTO v_tid FROM @S.thread_claim(p_thread, p_ttl, p_at) c;
    INSERT INTO @S.thread_extra AS x (tid, extra) VALUES (v_tid, p_patch)
    ON CONFLICT (tid) DO UPDATE SET extra = x.extra || excluded.extra
    RETURNING x.extra INTO merged;
    merged_text := merged::text;
    -- jsonb's text is never shorter than the compact form: count only when needed
    IF octet_length(merged_text) > p_max THEN
        size := @S.json_compact_size(merged);
        IF size > p_max THEN
            RAISE EXCEPTION USING ERRCODE = 'CV413', MESSAGE = format(
                'merged extra of %s bytes would exceed the limit of %s bytes', size, p_max);
        END IF;
    END IF;
    SELECT array_agg(k.key) INTO keys FROM @S.indexed_keys k;
    UPDATE @S.threads t SET
        extra_text = CASE WHEN octet_length(merged_text) <= @S.extra_text_max()
                          THEN merged_text END,
        keyvals = CASE WHEN keys IS NOT NULL AND p_patch ?| keys THEN (
                      SELECT jsonb_object_agg(u.k, merged -> u.k) FROM unnest(keys) AS u(k)
                       WHERE merged ? u.k) ELSE t.keyvals END
     WHERE t.tid = v_tid;
END
$fn$;
