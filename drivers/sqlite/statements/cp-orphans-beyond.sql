-- before the checkpoints of thread ?1 that refer to more than ?2 messages go
-- (cp-delete-beyond.sql): those that stay and name one as their parent by
-- place (at most ?3 places before them) name it by id
UPDATE convo_checkpoints
  SET parent_id = (SELECT p.id FROM convo_checkpoints AS p
                   WHERE p.key = convo_checkpoints.key - convo_checkpoints.parent),
      parent = NULL
  WHERE key IN (SELECT c.key FROM convo_checkpoints AS d
                JOIN convo_checkpoints AS c ON c.key > d.key AND c.key <= d.key + ?3
                WHERE d.thread = ?1 AND d.log_length > ?2
                AND c.key - c.parent = d.key AND c.log_length <= ?2);
