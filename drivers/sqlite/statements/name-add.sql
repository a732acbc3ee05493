-- a name not kept yet: its number is the new rowid
INSERT INTO convo_names(name) VALUES(?1);
