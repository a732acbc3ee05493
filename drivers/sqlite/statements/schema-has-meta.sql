-- 1 when the file has convo's meta table (a file convo never touched has not)
SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'convo_meta';
