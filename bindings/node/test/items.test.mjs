// items.test.mjs — the Store's log references on every driver: a checkpoint channel and a
// pending write given as items (checkpointPut / checkpointPutWrites with `items`), seqsOut
// back, get and list giving the items resolved (texts, seqs, key, rest), seq hints without
// texts, and bad input refused before anything is written.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { Store, InvalidError, ConflictError } from '../src/index.js';
import { drivers, freshUrl } from './support.mjs';

const U1 = '{"role":"user","content":"hi","id":"u1"}';
const A1 = '{"role":"assistant","content":"hello","id":"a1"}';
const U2 = '{"role":"user","content":"more","id":"u2"}';
const REST = { type: 'json', bytes: '{"x":1}' };

const text = (b) => Buffer.from(b.bytes).toString();

for (const [name, base] of drivers()) {
  describe(`Store log references on ${name}`, () => {
    test('a turn: input, write, the put that commits them, resolved on get and list', async () => {
      const store = await Store.open(freshUrl(base));
      try {
        const t = 'thread';
        const put0 = await store.checkpointPut({ threadId: t, id: 'in', channels: [
          { channel: '__start__', version: '1', items: { items: [U1], key: 'messages', rest: REST } }] });
        assert.deepEqual(put0.seqsOut, { __start__: [-1] }); // an input never enters the log
        await store.checkpointPutWrites(t, '', 'in', 'start', '', [
          { idx: 0, channel: 'messages', items: { items: [U1] } },
          { idx: 1, channel: 'other', value: { type: 'json', bytes: '2' } }]);
        assert.equal((await store.loadLog(t)).length, 0);
        const put1 = await store.checkpointPut({ threadId: t, id: 'c0', parentId: 'in', channels: [
          { channel: 'messages', version: '2', items: { items: [U1], log: true } },
          { channel: 'plain', version: '1', value: { type: 'json', bytes: '[1]' } }] });
        assert.deepEqual(put1.seqsOut, { messages: [0] });
        await store.checkpointPutWrites(t, '', 'c0', 'agent', 'p', [
          { idx: 0, channel: 'messages', items: { items: [A1] } }]);
        // known items by seq, without their text; the fresh one appended
        const put2 = await store.checkpointPut({ threadId: t, id: 'c1', parentId: 'c0', expectedGeneration: 0,
          channels: [{ channel: 'messages', version: '3', items: { items: [null, A1], seqs: [0, -1], log: true } }] });
        assert.deepEqual(put2.seqsOut, { messages: [0, 1] });
        assert.deepEqual((await store.loadLog(t)).texts, [U1, A1]);

        const c1 = await store.checkpointGet(t, '', 'c1');
        const ch = c1.channels.find((c) => c.channel === 'messages');
        assert.equal(ch.value.type, 'convo/items');
        assert.deepEqual(ch.items, { texts: [U1, A1], seqs: [0, 1], key: null, rest: null });
        assert.equal(c1.logLength, 2);

        const input = await store.checkpointGet(t, '', 'in');
        const start = input.channels[0].items;
        assert.deepEqual(start.texts, [U1]);
        assert.equal(start.key, 'messages');
        assert.equal(start.rest.type, 'json');
        assert.equal(text(start.rest), '{"x":1}');
        assert.equal(input.writes.length, 2);
        assert.deepEqual(input.writes[0].items.texts, [U1]);
        assert.equal(input.writes[1].items, null);
        assert.equal(text(input.writes[1].value), '2');
        const c0 = await store.checkpointGet(t, '', 'c0');
        assert.equal(c0.channels.find((c) => c.channel === 'plain').items, null);
        assert.deepEqual(c0.writes[0].items.texts, [A1]);
        assert.equal(c0.writes[0].taskPath, 'p');
        // the put that appended them turned the input and the writes into references
        assert.deepEqual(start.seqs, [0]);
        assert.deepEqual(input.writes[0].items.seqs, [0]);
        assert.deepEqual(c0.writes[0].items.seqs, [1]);
        const listed = await store.checkpointList({ threadId: t });
        assert.deepEqual(listed.map((c) => c.id), ['c1', 'c0', 'in']);
        assert.deepEqual(listed[0].channels[0].items.texts, [U1, A1]);
        // without the channels' items: their key and rest, the writes and plain values whole
        const lean = await store.checkpointList({ threadId: t, withoutChannelItems: true });
        assert.deepEqual(lean.map((c) => c.id), ['c1', 'c0', 'in']);
        assert.deepEqual(lean[0].channels[0].items, { texts: [], seqs: [], key: null, rest: null });
        assert.equal(lean[0].generation, -1); // nothing of the log read
        assert.deepEqual(lean[2].channels[0].items.texts, []);
        assert.equal(lean[2].channels[0].items.key, 'messages');
        assert.equal(text(lean[2].channels[0].items.rest), '{"x":1}');
        assert.deepEqual(lean[2].writes.map((w) => w.items?.texts ?? text(w.value)), [[U1], '2']);
        assert.deepEqual(lean[1].writes[0].items, c0.writes[0].items);
        assert.equal(text(lean[1].channels.find((c) => c.channel === 'plain').value), '[1]');
        assert.deepEqual(lean.map((c) => c.metadata), listed.map((c) => c.metadata));
        await assert.rejects(store.checkpointList({ threadId: t, withoutChannelItems: 1 }),
          /withoutChannelItems must be a boolean/);
        // one channel and its writes alone (list opts v5): no body, metadata {}
        const only = await store.checkpointList({ threadId: t, onlyChannel: 'plain' });
        assert.deepEqual(only.map((c) => c.id), ['c1', 'c0', 'in']);
        assert.deepEqual(only[1].channels.map((c) => c.channel), ['plain']);
        assert.equal(text(only[1].channels[0].value), '[1]');
        assert.deepEqual(only.map((c) => [c.metadata, c.body?.type ?? null]),
          [[{}, null], [{}, null], [{}, null]]);
        assert.deepEqual(only.flatMap((c) => c.writes), []);
      } finally {
        await store.close();
      }
    });

    test('a list that does not extend its parent keeps its fresh items inline', async () => {
      const store = await Store.open(freshUrl(base));
      try {
        await store.checkpointPut({ threadId: 't', id: 'c1', channels: [
          { channel: 'm', version: '1', items: { items: [U1, A1], log: true } }] });
        const r = await store.checkpointPut({ threadId: 't', id: 'c2', parentId: 'c1', channels: [
          { channel: 'm', version: '2', items: { items: [U1, U2], log: true } }] });
        assert.deepEqual(r.seqsOut.m, [0, -1]);
        const cp = await store.checkpointGet('t', '', 'c2');
        assert.deepEqual(cp.channels[0].items, { texts: [U1, U2], seqs: [0, -1], key: null, rest: null });
        assert.equal((await store.loadLog('t')).length, 2);
        // an empty list is a list
        await store.checkpointPut({ threadId: 't', id: 'c3', parentId: 'c2', channels: [
          { channel: 'm', version: '3', items: { items: [], log: true } }] });
        assert.deepEqual((await store.checkpointGet('t', '', 'c3')).channels[0].items.texts, []);
      } finally {
        await store.close();
      }
    });

    test('a read that says what it holds gets those texts left out, until the thread changes', async () => {
      const store = await Store.open(freshUrl(base));
      try {
        const t = 'thread';
        await store.checkpointPut({ threadId: t, id: 'c0', channels: [
          { channel: 'messages', version: '1', items: { items: [U1, A1], log: true } }] });
        await store.checkpointPut({ threadId: t, id: 'c1', parentId: 'c0', expectedGeneration: 0, channels: [
          { channel: 'messages', version: '2', items: { items: [null, null, U2], seqs: [0, 1, -1], log: true } }] });
        const first = await store.checkpointGet(t, '', 'c0');
        assert.equal(first.generation, 0);
        assert.ok(first.origin > 0, `origin ${first.origin}`);
        const known = { knownGeneration: 0, knownLength: 2, knownOrigin: first.origin };
        const got = await store.checkpointGet(t, '', null, known);
        assert.deepEqual(got.channels[0].items.texts, [null, null, U2]);
        assert.deepEqual(got.channels[0].items.seqs, [0, 1, 2]);
        assert.deepEqual([got.generation, got.origin], [0, first.origin]);
        const listed = await store.checkpointList({ threadId: t, ...known });
        assert.deepEqual(listed.map((cp) => cp.channels[0].items.texts), [[null, null, U2], [null, null]]);
        // another origin (a thread started again) or generation: every text
        const other = await store.checkpointGet(t, '', null, { ...known, knownOrigin: first.origin + 1 });
        assert.deepEqual(other.channels[0].items.texts, [U1, A1, U2]);
        await store.replaceTail(t, { keep: 3, messages: [] }); // the generation goes up, nothing removed
        const after = await store.checkpointGet(t, '', null, known);
        assert.deepEqual(after.channels[0].items.texts, [U1, A1, U2]);
        assert.equal(after.generation, 1);
        // what a read holds is checked before anything is read
        await assert.rejects(store.checkpointGet(t, '', null, { knownLength: 2 }), InvalidError);
        await assert.rejects(store.checkpointGet(t, '', null, { ...known, knownLength: -1 }), InvalidError);
        await assert.rejects(store.checkpointGet(t, '', null, { knownLen: 2 }), /unknown option "knownLen"/);
        await assert.rejects(store.checkpointList({ ...known }), InvalidError); // no threadId
      } finally {
        await store.close();
      }
    });

    test('a generation condition not met writes nothing', async () => {
      const store = await Store.open(freshUrl(base));
      try {
        await store.checkpointPut({ threadId: 't', id: 'c1', channels: [
          { channel: 'm', version: '1', items: { items: [U1], log: true } }] });
        await assert.rejects(store.checkpointPut({ threadId: 't', id: 'c2', parentId: 'c1', expectedGeneration: 3,
          channels: [{ channel: 'm', version: '2', items: { items: [null, A1], seqs: [0, -1], log: true } }] }),
        ConflictError);
        await assert.rejects(store.checkpointGet('t', '', 'c2'));
        assert.equal((await store.loadLog('t')).length, 1);
      } finally {
        await store.close();
      }
    });

    test('a list given as the log\'s first messages (logPrefix) and what follows', async () => {
      const store = await Store.open(freshUrl(base));
      try {
        const t = 'thread';
        await store.checkpointPut({ threadId: t, id: 'c1', channels: [
          { channel: 'm', version: '1', items: { items: [U1, A1], log: true } }] });
        const put = await store.checkpointPut({ threadId: t, id: 'c2', parentId: 'c1', expectedGeneration: 0,
          channels: [{ channel: 'm', version: '2', items: { items: [U2], log: true }, logPrefix: 2 },
            { channel: 'plain', version: '1', value: { type: 'json', bytes: '1' } }] });
        assert.deepEqual(put.seqsOut, { m: [2] }); // the given items only
        assert.deepEqual((await store.loadLog(t)).texts, [U1, A1, U2]);
        const c2 = await store.checkpointGet(t, '', 'c2');
        assert.deepEqual(c2.channels.find((c) => c.channel === 'm').items,
          { texts: [U1, A1, U2], seqs: [0, 1, 2], key: null, rest: null });
        // the same as the list spelled out: nothing to add, no item given
        const same = await store.checkpointPut({ threadId: t, id: 'c3', parentId: 'c2', channels: [
          { channel: 'm', version: '3', items: { items: [], log: true }, logPrefix: 3 }] });
        assert.deepEqual(same.seqsOut, { m: [] });
        assert.deepEqual((await store.checkpointGet(t, '', 'c3')).channels[0].items.seqs, [0, 1, 2]);
        // past the log: a conflict, nothing written
        await assert.rejects(store.checkpointPut({ threadId: t, id: 'c4', parentId: 'c3', channels: [
          { channel: 'm', version: '4', items: { items: [U2], log: true }, logPrefix: 4 }] }), ConflictError);
        await assert.rejects(store.checkpointGet(t, '', 'c4'));
        assert.equal((await store.loadLog(t)).length, 3);
        const bad = (re) => (e) => e instanceof InvalidError && re.test(e.message);
        await assert.rejects(store.checkpointPut({ threadId: t, id: 'c4', channels: [
          { channel: 'm', version: '4', items: { items: [] }, logPrefix: -1 }] }),
        bad(/channels\[0\]\.logPrefix must be an integer from 0/));
        await assert.rejects(store.checkpointPut({ threadId: t, id: 'c4', channels: [
          { channel: 'm', version: '4', value: { type: 'json', bytes: '1' }, logPrefix: 1 }] }),
        bad(/channels\[0\]\.logPrefix needs items/));
        await assert.rejects(store.checkpointGet(t, '', 'c4'));
      } finally {
        await store.close();
      }
    });

    test('bad items are refused, naming the argument; nothing written', async () => {
      const store = await Store.open(freshUrl(base));
      try {
        const put = (items, extra = {}) => store.checkpointPut({ threadId: 't', id: 'c1',
          channels: [{ channel: 'm', version: '1', items, ...extra }] });
        const bad = (re) => (e) => e instanceof InvalidError && re.test(e.message);
        await assert.rejects(put({ items: ['{"content":"no role"}'] }), bad(/role/));
        await assert.rejects(put({ items: [null] }), bad(/neither a text nor a seq/));
        await assert.rejects(put({ items: [U1], seqs: [0, 1] }), bad(/channels\[0\]\.items\.seqs has 2 entries/));
        await assert.rejects(put({ items: [U1], seqs: [-2] }), bad(/channels\[0\]\.items\.seqs\[0\]/));
        await assert.rejects(put({ items: [7] }), bad(/channels\[0\]\.items\.items\[0\]/));
        await assert.rejects(put({ items: [U1], lg: true }), bad(/unknown option "lg"/));
        await assert.rejects(put({ items: [U1], log: 1 }), bad(/log must be a boolean/));
        await assert.rejects(put({ items: [U1] }, { value: { type: 'json', bytes: '[]' } }), bad(/both a value and items/));
        await assert.rejects(put('x'), bad(/channels\[0\]\.items must be an object/));
        await assert.rejects(store.loadLog('t')); // no thread: nothing was written
        await put({ items: [U1], log: true });
        // a seq below -1 past 32 bits is refused as any other (not taken for -1 by its low word)
        await assert.rejects(store.checkpointPut({ threadId: 't', id: 'c2', parentId: 'c1', channels: [
          { channel: 'm', version: '2', items: { items: [null], seqs: [-(2 ** 32) - 1], log: true } }] }),
        bad(/channels\[0\]\.items\.seqs\[0\] must be an integer from -1/));
        await assert.rejects(store.checkpointGet('t', '', 'c2'));
        await assert.rejects(store.checkpointPutWrites('t', '', 'c1', 'task', '', [
          { idx: 0, channel: 'm', items: { items: ['{"content":"x"}'] } }]), bad(/role/));
        assert.equal((await store.checkpointGet('t', '', 'c1')).writes.length, 0);
      } finally {
        await store.close();
      }
    });
  });
}
