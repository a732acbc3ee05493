// hints.test.mjs — a put costs O(new items): the items a saver read from the log or put into
// it go as their seqs, not serialized again, for message classes and plain objects alike (a
// counting serde shows it), also on a saver that only read the thread; and messages without
// an id in an input and a write are stored once (their id is given when the call comes in).
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { emptyCheckpoint, uuid6, JsonPlusSerializer } from '@langchain/langgraph-checkpoint';
import { HumanMessage, AIMessage } from '@langchain/core/messages';
import { Store } from '../../src/index.js';
import { ConvoSaver } from '../../src/langgraph/index.js';
import { drivers, freshUrl } from '../support.mjs';

// A JsonPlusSerializer that counts the values it serializes.
class CountingSerde extends JsonPlusSerializer {
  count = 0;
  async dumpsTyped(v) {
    this.count++;
    return super.dumpsTyped(v);
  }
}

const meta = { source: 'loop', step: 0, parents: {} };
const cfg = (id) => ({ configurable: { thread_id: 't', checkpoint_ns: '', checkpoint_id: id } });

async function putList(saver, parent, messages, extra = {}) {
  const versions = { messages: saver.getNextVersion(parent?.v), ...extra.versions };
  const checkpoint = { ...emptyCheckpoint(), id: uuid6(-1), channel_values: { messages, ...extra.values },
    channel_versions: versions };
  const config = await saver.put(cfg(parent?.id), checkpoint, meta, versions);
  return { id: config.configurable.checkpoint_id, v: versions.messages };
}

for (const [name, base] of drivers()) {
  describe(`ConvoSaver seq hints on ${name}`, () => {
    for (const kind of ['classes', 'plain objects']) {
      test(`a put serializes only its new items (${kind})`, async () => {
        const store = await Store.open(freshUrl(base));
        const make = kind === 'classes'
          ? (i) => (i % 2 ? new AIMessage({ content: `answer ${i}`, id: `m${i}` }) : new HumanMessage({ content: `question ${i}`, id: `m${i}` }))
          : (i) => ({ role: i % 2 ? 'assistant' : 'user', content: `message ${i}`, id: `m${i}` });
        try {
          const serde = new CountingSerde();
          const saver = new ConvoSaver(store, { serde, messageChannels: ['messages'] });
          let list = [];
          let parent = null;
          for (let i = 0; i < 40; i++) {
            list = [...list, make(i)];
            serde.count = 0;
            parent = await putList(saver, parent, list);
            // the body and the new item, whatever the length of the list
            assert.equal(serde.count, 2, `put ${i} serialized ${serde.count} values`);
          }
          // a fresh saver that reads the thread knows its items too
          const reader = new ConvoSaver(store, { serde });
          const t = await reader.getTuple(cfg(parent.id));
          assert.equal(t.checkpoint.channel_values.messages.length, 40);
          serde.count = 0;
          const next = [...t.checkpoint.channel_values.messages, make(40)];
          const c = await putList(reader, parent, next);
          assert.equal(serde.count, 2);
          const stored = (await store.checkpointGet('t', '', c.id)).channels.find((x) => x.channel === 'messages');
          assert.deepEqual(stored.items.seqs, [...Array(41).keys()]);
          assert.equal((await store.loadLog('t')).length, 41);
          // a put does not look inside the log's messages (docs/node.md): one changed in
          // place keeps the text it was stored with, and a read gives that text again
          const original = next[3].content;
          next[3].content = 'changed';
          serde.count = 0;
          const c2 = await putList(reader, c, [...next]);
          assert.equal(serde.count, 1); // the body alone
          const back = (await reader.getTuple(cfg(c2.id))).checkpoint.channel_values.messages;
          assert.equal(back[3].content, original);
          assert.notEqual(back[3], next[3]);
        } finally {
          await store.close();
        }
      });
    }

    test('the part of a list already in the log goes as its length, only what follows item by item', async () => {
      const store = await Store.open(freshUrl(base));
      try {
        const sent = []; // per put: the messages channel as handed to the Store
        const put = store.checkpointPut.bind(store);
        store.checkpointPut = (cp) => {
          const ch = cp.channels.find((c) => c.channel === 'messages');
          sent.push({ prefix: ch.logPrefix ?? 0, items: ch.items.items.length, seqs: ch.items.seqs });
          return put(cp);
        };
        const saver = new ConvoSaver(store);
        const make = (i) => new HumanMessage({ content: `message ${i}`, id: `m${i}` });
        let list = [];
        let parent = null;
        for (let i = 0; i < 30; i++) {
          list = [...list, make(i)];
          parent = await putList(saver, parent, list);
        }
        assert.deepEqual(sent.map((x) => [x.prefix, x.items]), list.map((_, i) => [i, 1]));
        // a saver that read the thread: its revived items are the prefix
        sent.length = 0;
        const reader = new ConvoSaver(store);
        const read = (await reader.getTuple(cfg(parent.id))).checkpoint.channel_values.messages;
        const m30 = make(30);
        let c = await putList(reader, parent, [...read, m30]);
        assert.deepEqual(sent.pop(), { prefix: 30, items: 1, seqs: null });
        // what is inside the objects is not looked at: one changed in place is still taken
        // for the log's message (a node replaces a message by id instead, as above)
        const back = (await reader.getTuple(cfg(c.id))).checkpoint.channel_values.messages;
        back[5].content = 'changed in place';
        c = await putList(reader, c, [...back, make(31)]);
        assert.deepEqual(sent.pop(), { prefix: 31, items: 1, seqs: null });
        const again = (await reader.getTuple(cfg(c.id))).checkpoint.channel_values.messages;
        assert.equal(again[5].content, 'message 5'); // what is stored, revived anew
        assert.equal(again.length, 32);
        // but a message stored without an id that got one in place (as add_messages gives
        // them) is not the stored text: the prefix ends before it
        const noId = new HumanMessage({ content: 'no id' });
        c = await putList(reader, c, [...again, noId]);
        assert.equal(sent.pop().prefix, 32);
        const withNoId = (await reader.getTuple(cfg(c.id))).checkpoint.channel_values.messages;
        assert.equal(withNoId[32].id, undefined);
        withNoId[32].id = 'given later'; // as add_messages does it
        withNoId[32].lc_kwargs.id = 'given later';
        c = await putList(reader, c, [...withNoId, make(33)]);
        const given = sent.pop();
        assert.equal(given.prefix, 32);
        assert.equal(given.items, 2);
        const last = (await reader.getTuple(cfg(c.id))).checkpoint.channel_values.messages;
        assert.deepEqual(last.slice(32).map((m) => m.id), ['given later', 'm33']);
        // a message replaced in the middle (add_messages with a known id): the prefix ends
        // there; the items after it still go by their seqs, the new one by its text
        const edited = [...last, make(34)];
        edited[10] = new HumanMessage({ content: 'edited', id: 'm10' });
        c = await putList(reader, c, edited);
        const e = sent.pop();
        assert.equal(e.prefix, 10);
        assert.equal(e.items, 25);
        // the inline ones (the edited message, the two after the id given in place, the new one)
        assert.deepEqual(e.seqs, [-1, ...Array.from({ length: 21 }, (_, i) => 11 + i), -1, -1, -1]);
        const edits = (await reader.getTuple(cfg(c.id))).checkpoint.channel_values.messages;
        assert.deepEqual(edits.map((m) => m.content), edited.map((m) => m.content));
        // nothing of the old thread is a prefix once it is gone
        await reader.deleteThread('t');
        await putList(reader, null, [read[0], make(40)]);
        assert.deepEqual(sent.pop(), { prefix: 0, items: 2, seqs: null });
      } finally {
        await store.close();
      }
    });

    test('after deleteThread, an item the old thread had is put by its text', async () => {
      const store = await Store.open(freshUrl(base));
      try {
        const saver = new ConvoSaver(store);
        const sys = new HumanMessage({ content: 'the same first message', id: 'sys' }); // shared
        const h1 = new HumanMessage({ content: 'first thread', id: 'h1' });
        await putList(saver, await putList(saver, null, [sys]), [sys, h1]);
        await saver.deleteThread('t');
        const h2 = new HumanMessage({ content: 'second thread', id: 'h2' });
        const c = await putList(saver, null, [sys, h2]);
        assert.deepEqual((await saver.getTuple(cfg(c.id))).checkpoint.channel_values.messages, [sys, h2]);
        assert.deepEqual((await store.loadLog('t')).texts.map((x) => JSON.parse(x).content),
          ['the same first message', 'second thread']);
      } finally {
        await store.close();
      }
    });

    test('messages without an id in an input and a write are stored once', async () => {
      const store = await Store.open(freshUrl(base));
      try {
        const saver = new ConvoSaver(store);
        const human = new HumanMessage('no id here');
        const plain = { role: 'user', content: 'nor here' };
        // the input checkpoint and the __start__ task's write, as LangGraph's loop makes them
        const input = { messages: [human, plain], note: 'x' };
        const v = { __start__: saver.getNextVersion(undefined) };
        const c0 = await saver.put(cfg(undefined), { ...emptyCheckpoint(), id: uuid6(-1),
          channel_values: { __start__: input }, channel_versions: v }, meta, v);
        await saver.putWrites(c0, [['messages', input.messages]], 'start-task');
        assert.ok(human.id, 'the message got its id at once');
        assert.ok(plain.id, 'the plain object got its id at once');
        // the reducer's result: the same message objects, the plain one as a LangChain message
        const committed = [human, new HumanMessage({ content: 'nor here', id: plain.id })];
        const v1 = { messages: saver.getNextVersion(undefined) };
        const c1 = await saver.put(c0, { ...emptyCheckpoint(), id: uuid6(-1), channel_values: { messages: committed },
          channel_versions: { ...v, ...v1 } }, meta, v1);
        const t0 = await saver.getTuple(c0);
        assert.deepEqual(t0.checkpoint.channel_values.__start__.note, 'x');
        assert.deepEqual(t0.checkpoint.channel_values.__start__.messages.map((m) => [m.id, m.content]),
          [[human.id, 'no id here'], [plain.id, 'nor here']]);
        assert.deepEqual(t0.pendingWrites.map((w) => w[2].map((m) => m.id)), [[human.id, plain.id]]);
        assert.deepEqual((await saver.getTuple(c1)).checkpoint.channel_values.messages, committed);
        assert.equal((await store.loadLog('t')).length, 2);
        const raw = await store.checkpointGet('t', '', c0.configurable.checkpoint_id);
        assert.deepEqual(raw.channels.find((x) => x.channel === '__start__').items.seqs, [0, 1]);
        assert.deepEqual(raw.writes[0].items.seqs, [0, 1]);
      } finally {
        await store.close();
      }
    });
  });
}
