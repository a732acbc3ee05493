// sync.test.mjs — calls on the main thread: a Store opened with { sync: true } runs libconvo
// in the call and still answers with promises; ConvoSaver opens memory: and sqlite: stores so
// by default, and its put and putWrites are then settled before a second microtask runs (the
// next LangGraph step cannot run inside them); the serde's dumps are taken at once only when
// they are LangGraph's JsonPlusSerializer's, and give the same bytes.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { emptyCheckpoint, uuid6, JsonPlusSerializer } from '@langchain/langgraph-checkpoint';
import { HumanMessage, AIMessage } from '@langchain/core/messages';
import { Store, InvalidError, NotFoundError } from '../../src/index.js';
import { ConvoSaver } from '../../src/langgraph/index.js';
import { dumpsTyped } from '../../src/langgraph/log.js';
import { freshUrl, wanted } from '../support.mjs';

const meta = { source: 'loop', step: 0, parents: {} };
const cfg = (id) => ({ configurable: { thread_id: 't', checkpoint_ns: '', checkpoint_id: id } });

// whether p is settled after `ticks` microtasks
async function settledWithin(p, ticks) {
  let settled = false;
  p.then(() => { settled = true; }, () => { settled = true; });
  for (let i = 0; i < ticks; i++) await null;
  const out = settled;
  await p.catch(() => {});
  return out;
}

function checkpointOf(messages, versions) {
  return { ...emptyCheckpoint(), id: uuid6(-1), channel_values: { messages }, channel_versions: versions };
}

describe('the serde dumped at once', () => {
  test("LangGraph's JsonPlusSerializer: the same bytes as its dumpsTyped, not a promise", async () => {
    const serde = new JsonPlusSerializer();
    const values = [
      new HumanMessage({ content: 'hi', id: 'h1' }),
      new AIMessage({ content: '', id: 'a1', tool_calls: [{ name: 'f', args: { x: 1 }, id: 'c1' }] }),
      { a: 1, b: [1, 'two', null], c: { d: undefined } },
      new Set([1, 2]), new Map([['k', 'v']]), new Uint8Array([1, 2, 3]), 'text', 42, null,
    ];
    for (const v of values) {
      const now = dumpsTyped(serde, v);
      assert.ok(Array.isArray(now), 'not a promise');
      const later = await serde.dumpsTyped(v);
      assert.equal(now[0], later[0]);
      assert.deepEqual(Buffer.from(now[1]), Buffer.from(later[1]));
    }
  });

  test('a serde with its own dumpsTyped is called as it is', async () => {
    class Other extends JsonPlusSerializer {
      async dumpsTyped(v) {
        return ['json', new TextEncoder().encode(JSON.stringify({ wrapped: v }))];
      }
    }
    const out = dumpsTyped(new Other(), { a: 1 });
    assert.ok(out instanceof Promise);
    assert.equal(Buffer.from((await out)[1]).toString(), '{"wrapped":{"a":1}}');
  });
});

if (wanted('sqlite')) {
  describe('Store.open with { sync: true }', () => {
    test('calls run in the call and answer with promises; a failure rejects', async () => {
      const store = await Store.open(freshUrl('sqlite:'), { sync: true });
      try {
        assert.equal(store.sync, true);
        const appended = store.append('t', [{ role: 'user', content: 'hi' }]);
        assert.ok(appended instanceof Promise);
        assert.equal((await appended).count, 1);
        assert.equal((await store.load('t')).messages.length, 1);
        const missing = store.checkpointGet('t', '', 'nope');
        assert.ok(missing instanceof Promise);
        await assert.rejects(missing, NotFoundError);
        await store.checkpointPut({ threadId: 't', id: 'c1', channels: [{ channel: 'x', version: '1',
          value: { type: 'json', bytes: '1' } }] });
        await store.checkpointPutWrites('t', '', 'c1', 'task', '', [{ idx: 0, channel: 'x',
          value: { type: 'json', bytes: '2' } }]);
        const cp = await store.checkpointGet('t', '', 'c1');
        assert.equal(cp.writes.length, 1);
        await assert.rejects(store.checkpointPutWrites('t', '', 'absent', 'task', '', [{ idx: 0, channel: 'x',
          value: { type: 'json', bytes: '2' } }]), NotFoundError);
        // export and import call back into JavaScript from inside the call
        const dump = await store.export(['t']);
        const other = await Store.open(freshUrl('sqlite:'), { sync: true });
        try {
          assert.equal((await other.import(dump)).messages, 1);
          assert.equal((await other.load('t')).messages[0].json, (await store.load('t')).messages[0].json);
        } finally {
          await other.close();
        }
      } finally {
        await store.close();
      }
      await assert.rejects(store.load('t'), InvalidError); // closed
      assert.equal((await Store.open('memory:')).sync, false); // the default
    });

    test('sync must be a boolean', async () => {
      await assert.rejects(Store.open('memory:', { sync: 'yes' }), (e) => e instanceof InvalidError && /sync/.test(e.message));
    });
  });

  describe('ConvoSaver: calls on the main thread for memory: and sqlite:', () => {
    test('the default by URL, the option, and a Store passed in', async () => {
      const cases = [[freshUrl('sqlite:'), {}, true], ['memory:', {}, true], [freshUrl('sqlite:'), { sync: false }, false],
        ['memory:', { sync: false }, false]];
      for (const [url, opts, sync] of cases) {
        const saver = new ConvoSaver(url, opts);
        assert.equal((await saver.store()).sync, sync, `${url} ${JSON.stringify(opts)}`);
        await saver.close();
      }
      const store = await Store.open('memory:');
      assert.equal((await new ConvoSaver(store).store()).sync, false); // as it was opened
      assert.throws(() => new ConvoSaver(store, { sync: true }), (e) => e instanceof InvalidError && /Store\.open/.test(e.message));
      assert.throws(() => new ConvoSaver('memory:', { sync: 1 }), (e) => e instanceof InvalidError && /sync/.test(e.message));
      await store.close();
    });

    for (const [name, opts, now] of [['on the main thread', {}, true], ['on the pool', { sync: false }, false]]) {
      test(`put and putWrites ${name} are ${now ? '' : 'not '}settled within one microtask`, async () => {
        const saver = new ConvoSaver(freshUrl('sqlite:'), opts);
        try {
          const v1 = { messages: saver.getNextVersion(undefined) };
          // the first put reads the thread's generation: it may wait
          const c1 = await saver.put(cfg(undefined), checkpointOf([new HumanMessage({ content: 'q0', id: 'h0' })], v1), meta, v1);
          const v2 = { messages: saver.getNextVersion(v1.messages) };
          const list = [new HumanMessage({ content: 'q0', id: 'h0' }), new AIMessage({ content: 'a0', id: 'a0' })];
          assert.equal(await settledWithin(saver.putWrites(c1, [['messages', [list[1]]]], 'task1'), 1), now);
          assert.equal(await settledWithin(saver.put(c1, checkpointOf(list, v2), meta, v2), 1), now);
          const back = await saver.getTuple({ configurable: { thread_id: 't' } });
          assert.deepEqual(back.checkpoint.channel_values.messages.map((m) => m.content), ['q0', 'a0']);
          const first = await saver.getTuple(c1);
          assert.deepEqual(first.pendingWrites.map(([task, ch, v]) => [task, ch, v.map((m) => m.content)]),
            [['task1', 'messages', ['a0']]]);
        } finally {
          await saver.close();
        }
      });
    }

    test('a failure on the main thread rejects the call; nothing is thrown at the caller', async () => {
      const saver = new ConvoSaver(freshUrl('sqlite:'));
      try {
        await saver.store();
        const p = saver.putWrites(cfg('never-put'), [['x', 1]], 'task');
        assert.ok(p instanceof Promise);
        const bad = saver.put({ configurable: {} }, checkpointOf([], {}), meta, {});
        await assert.rejects(bad, InvalidError);
        await saver.close(); // fails the writes still waiting for their put
        await assert.rejects(p, NotFoundError);
      } finally {
        await saver.close();
      }
    });
  });
}
