-- ?1 checkpoint key, ?2 channel, ?3 version
INSERT INTO convo_checkpoint_channels(checkpoint, channel, version)
  VALUES(?1, ?2, ?3);
