-- before the checkpoints of thread ?1 that refer to more than ?2 messages go
-- (cp-delete-beyond.sql): those that stay and name one as their parent by
-- place (at most ?3 places before them) name it by id; one walk of the
-- thread's key range, the parent found by its key
UPDATE convo_checkpoints
  SET parent_id = (SELECT p.id FROM convo_checkpoints AS p
                   WHERE p.key = convo_checkpoints.key - convo_checkpoints.parent_place),
      parent_place = NULL
  WHERE key IN (SELECT c.key FROM convo_checkpoints AS c
                JOIN convo_checkpoints AS d ON d.key = c.key - c.parent_place
                WHERE c.key >= ?1 << 32 AND c.key <= (?1 << 32) + 4294967295
                AND c.parent_place BETWEEN 1 AND ?3 AND c.log_length <= ?2
                AND d.log_length > ?2);
