-- records ?1 as an indexed extra key
INSERT INTO convo_indexed_keys(key) VALUES(?1);
