-- synchronous=normal (the default): see Durability in docs/sqlite.md
PRAGMA synchronous=NORMAL;
