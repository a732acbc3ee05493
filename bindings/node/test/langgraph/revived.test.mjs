// revived.test.mjs — ConvoSaver keeps the messages it revived per (thread, generation, origin,
// seq): through LangGraph's runtime each invoke's getTuple revives only the new messages and
// reads only the log past what the saver holds (its reads say what they hold; libconvo leaves
// those texts out), list does the same; a tail rewrite, a pop, a thread deleted and started
// again, by this saver's Store or by a second saver, is seen and nothing stale comes back; a
// message changed in place by the app is read again; the cache is bounded.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { JsonPlusSerializer } from '@langchain/langgraph-checkpoint';
import { StateGraph, MessagesAnnotation, MemorySaver, START, END } from '@langchain/langgraph';
import { HumanMessage, AIMessage } from '@langchain/core/messages';
import { Store, InvalidError } from '../../src/index.js';
import { ConvoSaver } from '../../src/langgraph/index.js';
import { drivers, freshUrl } from '../support.mjs';

// A JsonPlusSerializer that counts the items it revives (a subclass takes the saver's general
// path: one loadsTyped per batch of JSON items).
class CountingSerde extends JsonPlusSerializer {
  revived = 0;
  async loadsTyped(type, data) {
    const v = await super.loadsTyped(type, data);
    if (type === 'json' && Array.isArray(v)) this.revived += v.length;
    return v;
  }
}

// The known* options of every checkpointGet / checkpointList the saver makes, and what came back.
function spy(store) {
  const seen = { gets: [], lists: [] };
  const get = store.checkpointGet.bind(store);
  const list = store.checkpointList.bind(store);
  store.checkpointGet = async (t, ns, id, known) => {
    const cp = await get(t, ns, id, known);
    seen.gets.push({ known, cp });
    return cp;
  };
  store.checkpointList = async (q) => {
    const cps = await list(q);
    seen.lists.push({ q, cps });
    return cps;
  };
  return seen;
}

const answer = (m) => new AIMessage({ content: `answer to ${m.content}`, id: `a-${m.id}` });

function chatbot(checkpointer) {
  return new StateGraph(MessagesAnnotation)
    .addNode('model', (state) => ({ messages: [answer(state.messages.at(-1))] }))
    .addEdge(START, 'model')
    .addEdge('model', END)
    .compile({ checkpointer });
}

const cfg = { configurable: { thread_id: 'chat' } };
const shown = (messages) => messages.map((m) => [m.getType(), m.id, m.content]);
const ask = (graph, i) => graph.invoke({ messages: [new HumanMessage({ content: `question ${i}`, id: `h${i}` })] }, cfg);

// The thread's state as a saver that holds nothing reads it.
async function fresh(store, config = cfg) {
  const t = await new ConvoSaver(store, { cache: false }).getTuple(config);
  return shown(t.checkpoint.channel_values.messages);
}

for (const [name, base] of drivers()) {
  describe(`ConvoSaver revived messages on ${name}`, () => {
    test('each invoke revives only the new messages and reads only the log past them', async () => {
      const store = await Store.open(freshUrl(base));
      try {
        const serde = new CountingSerde();
        const seen = spy(store);
        const saver = new ConvoSaver(store, { serde });
        const graph = chatbot(saver);
        const memory = chatbot(new MemorySaver());
        for (let i = 0; i < 12; i++) {
          serde.revived = 0;
          seen.gets.length = 0;
          const got = await ask(graph, i);
          assert.deepEqual(shown(got.messages), shown((await ask(memory, i)).messages));
          const [read] = seen.gets;
          if (i >= 2) {
            // held: the 2(i-1) messages revived by the previous invoke's read
            assert.equal(read.known.knownLength, 2 * i - 2, `invoke ${i}`);
            const items = read.cp.channels.find((c) => c.channel === 'messages').items;
            assert.equal(items.texts.filter((x) => x === null).length, 2 * i - 2, `invoke ${i}: texts left out`);
            assert.equal(serde.revived, 2, `invoke ${i} revived ${serde.revived} messages`);
          }
        }
        // the same objects are handed out again; a second getTuple revives nothing
        const a = await saver.getTuple(cfg);
        serde.revived = 0;
        const b = await saver.getTuple(cfg);
        assert.equal(serde.revived, 0);
        a.checkpoint.channel_values.messages.forEach((m, i) => assert.equal(b.checkpoint.channel_values.messages[i], m));
        assert.deepEqual(shown(b.checkpoint.channel_values.messages), await fresh(store));
        // getStateHistory: the listing says what the saver holds, and gives what a fresh saver gives
        const history = [];
        for await (const s of graph.getStateHistory(cfg)) history.push(shown(s.values.messages ?? []));
        assert.equal(seen.lists.at(-1).q.knownLength, 24);
        const want = [];
        for await (const s of chatbot(new ConvoSaver(store, { cache: false })).getStateHistory(cfg)) {
          want.push(shown(s.values.messages ?? []));
        }
        assert.deepEqual(history, want);
      } finally {
        await store.close();
      }
    });

    // What another process does to the thread (a second Store on the same URL, a second
    // saver): messages 4 and 5 end up holding other messages, at another generation or in
    // a thread started again (generation 0 again, another message 0).
    const changes = {
      pop: async (other) => {
        await other.store.pop('chat', { count: 2, dropCheckpoints: true });
        await ask(other.graph, 20);
      },
      replaceTail: async (other) => {
        await other.store.replaceTail('chat', { keep: 2, expectedLength: 6, dropCheckpoints: true });
        await ask(other.graph, 20);
        await ask(other.graph, 21);
      },
      deleteThread: async (other) => {
        await other.saver.deleteThread('chat');
        for (let i = 20; i < 23; i++) await ask(other.graph, i);
      },
    };
    for (const [how, change] of Object.entries(changes)) {
      test(`${how} by another saver between two invokes: nothing stale comes back`, async () => {
        const url = freshUrl(base);
        const store = await Store.open(url);
        const otherStore = base === 'memory:' ? store : await Store.open(url);
        try {
          const saver = new ConvoSaver(store);
          const graph = chatbot(saver);
          for (let i = 0; i < 3; i++) await ask(graph, i);
          const before = await saver.getTuple(cfg); // the saver holds the 6 messages
          assert.equal(before.checkpoint.channel_values.messages.length, 6);
          const otherSaver = new ConvoSaver(otherStore);
          await change({ store: otherStore, saver: otherSaver, graph: chatbot(otherSaver) });
          const want = await fresh(store);
          assert.ok(want.some(([, id]) => id === 'h20'));
          const t = await saver.getTuple(cfg);
          assert.deepEqual(shown(t.checkpoint.channel_values.messages), want);
          // and the next invoke goes on from the thread as it now is
          const after = await ask(graph, 9);
          assert.deepEqual(shown(after.messages), [...want, ['human', 'h9', 'question 9'], ['ai', 'a-h9', 'answer to question 9']]);
          assert.deepEqual(await fresh(store), shown(after.messages));
        } finally {
          if (otherStore !== store) await otherStore.close();
          await store.close();
        }
      });
    }

    test('a message the app changes in place is read again, as MemorySaver gives it', async () => {
      const store = await Store.open(freshUrl(base));
      try {
        const serde = new CountingSerde();
        const seen = spy(store);
        const saver = new ConvoSaver(store, { serde });
        const graph = chatbot(saver);
        for (let i = 0; i < 3; i++) await ask(graph, i);
        const held = (await saver.getTuple(cfg)).checkpoint.channel_values.messages;
        held[3].content = 'changed by the app'; // not returned to the graph: not stored
        held[4].id = 'another id';
        serde.revived = 0;
        const t = await saver.getTuple(cfg);
        assert.equal(seen.gets.at(-1).known.knownLength, 3, 'held up to the changed message');
        assert.equal(serde.revived, 3);
        assert.deepEqual(shown(t.checkpoint.channel_values.messages), await fresh(store));
        assert.equal(t.checkpoint.channel_values.messages[3].content, 'answer to question 1');
        assert.equal(t.checkpoint.channel_values.messages[2], held[2]);
        assert.notEqual(t.checkpoint.channel_values.messages[3], held[3]);
        // each read hands out an array of its own (a copy of the held items): one an app
        // empties or fills is not the next read's
        const read = (await saver.getTuple(cfg)).checkpoint.channel_values.messages;
        const other = (await saver.getTuple(cfg)).checkpoint.channel_values.messages;
        assert.notEqual(other, read);
        const length = read.length;
        read.length = 1;
        read.push(new HumanMessage({ content: 'pushed by the app', id: 'pushed' }));
        assert.equal(other.length, length);
        const next = (await saver.getTuple(cfg)).checkpoint.channel_values.messages;
        assert.equal(next.length, length);
        assert.deepEqual(shown(next), await fresh(store));
        assert.deepEqual(shown(other), await fresh(store));
        // a message without an id that LangGraph's reducer gives one in place: stored without
        await store.checkpointPrune('chat', 0);
        const noId = new ConvoSaver(store);
        const g = chatbot(noId);
        await g.invoke({ messages: [{ role: 'user', content: 'plain, no id' }] }, { configurable: { thread_id: 'n' } });
        const again = await g.invoke({ messages: [new HumanMessage({ content: 'next', id: 'n2' })] },
          { configurable: { thread_id: 'n' } });
        const direct = await fresh(store, { configurable: { thread_id: 'n' } });
        assert.deepEqual(shown(again.messages), direct);
      } finally {
        await store.close();
      }
    });

    test('bounded: an LRU of threads; cache: false holds nothing; bad bounds refused', async () => {
      const store = await Store.open(freshUrl(base));
      try {
        const seen = spy(store);
        const saver = new ConvoSaver(store, { cache: { threads: 2 } });
        const graph = chatbot(saver);
        const on = (t) => ({ configurable: { thread_id: t } });
        for (const t of ['a', 'b', 'c']) {
          await graph.invoke({ messages: [new HumanMessage({ content: t, id: `${t}1` })] }, on(t));
          await saver.getTuple(on(t));
        }
        const knownOf = async (t) => {
          await saver.getTuple(on(t));
          return seen.gets.at(-1).known?.knownLength ?? 0;
        };
        assert.equal(await knownOf('c'), 2);
        assert.equal(await knownOf('a'), 0, 'a was the least recently used of three');
        assert.equal(await knownOf('b'), 0, 'b was dropped when a came back');
        // held: a and b. A listing of every thread's checkpoints (a, b, then c) does not put
        // c in the cache, which would push a out
        let listed = 0;
        for await (const t of saver.list({})) listed += t.checkpoint.channel_values.messages?.length ?? 0;
        assert.ok(listed >= 6, `listed ${listed} messages`);
        assert.equal(await knownOf('a'), 2, 'a is still held after a listing across threads');
        const items = new ConvoSaver(store, { cache: { items: 3 } });
        await items.getTuple(on('a'));
        await items.getTuple(on('b')); // a's 2 and b's 2 do not fit in 3: a goes
        await items.getTuple(on('a'));
        assert.equal(seen.gets.at(-1).known?.knownLength ?? 0, 0);
        await items.getTuple(on('a'));
        assert.equal(seen.gets.at(-1).known?.knownLength, 2);
        const none = new ConvoSaver(store, { cache: false });
        await none.getTuple(on('a'));
        await none.getTuple(on('a'));
        assert.equal(seen.gets.at(-1).known, undefined);
        for (const cache of [{ threads: -1 }, { items: 1.5 }, { items: '10' }]) {
          assert.throws(() => new ConvoSaver(store, { cache }), InvalidError);
        }
      } finally {
        await store.close();
      }
    });
  });
}
