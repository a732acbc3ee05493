-- 1,000 of scripts/pg-cost-put-write.sql into its thread first (then VACUUM ANALYZE): the counts run against an analyzed thread of 1,000 checkpoints
DO $$ BEGIN FOR i IN 1 .. 1000 LOOP
PERFORM @S.checkpoint_put('costthread', '', x.id, NULL, '{"source":"loop","step":1,"parents":{}}',
       'json', '\x00' || convert_to(repeat('b', 60), 'UTF8'), 1,
       ARRAY['messages', '__start__', 'branch:to:chatbot', '__convo_body__'],
       ARRAY[x.v, x.v, x.v, '1f1e9eee-1758-6660-8003-f7e2ee72e981'],
       ARRAY['convo/items', NULL, NULL, NULL],
       ARRAY['\x0102030405060708090a0b0c'::bytea, NULL, NULL, NULL], now(), NULL),
       @S.checkpoint_put_writes('costthread', '', x.id, x.task, '~__pregel_pull, chatbot',
       ARRAY[0::int8], ARRAY['messages'], ARRAY['convo/items'],
       ARRAY['\x0102030405060708090a'::bytea], NULL)
  FROM (SELECT gen_random_uuid()::text AS id, gen_random_uuid()::text AS task,
               lpad((random() * 1e9)::int8::text, 16, '0') || '.k27lp6lcw6' AS v) x
; END LOOP; END $$;
