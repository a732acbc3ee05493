-- scripts/pg-cost-put-write-chain.sql: for scripts/pg-statement-cost.sh (FILE:0) with PG_COST_SETUP=scripts/pg-cost-put-write-chain-setup.sql: a LangGraph run's put (its parent the newest checkpoint, 4 channels: a new version with a value, the parent's version without one, a new small value, the body channel's version the parent lists) and its pending write, as scripts/pg-cost-put-write.sql without its parentless look-up
WITH p AS (SELECT id, v FROM @S.cost_chain),
     n AS (UPDATE @S.cost_chain SET id = gen_random_uuid()::text,
                  v = lpad((random() * 1e9)::int8::text, 32, '0') || '.k27lp6lcw6k27lp6'
           RETURNING id, v)
SELECT @S.checkpoint_put('costchain', '', n.id, p.id, '{"source":"loop","step":1,"parents":{}}',
       'json', '\x00' || convert_to(repeat('b', 60), 'UTF8'), 1,
       ARRAY['messages', '__start__', 'branch:to:chatbot', '__convo_body__'],
       ARRAY[n.v, p.v, n.v, '1f1e9eee-1758-6660-8003-f7e2ee72e981'],
       ARRAY['convo/items', NULL, 'json', NULL],
       ARRAY['\x0102030405060708090a0b0c'::bytea, NULL, '"x"'::bytea, NULL], now(), NULL),
       @S.checkpoint_put_writes('costchain', '', n.id, gen_random_uuid()::text,
       '~__pregel_pull, chatbot', ARRAY[0::int8], ARRAY['messages'], ARRAY['convo/items'],
       ARRAY['\x0102030405060708090a'::bytea], NULL)
  FROM p, n
