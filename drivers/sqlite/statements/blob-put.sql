-- a value is stored once per (thread, ns, channel, version): a put that brings
-- a version already stored keeps the stored one; ?3 the channel's and ?5 the
-- type's number in convo_names, ?4 the version's stored form (compact.c)
INSERT OR IGNORE INTO convo_blobs(thread, ns, channel, version, type, value)
  VALUES(?1, ?2, ?3, ?4, ?5, ?6);
