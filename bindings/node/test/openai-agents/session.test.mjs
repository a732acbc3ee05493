// ConvoSession's calls, on every driver, against the SDK's MemorySession: items of every
// kind come back deep-equal; getItems(limit) reads only the tail and, after a full read (by
// any session of the Store), only what was appended since; the history transactions (replay, an operationId reused
// for another transaction, a stale suffix: errors that change nothing); clearSession keeps
// the thread's extra; a URL-opened store is closed, a given one is not; list() by extra;
// getItems' items frozen and shared (mutableItems: copies).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MemorySession } from '@openai/agents';
import { Store, ConflictError, InvalidError } from 'convo';
import { ConvoSession } from 'convo/openai-agents';
import { drivers, freshUrl } from '../support.mjs';

const user = (content) => ({ type: 'message', role: 'user', content });
const answer = (text, id) => ({ type: 'message', role: 'assistant', status: 'completed', id,
  content: [{ type: 'output_text', text, annotations: [] }] });
const callOf = (callId) => ({ type: 'function_call', callId, name: 'weather', arguments: '{"city":"Oslo"}',
  status: 'completed', providerData: { nested: { a: [1, 2, null] } } });
const resultOf = (callId) => ({ type: 'function_call_result', callId, name: 'weather', status: 'completed',
  output: { type: 'text', text: 'sunny' } });

// Items JSON alone would not give back: each must come back deep-equal.
const ODD = [
  { type: 'message', role: 'user', content: [{ type: 'input_image', image: { data: new Uint8Array([0, 1, 255]), mediaType: 'image/png' } }] },
  { type: 'function_call_result', callId: 'c9', name: 'n', status: 'completed', output: 'x', providerData: undefined },
  { type: 'reasoning', content: [], providerData: { score: -0, big: Number.POSITIVE_INFINITY, nan: NaN } },
  { type: 'message', role: 'assistant', content: 'half an emoji \ud83d', status: 'completed' },
  { type: 'unknown', providerData: { $item: 1, $op: 'x', $undefined: 1, when: new Date(86400000) } },
  { role: 'user', content: 'no type' },
  { type: 'x'.repeat(100), providerData: {} },
  { type: 'function_call', role: 'function_call', callId: 'c', name: 'n', arguments: '' },
  {},
];

// A step on both sessions; both must answer alike (resolve to equal values, or both throw).
async function both(sessions, f) {
  const run = async (s) => {
    try {
      return { value: await f(s) };
    } catch (e) {
      return { threw: true };
    }
  };
  const [a, b] = [await run(sessions.convo), await run(sessions.memory)];
  assert.deepEqual(a, b);
  assert.deepEqual(await sessions.convo.getItems(), await sessions.memory.getItems());
  return a.value;
}

for (const [name, base] of drivers()) {
  test(`${name}: items of every kind come back deep-equal, and convo load shows their roles`, async () => {
    const store = await Store.open(freshUrl(base));
    const session = new ConvoSession({ store, sessionId: 'odd' });
    try {
      const items = [user('hi'), callOf('c1'), resultOf('c1'), answer('hello', 'm1'), ...ODD];
      await session.addItems(items);
      assert.deepEqual(await session.getItems(), items);
      assert.deepEqual(await new ConvoSession({ store, sessionId: 'odd' }).getItems(), items);
      const h = await store.load('odd');
      assert.deepEqual(h.messages.map((m) => m.role), ['user', 'function_call', 'function_call_result',
        'assistant', 'user', 'function_call_result', 'reasoning', 'assistant', 'unknown', 'user', 'item',
        'function_call', 'item']);
      // the common items are their own JSON, with the role in front for those without one
      assert.equal(h.messages[0].json, JSON.stringify(items[0]));
      assert.equal(h.messages[1].json, JSON.stringify({ role: 'function_call', ...items[1] }));
      assert.equal(h.messages[3].json, JSON.stringify(items[3]));
      for (const [i, item] of items.entries()) assert.deepEqual(await session.getItems(items.length - i), items.slice(i), `${i}`);
      await assert.rejects(session.addItems([new Map()]), InvalidError);
      await assert.rejects(session.addItems([user('ok'), { type: 'x', f: () => 1 }]), InvalidError);
      await assert.rejects(session.addItems('items'), InvalidError);
      assert.equal((await store.load('odd')).length, items.length, 'a refused batch stores nothing');
    } finally {
      await store.close();
    }
  });

  test(`${name}: the Session calls as MemorySession's`, async () => {
    const store = await Store.open(freshUrl(base));
    const sessions = { convo: new ConvoSession({ store, sessionId: 's' }), memory: new MemorySession({ sessionId: 's' }) };
    try {
      assert.equal(await sessions.convo.getSessionId(), 's');
      assert.match(await new ConvoSession({ store }).getSessionId(), /^[0-9a-f-]{36}$/);
      await both(sessions, (s) => s.getItems());
      await both(sessions, (s) => s.popItem());
      await both(sessions, (s) => s.clearSession());
      await both(sessions, (s) => s.addItems([]));
      for (let t = 0; t < 6; t++) {
        await both(sessions, (s) => s.addItems([user(`q${t}`), callOf(`c${t}`), resultOf(`c${t}`), answer(`a${t}`, `m${t}`)]));
      }
      for (const limit of [undefined, 0, -1, 1, 5, 24, 100, 2.5]) await both(sessions, (s) => s.getItems(limit));
      await both(sessions, (s) => s.popItem());
      await both(sessions, (s) => s.popItem());
      await both(sessions, (s) => s.addItems([answer('again', 'm9')]));
      await both(sessions, (s) => s.getItems(3));
      await both(sessions, (s) => s.clearSession());
      await both(sessions, (s) => s.popItem());
      await both(sessions, (s) => s.addItems([user('after clear')]));
    } finally {
      await store.close();
    }
  });

  test(`${name}: getItems(limit) reads the tail; getItems() then reads only what was appended`, async () => {
    const store = await Store.open(freshUrl(base));
    const loads = [];
    const load = store.load.bind(store);
    store.load = async (thread, opts) => {
      const h = await load(thread, opts);
      loads.push({ opts, read: h.messages.length });
      return h;
    };
    const session = new ConvoSession({ store, sessionId: 'long' });
    const other = new ConvoSession({ store, sessionId: 'long' });
    try {
      for (let t = 0; t < 20; t++) await other.addItems(Array.from({ length: 10 }, (_, i) => user(`${t}.${i}`)));
      loads.length = 0;
      assert.deepEqual((await session.getItems(3)).map((i) => i.content), ['19.7', '19.8', '19.9']);
      assert.deepEqual(loads, [{ opts: { tail: 3, withExtra: false }, read: 3 }]);
      assert.equal((await session.getItems()).length, 200);
      await other.addItems([user('new')]);
      loads.length = 0;
      assert.equal((await session.getItems()).length, 201);
      assert.deepEqual((await session.getItems(2)).map((i) => i.content), ['19.9', 'new']);
      assert.deepEqual(loads.map((l) => l.read), [1, 0], 'only the new message was read');
      // a new session object on the same Store (one per request, say) goes on from there too
      loads.length = 0;
      assert.equal((await new ConvoSession({ store, sessionId: 'long' }).getItems()).length, 201);
      assert.deepEqual(loads.map((l) => l.read), [0]);
      // another writer's rewrite: the generation tells, and the thread is read again
      await other.popItem();
      await other.addItems([user('changed')]);
      loads.length = 0;
      const items = await session.getItems();
      assert.equal(items.length, 201);
      assert.equal(items[200].content, 'changed');
      assert.deepEqual(loads.map((l) => l.read), [0, 201], 'nothing past 201, a new generation: all again');
      await store.delete('long');
      assert.deepEqual(await session.getItems(), []);
      assert.deepEqual(await session.getItems(5), []);
    } finally {
      await store.close();
    }
  });

  test(`${name}: history transactions: replays, a reused operationId, a stale suffix`, async () => {
    const store = await Store.open(freshUrl(base));
    const sessions = { convo: new ConvoSession({ store, sessionId: 'tx' }), memory: new MemorySession() };
    const apply = (operationId, transaction) => (s) => s.applyHistoryTransaction({ operationId, transaction });
    const append = (items) => ({ type: 'append_items', items });
    const replace = (expectedSuffix, replacement) => ({ type: 'replace_suffix', expectedSuffix, replacement });
    try {
      // on a session that does not exist yet
      await both(sessions, apply('r0', replace([], [user('first')])));
      await both(sessions, apply('r0', replace([], [user('first')])));
      await both(sessions, apply('a1', append([user('q'), callOf('c1'), resultOf('c1')])));
      await both(sessions, apply('a1', append([user('q'), callOf('c1'), resultOf('c1')]))); // a retry
      await both(sessions, apply('a1', append([user('other')]))); // another transaction: refused
      await both(sessions, apply('a1', append([user('q'), callOf('c1')]))); // refused
      // the suffix compared as items, whatever the key order of the caller's objects
      const reordered = { output: { text: 'sunny', type: 'text' }, status: 'completed', name: 'weather',
        callId: 'c1', type: 'function_call_result' };
      await both(sessions, apply('r1', replace([reordered], [resultOf('c1'), answer('done', 'm1')])));
      await both(sessions, apply('r1', replace([reordered], [resultOf('c1'), answer('done', 'm1')]))); // a retry
      await both(sessions, apply('r1', replace([answer('done', 'm1')], [answer('other', 'm2')]))); // reused: refused
      await both(sessions, apply('r1', replace([resultOf('c1')], [answer('done', 'm1')]))); // reused: refused
      await both(sessions, apply('r2', replace([resultOf('c1')], [answer('x', 'm3')]))); // stale: refused
      await both(sessions, apply('r3', replace([user('q'), callOf('c1')], []))); // stale: refused
      await both(sessions, apply('r4', replace([answer('done', 'm1')], []))); // removes it
      await both(sessions, apply('r5', replace([], [answer('appended', 'm4')])));
      await both(sessions, apply('r6', replace([resultOf('c1'), answer('appended', 'm4')], ODD.slice(1, 3))));
      await both(sessions, apply('r6', replace([resultOf('c1'), answer('appended', 'm4')], ODD.slice(1, 3))));
      await both(sessions, (s) => s.getItems(4));
      // the same replacement at the same place, from another expected suffix: another
      // transaction all the same
      await both(sessions, apply('r7', replace([ODD[2]], [answer('y', 'm7')])));
      await both(sessions, apply('r7', replace([answer('z', 'm8')], [answer('y', 'm7')])));
      await both(sessions, apply('r7', replace([ODD[2]], [answer('y', 'm7')])));
      // what the convo side says when it refuses
      const convo = sessions.convo;
      await assert.rejects(apply('a1', append([user('other')]))(convo), (e) => e instanceof ConflictError &&
        /operation a1: idempotency key openai-agents:a1 was used for another/.test(e.message));
      await assert.rejects(apply('r9', replace([user('nope')], []))(convo),
        (e) => e instanceof ConflictError && /suffix no longer matches/.test(e.message));
      for (const bad of [{ operationId: '', transaction: append([]) }, { operationId: 'x', transaction: { type: 'drop' } },
        { operationId: 'x', transaction: { type: 'append_items', items: [], more: 1 } }, null,
        { operationId: 'x', transaction: replace([], [new Set()]) }]) {
        await assert.rejects(convo.applyHistoryTransaction(bad), InvalidError, JSON.stringify(bad));
      }
      assert.deepEqual(await convo.getItems(), await sessions.memory.getItems());
    } finally {
      await store.close();
    }
  });

  test(`${name}: clearSession and compaction keep the thread's extra; list by extra, newest first`, async () => {
    const store = await Store.open(freshUrl(base));
    try {
      const a = new ConvoSession({ store, sessionId: 'a', extra: { userId: 'u1', title: 'first' } });
      const b = new ConvoSession({ store, sessionId: 'b', extra: { userId: 'u2' } });
      const c = new ConvoSession({ store, sessionId: 'c', extra: { userId: 'u1' } });
      assert.equal(await a.getExtra(), null);
      await a.addItems([user('1')]);
      await b.addItems([user('2')]);
      await c.addItems([user('3')]);
      await a.addItems([user('4')]); // a: the newest activity
      await a.saveExtra({ title: 'renamed' });
      await a.clearSession();
      assert.deepEqual(await a.getItems(), []);
      assert.deepEqual(await a.getExtra(), { userId: 'u1', title: 'renamed' });
      await c.replaceHistoryWithCompaction([{ type: 'compaction', encrypted_content: 'e' }, user('kept')]);
      assert.deepEqual(await c.getItems(), [{ type: 'compaction', encrypted_content: 'e' }, user('kept')]);
      assert.deepEqual(await c.getExtra(), { userId: 'u1' });
      const fresh = new ConvoSession({ store, sessionId: 'd' });
      await fresh.replaceHistoryWithCompaction([{ type: 'compaction', encrypted_content: 'e' }]);
      assert.equal((await fresh.getItems()).length, 1);
      {
        const page = await ConvoSession.list(store, { where: { userId: 'u1' } });
        assert.deepEqual(page.sessions.map((s) => [s.sessionId, s.length, s.extra]),
          [['c', 2, { userId: 'u1' }], ['a', 0, { userId: 'u1', title: 'renamed' }]]);
        assert.equal(page.next, null);
        const first = await ConvoSession.list(store, { where: { userId: 'u1' }, limit: 1 });
        assert.deepEqual(first.sessions.map((s) => s.sessionId), ['c']);
        const second = await ConvoSession.list(store, { where: { userId: 'u1' }, limit: 1, after: first.next });
        assert.deepEqual(second.sessions.map((s) => s.sessionId), ['a']);
        assert.ok(second.sessions[0].createdAt < second.sessions[0].updatedAt);
        const withLast = await ConvoSession.list(store, { where: { userId: 'u1' }, withLastItem: true });
        assert.deepEqual(withLast.sessions.map((s) => s.lastItem), [user('kept'), null]);
        assert.deepEqual((await ConvoSession.list(store, { order: 'id' })).sessions.map((s) => s.sessionId),
          ['a', 'b', 'c', 'd']);
        await assert.rejects(ConvoSession.list(store, { limit: 0 }), InvalidError);
      }
      await assert.rejects(ConvoSession.list('memory:'), InvalidError);
    } finally {
      await store.close();
    }
  });
}

test('a session opens and closes its own store from a URL, and leaves a given one open', async () => {
  const url = freshUrl('sqlite:');
  const own = new ConvoSession({ url, sessionId: 'x', extra: { userId: 'u' } });
  await own.addItems([user('kept')]);
  await own.close();
  await own.close(); // idempotent
  await assert.rejects(own.getItems(), InvalidError);
  await assert.rejects(own.getSessionId(), InvalidError);
  const store = await Store.open(url);
  const given = new ConvoSession({ store, sessionId: 'x' });
  assert.deepEqual(await given.getItems(), [user('kept')]);
  await given.close();
  assert.equal((await store.load('x')).length, 1, 'the given store is still open');
  await store.close();
  const never = new ConvoSession({ url });
  await never.close(); // never opened: nothing to close
  for (const bad of [undefined, {}, { url, store }, { store: {} }, { url: 1 }, { url, sessionId: 5 },
    { url, extra: [] }]) {
    assert.throws(() => new ConvoSession(bad), InvalidError, JSON.stringify(bad));
  }
  const broken = new ConvoSession({ url: 'nosuch://x' });
  await assert.rejects(broken.getItems(), InvalidError);
  await broken.close();
});

// What the tests below add: items of the three forms, bytes and a Date among them.
function mixedItems() {
  const proto = JSON.parse('{"type":"message","role":"user","content":"p","__proto__":{"polluted":1}}');
  return [answer('hello', 'm1'), callOf('c1'), proto, ODD[0], ODD[4]];
}

test('getItems hands out deep-frozen items, the same objects at every call: a change throws and changes nothing', async () => {
  const store = await Store.open('memory:');
  const a = new ConvoSession({ store, sessionId: 'c' });
  const b = new ConvoSession({ store, sessionId: 'c' });
  try {
    const items = mixedItems();
    await a.addItems(items);
    const tail = await a.getItems(2); // (the tail read: nothing read before)
    assert.ok(tail.every((i) => Object.isFrozen(i)), 'a tail read hands out frozen items too');
    const first = await a.getItems();
    assert.deepEqual(first, items);
    assert.ok(Object.hasOwn(first[2], '__proto__') && first[2].polluted === undefined,
      'a "__proto__" key stays an own key');
    assert.throws(() => { first[0].content[0].text = 'changed'; }, TypeError);
    assert.throws(() => first[1].providerData.nested.a.push(3), TypeError);
    assert.throws(() => { delete first[2].content; }, TypeError);
    assert.throws(() => { first[4].providerData.extra = 1; }, TypeError);
    // bytes and Dates (form C) are made anew at each call: changing them changes nothing either
    first[3].content[0].image.data[0] = 9;
    first[4].providerData.when.setTime(0);
    // the array is the caller's
    first.push({ type: 'message', role: 'user', content: 'mine' });
    first.splice(0, 1);
    const second = await a.getItems();
    assert.deepEqual(second, items);
    assert.equal((await a.getItems())[0], second[0], 'the same object at every call');
    assert.notEqual(second[3], first[2], 'an item with bytes is decoded again at each call');
    assert.deepEqual(await b.getItems(), items);
    assert.equal((await b.getItems())[1], second[1], 'and shared by the sessions of the Store');
    assert.deepEqual(await b.getItems(2), items.slice(3));
  } finally {
    await store.close();
  }
});

test('mutableItems: getItems gives new objects each call: changing them changes neither the next read nor another session\'s', async () => {
  const store = await Store.open('memory:');
  const a = new ConvoSession({ store, sessionId: 'c', mutableItems: true });
  const b = new ConvoSession({ store, sessionId: 'c', mutableItems: true });
  try {
    const items = mixedItems();
    await a.addItems(items);
    const tail = await a.getItems(2);
    tail[0].content[0].image.data[0] = 7;
    tail[1].providerData.x = 1;
    const first = await a.getItems();
    assert.deepEqual(first, items);
    assert.ok(Object.hasOwn(first[2], '__proto__') && first[2].polluted === undefined,
      'a "__proto__" key stays an own key');
    first[0].content[0].text = 'changed';
    first[1].providerData.nested.a.push(3);
    first[3].content[0].image.data[0] = 9;
    first[4].providerData.when.setTime(0);
    delete first[2].content;
    assert.deepEqual(await a.getItems(), items);
    assert.deepEqual(await b.getItems(), items);
    assert.deepEqual(await b.getItems(2), items.slice(3));
    // a frozen-items session of the same Store shares the kept items: still unchanged
    assert.deepEqual(await new ConvoSession({ store, sessionId: 'c' }).getItems(), items);
    assert.throws(() => new ConvoSession({ store, sessionId: 'c', mutableItems: 1 }), InvalidError);
  } finally {
    await store.close();
  }
});
