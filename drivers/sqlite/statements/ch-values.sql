-- every channel of checkpoint ?1 with its value, wherever in the history of
-- thread ?2, namespace ?3, it was first written
SELECT ch.channel, ch.version, b.type, b.value
  FROM convo_checkpoint_channels AS ch LEFT JOIN convo_blobs AS b
  ON b.thread = ?2 AND b.ns = ?3 AND b.channel = ch.channel
  AND b.version = ch.version WHERE ch.checkpoint = ?1;
