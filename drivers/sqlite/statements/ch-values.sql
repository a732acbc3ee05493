-- every channel of channel list ?1 (a checkpoint's) with its value, wherever in
-- the history of thread ?2, namespace ?3, it was first written; the version as
-- its text (convo_channel_list: drivers/sqlite/compact.c)
SELECT l.channel, l.version_text, b.type, b.value
  FROM convo_channel_list(?1) AS l LEFT JOIN convo_blobs AS b
  ON b.thread = ?2 AND b.ns = ?3 AND b.channel = l.channel AND b.version = l.version
  ORDER BY l.channel;
