-- before the checkpoints with keys in [?1, ?2] go: those after them that name
-- one as their parent by place (at most ?3 places before them) name it by id
UPDATE convo_checkpoints
  SET parent_id = (SELECT p.id FROM convo_checkpoints AS p
                   WHERE p.key = convo_checkpoints.key - convo_checkpoints.parent_place),
      parent_place = NULL
  WHERE key > ?2 AND key <= ?2 + ?3 AND key - parent_place BETWEEN ?1 AND ?2;
