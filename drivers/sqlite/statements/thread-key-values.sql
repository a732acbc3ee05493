-- thread ?1's id, created_at and indexed key values (convo_threads.key_values:
-- "LEN:KEY" "LEN:VALUE" per key; NULL: none), for its rows in the key orders
SELECT id, created_at, key_values FROM convo_threads WHERE num = ?1;
