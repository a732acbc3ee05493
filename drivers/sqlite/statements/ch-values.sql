-- every channel of channel list ?1 (a checkpoint's) with its value, wherever in
-- the history of thread ?2, namespace ?3, it was first written: in the list's
-- entry (layout 11), else in convo_blobs; names and versions as their text
-- (convo_channel_list: drivers/sqlite/compact.c); ?4 a channel name: that
-- channel alone (NULL: every one)
SELECT n.name, l.version_text, t.name, CASE WHEN l.type IS NULL THEN b.value ELSE l.value END
  FROM convo_channel_list(?1) AS l JOIN convo_names AS n ON n.num = l.channel
  LEFT JOIN convo_blobs AS b
  ON l.type IS NULL AND b.thread = ?2 AND b.ns = ?3 AND b.channel = l.channel
     AND b.version = l.version
  LEFT JOIN convo_names AS t ON t.num = coalesce(l.type, b.type)
  WHERE ?4 IS NULL OR n.name = ?4
  ORDER BY n.name;
