-- thread ?5 (id ?4, created ?3) has value ?2 at indexed key ?1: its row in
-- the key's orders by creation (the table) and by id (its index)
INSERT INTO convo_key_threads(key, value, created_at, id, thread) VALUES(?1, ?2, ?3, ?4, ?5);
