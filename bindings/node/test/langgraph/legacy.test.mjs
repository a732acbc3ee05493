// legacy.test.mjs — checkpoints stored by the saver's earlier format (a 'convo-log/1' record
// of seq ranges and a tail, or `__convo_log__: {channel: N}` in the body for a list that was
// the log's first N messages) still load, and the saver of today continues such a thread:
// its next message enters the log once, after the old ones.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { emptyCheckpoint, JsonPlusSerializer } from '@langchain/langgraph-checkpoint';
import { HumanMessage, AIMessage } from '@langchain/core/messages';
import { Store } from '../../src/index.js';
import { ConvoSaver } from '../../src/langgraph/index.js';
import { toLogMessage } from '../../src/langgraph/log.js';
import { drivers, freshUrl } from '../support.mjs';

const serde = new JsonPlusSerializer();
const blob = async (v) => { const [type, bytes] = await serde.dumpsTyped(v); return { type, bytes }; };

// A body as the earlier saver stored it: the checkpoint without values, plus its marker.
async function body(id, versions, marker) {
  return blob({ ...emptyCheckpoint(), id, channel_versions: versions, __convo_log__: marker });
}

for (const [name, base] of drivers()) {
  describe(`checkpoints of the earlier saver format on ${name}`, () => {
    test('load as they were put, and the thread goes on', async () => {
      const store = await Store.open(freshUrl(base));
      try {
        const h1 = new HumanMessage({ content: 'hello there', id: 'h1' });
        const a1 = new AIMessage({ content: 'hi, how can I help?', id: 'a1' });
        const r1 = new AIMessage({ content: 'replaced', id: 'r1' });
        await store.append('t', [await toLogMessage(serde, h1), await toLogMessage(serde, a1)]);
        // c1: the log's first two messages, named in the body only
        await store.checkpointPut({ threadId: 't', id: 'c1', body: await body('c1', { messages: 'v1', n: 'v1' },
          { messages: 2 }), channels: [{ channel: 'messages', version: 'v1', value: null },
          { channel: 'n', version: 'v1', value: await blob(7) }], logLength: 2 });
        // c2: a record: seq 0, then a message kept inline
        const [tt, tb] = await serde.dumpsTyped([r1]);
        const record = { ranges: [[0, 1]], tail: { type: tt, base64: Buffer.from(tb).toString('base64') } };
        await store.checkpointPut({ threadId: 't', id: 'c2', parentId: 'c1',
          body: await body('c2', { messages: 'v2', n: 'v1' }, { }), logLength: 1,
          channels: [{ channel: 'messages', version: 'v2', value: { type: 'convo-log/1', bytes: JSON.stringify(record) } },
            { channel: 'n', version: 'v1', value: null }] });
        // c3: a checkpoint with a field of its own named like the marker
        await store.checkpointPut({ threadId: 't', id: 'c3', parentId: 'c2', logLength: 1,
          body: await body('c3', { messages: 'v3' }, [{ messages: 1 }, 'mine']),
          channels: [{ channel: 'messages', version: 'v3', value: null }] });

        const saver = new ConvoSaver(store);
        const cfg = (id) => ({ configurable: { thread_id: 't', checkpoint_ns: '', checkpoint_id: id } });
        const t1 = await saver.getTuple(cfg('c1'));
        assert.deepEqual(t1.checkpoint.channel_values, { messages: [h1, a1], n: 7 });
        assert.equal(t1.checkpoint.__convo_log__, undefined);
        const t2 = await saver.getTuple(cfg('c2'));
        assert.deepEqual(t2.checkpoint.channel_values, { messages: [h1, r1], n: 7 });
        const t3 = await saver.getTuple(cfg('c3'));
        assert.deepEqual(t3.checkpoint.channel_values, { messages: [h1] });
        assert.equal(t3.checkpoint.__convo_log__, 'mine');
        const listed = [];
        for await (const t of saver.list({ configurable: { thread_id: 't' } })) {
          listed.push(t.checkpoint.channel_values.messages.map((m) => m.id));
        }
        assert.deepEqual(listed, [['h1'], ['h1', 'r1'], ['h1', 'a1']]);

        // today's saver continues from c1: the new message enters the log after the old ones
        const h2 = new HumanMessage({ content: 'and now?', id: 'h2' });
        const cp = { ...t1.checkpoint, id: 'c4', channel_values: { messages: [...t1.checkpoint.channel_values.messages, h2] },
          channel_versions: { ...t1.checkpoint.channel_versions, messages: 'v4' } };
        const c4 = await saver.put(cfg('c1'), cp, { source: 'loop', step: 1, parents: {} }, { messages: 'v4' });
        assert.deepEqual((await saver.getTuple(c4)).checkpoint.channel_values, { messages: [h1, a1, h2], n: 7 });
        const log = await store.load('t');
        assert.deepEqual(log.messages.map((m) => JSON.parse(m.json).content), ['hello there', 'hi, how can I help?', 'and now?']);
        const stored = (await store.checkpointGet('t', '', 'c4')).channels.find((c) => c.channel === 'messages');
        assert.deepEqual(stored.items.seqs, [0, 1, 2]);
      } finally {
        await store.close();
      }
    });

    test('a list under a reserved name of a later layout is refused, not shown', async () => {
      const store = await Store.open(freshUrl(base));
      try {
        const h1 = new HumanMessage({ content: 'hello there', id: 'h1' });
        const text = await toLogMessage(serde, h1);
        for (const [id, key] of [['d1', '__convo_delta__'], ['d2', '__convo_delta_2__']]) {
          await store.checkpointPut({ threadId: 't', id, body: await body(id, { messages: 'v1' }, undefined),
            channels: [{ channel: 'messages', version: id, items: { items: [text], key, log: false } }] });
        }
        const saver = new ConvoSaver(store);
        const cfg = (id) => ({ configurable: { thread_id: 't', checkpoint_ns: '', checkpoint_id: id } });
        // layout 1's delta list alone is no value LangGraph put
        assert.equal((await saver.getTuple(cfg('d1'))).checkpoint.channel_values.messages, undefined);
        await assert.rejects(saver.getTuple(cfg('d2')), (e) => e.name === 'CorruptError' && /__convo_delta_2__/.test(e.message));
      } finally {
        await store.close();
      }
    });
  });
}
