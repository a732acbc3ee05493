-- thread ?1's indexed key values become ?2 (NULL: none)
UPDATE convo_threads SET key_values = ?2 WHERE num = ?1;
