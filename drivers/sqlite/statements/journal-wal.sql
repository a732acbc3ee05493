-- gives the journal mode now in force: "wal" once the file is in WAL mode
PRAGMA journal_mode=WAL;
