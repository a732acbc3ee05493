-- changes when another connection committed since this one last asked
-- (lists.c: the memo of the last decoded channel list is valid only while not)
PRAGMA data_version;
