-- the layout version the file records (no row: 0)
SELECT value FROM convo_meta WHERE key = 'schema_version';
