-- the extra keys the store indexes (declared once, recorded at that open), in
-- byte order
SELECT key FROM convo_indexed_keys ORDER BY key;
