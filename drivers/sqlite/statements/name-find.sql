-- the number of name ?1 (a channel name, value type or task path)
SELECT num FROM convo_names WHERE name = ?1;
