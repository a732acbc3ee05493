-- layout 11: whether convo_blobs holds the value of (?3 channel number, ?4
-- stored version) in thread ?1, namespace ?2 (a value is stored once)
SELECT 1 FROM convo_blobs WHERE thread = ?1 AND ns = ?2 AND channel = ?3 AND version = ?4;
