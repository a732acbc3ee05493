-- a value is stored once per (thread, ns, channel, version): a put that brings
-- a version already stored keeps the stored one; ?4 the version's stored form
-- (compact.c)
INSERT OR IGNORE INTO convo_blobs(thread, ns, channel, version, type, value)
  VALUES(?1, ?2, ?3, ?4, ?5, ?6);
