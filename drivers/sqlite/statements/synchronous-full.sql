-- synchronous=full
PRAGMA synchronous=FULL;
