// saver-review.test.mjs — ConvoSaver returns what was put in cases the review found
// wrong: a checkpoint copied as LangGraph's updateState(..., '__copy__') puts it (the
// values of the copied checkpoint, its parent as parent, no new versions), and a body
// whose own field is named like the saver's marker `__convo_log__`, a message changed in
// place between puts, contents the library's JSON check refused (lone surrogates).
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { emptyCheckpoint, uuid6 } from '@langchain/langgraph-checkpoint';
import { HumanMessage, AIMessage } from '@langchain/core/messages';
import { Store, NotFoundError, InvalidError } from '../../src/index.js';
import { ConvoSaver } from '../../src/langgraph/index.js';
import { drivers, freshUrl } from '../support.mjs';

const meta = { source: 'loop', step: 0, parents: {} };
const root = (thread) => ({ configurable: { thread_id: thread, checkpoint_ns: '' } });

async function putValues(saver, parent, values, extra = {}) {
  const prev = parent.configurable.checkpoint_id ? await saver.getTuple(parent) : undefined;
  const versions = { ...(prev?.checkpoint.channel_versions ?? {}) };
  const newVersions = {};
  for (const k of Object.keys(values)) newVersions[k] = versions[k] = saver.getNextVersion(versions[k]);
  const checkpoint = { ...emptyCheckpoint(), ...extra, id: uuid6(-1),
    channel_values: { ...(prev?.checkpoint.channel_values ?? {}), ...values }, channel_versions: versions };
  return saver.put(parent, checkpoint, meta, newVersions);
}

// LangGraph's updateState(config, values, '__copy__'): the saved checkpoint's values and
// versions under a new id, put with the saved checkpoint's parent and no new versions.
async function copyOf(saver, config) {
  const saved = await saver.getTuple(config);
  const checkpoint = { ...saved.checkpoint, id: uuid6(-1) };
  const parent = saved.parentConfig ??
    { configurable: { ...saved.config.configurable, checkpoint_id: undefined } };
  return saver.put(parent, checkpoint, meta, {});
}

// memory: and SQLite twice: their calls on the main thread (the saver's default there) and
// on libuv's pool
const modes = drivers().flatMap(([name, base]) => (['memory', 'sqlite'].includes(name)
  ? [[name, base, {}], [`${name}, calls on the pool`, base, { sync: false }]] : [[name, base, {}]]));

for (const [name, base, opts] of modes) {
  describe(`ConvoSaver review on ${name}`, () => {
    test('bad configs and filters reject with InvalidError; nothing is written', async () => {
      const saver = new ConvoSaver(freshUrl(base), opts);
      const first = await putValues(saver, root('t'), { x: 1 });
      const all = async (config, options) => {
        const ids = [];
        for await (const t of saver.list(config, options)) ids.push(t.config.configurable.checkpoint_id);
        return ids;
      };
      const bad = (re) => (e) => e instanceof InvalidError && re.test(e.message);
      const cp = { ...emptyCheckpoint(), id: uuid6(-1) };
      await assert.rejects(saver.put({ configurable: {} }, cp, meta, {}), bad(/thread_id is required/));
      await assert.rejects(saver.put(undefined, cp, meta, {}), bad(/thread_id is required/));
      await assert.rejects(saver.put({ configurable: { thread_id: { id: 5 } } }, cp, meta, {}),
        bad(/threadId must be a string/)); // crashed the process before args.js
      await assert.rejects(saver.put({ configurable: { thread_id: 't', checkpoint_ns: 5 } }, cp, meta, {}),
        bad(/ns must be a string/));
      await assert.rejects(saver.getTuple({ configurable: { thread_id: 't', checkpoint_ns: 5 } }), bad(/ns/));
      await assert.rejects(saver.putWrites({ configurable: {} }, [['x', 1]], 'task'), bad(/thread_id/));
      // a filter that is not an object was ignored (a number: everything listed) or sent as JSON text
      for (const filter of [5, 'abc', [1], true]) {
        await assert.rejects(all(root('t'), { filter }), bad(/list filter must be an object/));
      }
      await assert.rejects(all({ configurable: { thread_id: true } }), bad(/threadId/));
      await assert.rejects(all(root('t'), { limit: -1 }), bad(/limit/));
      assert.deepEqual(await all(root('t'), null), [first.configurable.checkpoint_id]);
      await saver.close();
    });

    test('a number as thread id names the thread of its decimal text, as in LangGraph', async () => {
      const saver = new ConvoSaver(freshUrl(base), opts);
      const c1 = await putValues(saver, root(7), { messages: [new HumanMessage({ content: 'hi', id: 'h' })] });
      assert.equal(c1.configurable.thread_id, '7');
      await saver.putWrites(c1, [['x', 1]], 'task');
      for (const id of [7, '7', 7n]) {
        const t = await saver.getTuple({ configurable: { thread_id: id, checkpoint_ns: '' } });
        assert.equal(t?.config.configurable.checkpoint_id, c1.configurable.checkpoint_id);
        assert.equal(t.pendingWrites.length, 1);
        const ids = [];
        for await (const x of saver.list({ configurable: { thread_id: id } })) ids.push(x.config.configurable.checkpoint_id);
        assert.deepEqual(ids, [c1.configurable.checkpoint_id]);
      }
      const c2 = await putValues(saver, { configurable: { ...c1.configurable, thread_id: 7 } },
        { messages: [new HumanMessage({ content: 'hi', id: 'h' }), 'more'] });
      const before = [];
      for await (const x of saver.list(undefined, { before: { configurable: { ...c2.configurable, thread_id: 7 } } })) {
        before.push(x.config.configurable.checkpoint_id);
      }
      assert.deepEqual(before, [c1.configurable.checkpoint_id]);
      assert.equal((await (await saver.store()).load('7')).messages.length, 2);
      await saver.deleteThread(7);
      assert.equal(await saver.getTuple(root('7')), undefined);
      await saver.close();
    });

    test('a copied checkpoint (__copy__) has the values of the one copied', async () => {
      const saver = new ConvoSaver(freshUrl(base), opts);
      const a = new HumanMessage({ content: 'hi', id: 'a' });
      const b = new AIMessage({ content: 'hello there', id: 'b' });
      const c1 = await putValues(saver, root('t'), { messages: [a] });
      const c2 = await putValues(saver, c1, { messages: [a, b] });
      const copy2 = await copyOf(saver, c2);
      assert.deepEqual((await saver.getTuple(copy2)).checkpoint.channel_values.messages, [a, b]);
      // a copy of the first checkpoint: no parent
      const copy1 = await copyOf(saver, c1);
      assert.deepEqual((await saver.getTuple(copy1)).checkpoint.channel_values.messages, [a]);
      // a fresh saver (no cache) reads the same
      const other = new ConvoSaver(await saver.store());
      assert.deepEqual((await other.getTuple(copy2)).checkpoint.channel_values.messages, [a, b]);
      await saver.close();
    });

    test('a checkpoint field named __convo_log__ comes back', async () => {
      const saver = new ConvoSaver(freshUrl(base), opts);
      const a = new HumanMessage({ content: 'hi', id: 'a' });
      for (const mark of [{ messages: 7 }, null, 'x', [1, 2]]) {
        const c = await putValues(saver, root(`m${JSON.stringify(mark)}`), { messages: [a] },
          { __convo_log__: mark });
        const t = await saver.getTuple(c);
        assert.deepEqual(t.checkpoint.__convo_log__, mark);
        assert.deepEqual(t.checkpoint.channel_values.messages, [a]);
        const c2 = await putValues(saver, c, { messages: [a, 'b'] }, { __convo_log__: mark });
        const t2 = await new ConvoSaver(await saver.store()).getTuple(c2);
        assert.deepEqual(t2.checkpoint.__convo_log__, mark);
        assert.deepEqual(t2.checkpoint.channel_values.messages, [a, 'b']);
      }
      await saver.close();
    });

    test('a message changed in place is stored as it is at the put', async () => {
      const saver = new ConvoSaver(freshUrl(base), opts);
      const h = new HumanMessage({ content: 'first text', id: 'h' });
      const c1 = await putValues(saver, root('m'), { messages: [h] });
      h.content = 'second text';
      const c2 = await putValues(saver, c1, { messages: [h] });
      h.id = 'h2';
      const c3 = await putValues(saver, c2, { messages: [h, 'x'] });
      const fresh = new ConvoSaver(await saver.store());
      assert.equal((await fresh.getTuple(c1)).checkpoint.channel_values.messages[0].content, 'first text');
      assert.equal((await fresh.getTuple(c2)).checkpoint.channel_values.messages[0].content, 'second text');
      const m3 = (await fresh.getTuple(c3)).checkpoint.channel_values.messages;
      assert.equal(m3[0].id, 'h2');
      assert.equal(m3[0].content, 'second text');
      await saver.close();
    });

    test('a tail rewritten by another writer is not mixed into the next put', async () => {
      // The saver's mirror of the log was checked by length only: a rewrite that kept the
      // length let its next put take the other writer's message for its own.
      const saver = new ConvoSaver(freshUrl(base), opts);
      const store = await saver.store();
      const h1 = new HumanMessage({ content: 'hello', id: 'h1' });
      const a1 = new AIMessage({ content: 'first answer', id: 'a1' });
      const c1 = await putValues(saver, root('rw'), { messages: [h1, a1] });
      const before = await store.load('rw');
      assert.equal(before.length, 2);
      // another writer regenerates the answer in place (same length, next generation)
      const other = JSON.stringify({ role: 'assistant', content: 'regenerated', id: 'a1x' });
      const r = await store.replaceTail('rw', { keep: 1, messages: [other], dropCheckpoints: true });
      assert.equal(r.generation, before.generation + 1);
      const h2 = new HumanMessage({ content: 'and then?', id: 'h2' });
      const c2 = await putValues(saver, c1, { messages: [h1, a1, h2] });
      for (const s of [saver, new ConvoSaver(store)]) {
        const got = (await s.getTuple(c2)).checkpoint.channel_values.messages;
        assert.deepEqual(got.map((m) => [m.id, m.content]),
          [['h1', 'hello'], ['a1', 'first answer'], ['h2', 'and then?']]);
      }
      // the other writer's message is still the log's
      const log = await store.load('rw');
      assert.equal(JSON.parse(log.messages[1].json).content, 'regenerated');
      await saver.close();
    });

    test('close ends the putWrites calls waiting for a put', async () => {
      const saver = new ConvoSaver(freshUrl(base), opts);
      const t0 = Date.now();
      const waiting = saver.putWrites({ configurable: { thread_id: 'w', checkpoint_ns: '',
        checkpoint_id: uuid6(-1) } }, [['a', 1]], 'task');
      await new Promise((r) => setTimeout(r, 50));
      await saver.close();
      // NotFoundError when it was waiting, InvalidError (store closed) when its first call
      // came after the close
      await assert.rejects(waiting, (e) => e instanceof NotFoundError || e instanceof InvalidError);
      assert.ok(Date.now() - t0 < 5000);
    });

    test('contents with escapes, unicode and lone surrogates round-trip', async () => {
      const saver = new ConvoSaver(freshUrl(base), opts);
      const odd = ['"content":"quoted" \\ \n\t\u0000\u2028 é 中文 🎉 \ud800 x \udfff end',
        '\\"content\\":\\"' + 'z'.repeat(40), '🎉'.repeat(20), '\ud83c'.repeat(9)];
      const items = [];
      let c = root('u');
      for (const s of odd) {
        items.push(new HumanMessage({ content: s, id: `id${items.length}` }), s,
          { role: 'user', content: s }, new AIMessage({ content: [{ type: 'text', text: s }] }));
        c = await putValues(saver, c, { messages: [...items] });
      }
      const t = await new ConvoSaver(await saver.store()).getTuple(c);
      assert.deepEqual(t.checkpoint.channel_values.messages, items);
      for (const [i, m] of t.checkpoint.channel_values.messages.entries()) {
        if (typeof m === 'string') assert.equal(m, items[i]);
        else if (typeof m.content === 'string') assert.equal(m.content, items[i].content);
      }
      await saver.close();
    });
  });
}
