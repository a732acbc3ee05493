-- scripts/pg-cost-put-write-chain-setup.sql: for PG_COST_SETUP with
-- scripts/pg-cost-put-write-chain.sql: a table remembering the newest
-- checkpoint of 'costchain' and its version, then 1,000 of that statement's
-- puts into the thread (each a child of the one before, as a LangGraph run
-- puts them), so the counts run against a chain of 1,000 checkpoints.
CREATE TABLE @S.cost_chain (id text, v text);
INSERT INTO @S.cost_chain VALUES (NULL, '00000000000000000000000000000000.0000000000000000');
DO $$ DECLARE pid text; pv text; nid text; nv text; BEGIN FOR i IN 1 .. 1000 LOOP
SELECT id, v INTO pid, pv FROM @S.cost_chain;
nid := gen_random_uuid()::text;
nv := lpad((random() * 1e9)::int8::text, 32, '0') || '.k27lp6lcw6k27lp6';
PERFORM @S.checkpoint_put('costchain', '', nid, pid, '{"source":"loop","step":1,"parents":{}}',
       'json', '\x00' || convert_to(repeat('b', 60), 'UTF8'), 1,
       ARRAY['messages', '__start__', 'branch:to:chatbot', '__convo_body__'],
       ARRAY[nv, pv, nv, '1f1e9eee-1758-6660-8003-f7e2ee72e981'],
       ARRAY['convo/items', NULL, 'json', NULL],
       ARRAY['\x0102030405060708090a0b0c'::bytea, NULL, '"x"'::bytea, NULL], now(), NULL),
       @S.checkpoint_put_writes('costchain', '', nid, gen_random_uuid()::text,
       '~__pregel_pull, chatbot', ARRAY[0::int8], ARRAY['messages'], ARRAY['convo/items'],
       ARRAY['\x0102030405060708090a'::bytea], NULL);
UPDATE @S.cost_chain SET id = nid, v = nv;
END LOOP; END $$;
