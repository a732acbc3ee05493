-- copy: the values of thread ?1 to thread ?4 (the unused ones are removed after)
INSERT INTO convo_blobs(thread, ns, channel, version, type, value)
  SELECT ?4, ns, channel, version, type, value FROM convo_blobs WHERE thread = ?1;
