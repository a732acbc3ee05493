-- Layout 0 -> 1: threads, messages, idempotency keys (docs/sqlite.md, Tables).
-- Run by schema.c with sqlite3_exec inside the migration's BEGIN IMMEDIATE.

CREATE TABLE IF NOT EXISTS convo_meta(
  key TEXT PRIMARY KEY NOT NULL,
  value TEXT NOT NULL) WITHOUT ROWID;

CREATE TABLE convo_threads(
  num INTEGER PRIMARY KEY AUTOINCREMENT,
  id TEXT NOT NULL UNIQUE,
  created_at INTEGER NOT NULL,
  extra TEXT);

-- key: (thread num << 32) | seq
CREATE TABLE convo_messages(
  key INTEGER PRIMARY KEY,
  role TEXT NOT NULL,
  created_at INTEGER NOT NULL,
  body BLOB NOT NULL);

CREATE TABLE convo_idempotency(
  thread INTEGER NOT NULL,
  key TEXT NOT NULL,
  first_seq INTEGER NOT NULL,
  count INTEGER NOT NULL,
  created_at INTEGER NOT NULL,
  PRIMARY KEY(thread, key)) WITHOUT ROWID;

CREATE VIEW convo_message_view AS
  SELECT t.id AS thread_id, m.key & 4294967295 AS seq, m.role AS role,
         m.created_at AS created_at, m.body AS body
  FROM convo_messages AS m JOIN convo_threads AS t ON t.num = m.key >> 32;
