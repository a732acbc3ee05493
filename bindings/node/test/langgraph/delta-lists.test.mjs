// delta-lists.test.mjs — DeltaLists (src/langgraph/delta.js) builds a put's delta list in
// O(new items): the part of the parent's list that is the log's messages 0, 1, ... goes to
// the Store as a log prefix (its items are not handed over), the parent's arrays are grown in
// place for its first child and copied for any other, and a list of another generation
// token is handed over whole, by text.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DeltaLists, selectionOf, DELTA_KEY } from '../../src/langgraph/delta.js';

const T = (i) => `{"role":"user","content":"m${i}"}`;
const gen = {}; // a generation token (compared by identity)

// A saver's delta lists after a first checkpoint 'c0' whose list is m0..m(n-1), all appended.
async function afterFirst(lists, n) {
  const texts = Array.from({ length: n }, (_, i) => T(i));
  const parent = { channels: [], writes: [{ taskPath: '', taskId: 'task', idx: 0, channel: 'messages', items: { texts } }] };
  const d = await lists.listIn(async () => parent, 't\0\0c0-parent', 'messages', gen);
  assert.equal(d.prefix, 0);
  lists.learn('t\0\0c0', null, [['messages', { list: d, seqsOut: d.items.items.map((_, i) => i) }]], [], gen);
  return d;
}

test('a grown list passes its log part as a prefix, only the new items one by one', async () => {
  const lists = new DeltaLists();
  await afterFirst(lists, 3);
  lists.recordWrite('t\0\0c0', 'task', '', 0, 'messages', [T(3), T(4)]);
  const d = await lists.listIn(() => assert.fail('the parent is known'), 't\0\0c0', 'messages', gen);
  assert.equal(d.prefix, 3);
  assert.deepEqual(d.items.items, [T(3), T(4)]);
  assert.equal(d.items.key, DELTA_KEY);
  assert.equal(d.n, 5);
  // the put gave them seqs 3 and 4: the next list's prefix is all five
  lists.learn('t\0\0c1', 't\0\0c0', [['messages', { list: d, seqsOut: [3, 4] }]], [], gen);
  lists.recordWrite('t\0\0c1', 'task', '', 0, 'messages', [T(5)]);
  const e = await lists.listIn(() => null, 't\0\0c1', 'messages', gen);
  assert.equal(e.prefix, 5);
  assert.deepEqual(e.items.items, [T(5)]);
  assert.deepEqual(e.texts.slice(0, e.n), [0, 1, 2, 3, 4, 5].map(T));
});

test('a second child of one parent gets a copy, not the first child\'s items', async () => {
  const lists = new DeltaLists();
  await afterFirst(lists, 2);
  lists.recordWrite('t\0\0c0', 'a', '', 0, 'messages', [T(2)]);
  const first = await lists.listIn(() => null, 't\0\0c0', 'messages', gen);
  const second = await lists.listIn(() => null, 't\0\0c0', 'messages', gen);
  assert.notEqual(second.texts, first.texts);
  assert.equal(second.n, 3);
  assert.deepEqual(second.texts, [T(0), T(1), T(2)]);
  // the first child grew the parent's arrays in place (they hold three items now)
  assert.equal(first.texts.length, 3);
  assert.equal(second.items.items.length, 1);
});

test('another generation token: the whole list by text, no prefix', async () => {
  const lists = new DeltaLists();
  await afterFirst(lists, 2);
  const d = await lists.listIn(() => null, 't\0\0c0', 'messages', {});
  assert.equal(d.prefix, 0);
  assert.equal(d.items.seqs, null);
  assert.deepEqual(d.items.items, [T(0), T(1)]);
});

test('a snapshot selects the prefix by seq and the rest by seq or text', async () => {
  const delta = { texts: [T(0), T(1), T(2), T(3)], seqs: [0, 1, -1, 7], n: 4, prefix: 2 };
  const seq = new Map([['a', 0], ['b', 1], ['d', 7]]);
  const text = new Map([['c', T(2)], ['x', '{"role":"user","content":"other"}']]);
  const segs = await selectionOf(delta, ['a', 'b', 'c', 'd', 'x'], (x) => seq.get(x) ?? -1,
    async (x) => text.get(x));
  assert.deepEqual(segs, [[0, 4], '{"role":"user","content":"other"}']);
});
