-- records layout version ?1, after the migrations, in their transaction
INSERT OR REPLACE INTO convo_meta(key, value) VALUES('schema_version', ?1);
