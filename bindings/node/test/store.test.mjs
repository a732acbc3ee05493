// store.test.mjs — every call of Store on every driver: results, errors (ConvoError
// subclasses with the CONVO_E* code) and close() waiting for calls under way.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { Store, ConvoError, NotFoundError, InvalidError, ConflictError, codes } from '../src/index.js';
import { drivers, freshUrl } from './support.mjs';

for (const [name, base] of drivers()) {
  describe(`Store on ${name}`, () => {
    test('append, load, saveExtra', async () => {
      const s = await Store.open(freshUrl(base));
      assert.equal(s.driver, name);
      const r = await s.append('t', ['{"role":"user","content":"hi"}', { role: 'assistant', content: 'yo' }]);
      assert.deepEqual(r, { firstSeq: 0, count: 2, replayed: false });
      const again = await s.append('t', ['{"role":"user"}'], { idempotencyKey: 'k1' });
      const replay = await s.append('t', ['{"role":"user"}'], { idempotencyKey: 'k1' });
      assert.equal(again.firstSeq, 2);
      assert.deepEqual(replay, { ...again, replayed: true });
      await assert.rejects(s.append('t', ['{"role":"x"}'], { expectedLength: 1 }),
        (e) => e instanceof ConflictError && e.code === codes.ECONFLICT && e.codeName === 'CONVO_ECONFLICT');
      await s.saveExtra('t', { a: 1, 'x.$y': null });
      await s.saveExtra('t', '{"b":[2]}');
      const h = await s.load('t');
      assert.equal(h.length, 3);
      assert.deepEqual(h.messages.map((m) => [m.seq, m.role, m.json]), [
        [0, 'user', '{"role":"user","content":"hi"}'],
        [1, 'assistant', '{"role":"assistant","content":"yo"}'],
        [2, 'user', '{"role":"user"}'],
      ]);
      assert.ok(h.messages[0].createdAt > 1.6e15);
      assert.deepEqual(h.extra, { a: 1, 'x.$y': null, b: [2] });
      const tail = await s.load('t', { tail: 1, withExtra: false });
      assert.deepEqual(tail.messages.map((m) => m.seq), [2]);
      assert.equal(tail.extra, null);
      assert.deepEqual((await s.load('t', { fromSeq: 1, limit: 1 })).messages.map((m) => m.seq), [1]);
      await s.close();
    });

    test('loadLog and loadTexts: the texts with the length and generation', async () => {
      const s = await Store.open(freshUrl(base));
      await assert.rejects(s.loadLog('t'), NotFoundError);
      const texts = ['{"role":"user","content":"a"}', '{"role":"assistant","content":"b"}', '{"role":"user","content":"c"}'];
      await s.append('t', texts);
      assert.deepEqual(await s.loadLog('t'), { texts, length: 3, generation: 0 });
      assert.deepEqual(await s.loadLog('t', { fromSeq: 1, limit: 1 }), { texts: texts.slice(1, 2), length: 3, generation: 0 });
      assert.deepEqual(await s.loadLog('t', { fromSeq: 3 }), { texts: [], length: 3, generation: 0 });
      const some = await s.loadTexts('t', 2);
      assert.deepEqual([...some], texts.slice(2));
      assert.equal(some.generation, 0);
      await s.replaceTail('t', { keep: 1 });
      assert.deepEqual(await s.loadLog('t'), { texts: texts.slice(0, 1), length: 1, generation: 1 });
      await assert.rejects(s.loadLog('t', { fromSeq: -1 }), InvalidError);
      await assert.rejects(s.loadLog('t', 5), InvalidError);
      await s.close();
    });

    test('errors carry their code', async () => {
      const s = await Store.open(freshUrl(base));
      await assert.rejects(s.load('nobody'), (e) => e instanceof NotFoundError &&
        e instanceof ConvoError && e.code === codes.ENOTFOUND && typeof e.backendCode === 'string');
      await assert.rejects(s.append('', ['{"role":"user"}']), InvalidError);
      await assert.rejects(s.append('t', ['{"content":"no role"}']), InvalidError);
      await assert.rejects(s.saveExtra('t', '[1]'), InvalidError);
      await s.close();
      await assert.rejects(async () => s.load('t'), (e) => e instanceof InvalidError && /closed/.test(e.message));
    });

    test('arguments of the wrong type reject with InvalidError naming them', async () => {
      // before args.js: a number for a char * crashed the process (koffi took it as an
      // address), a string in an integer field aborted it, NaN became 0
      const s = await Store.open(freshUrl(base));
      await s.append('t', ['{"role":"user"}']);
      await s.checkpointPut({ threadId: 't', id: 'c1', metadata: {} });
      const bad = (what) => (e) => e instanceof InvalidError && e.code === codes.EINVAL &&
        e.message.startsWith(what);
      const msg = ['{"role":"user"}'];
      await assert.rejects(s.append(5, msg), bad('threadId must be a string, not 5'));
      await assert.rejects(s.append(undefined, msg), bad('threadId must be a string, not undefined'));
      await assert.rejects(s.append(Buffer.from('t'), msg), bad('threadId must be a string, not a Buffer'));
      await assert.rejects(s.append('t\0x', msg), bad('threadId contains a NUL'));
      await assert.rejects(s.append('t', msg[0]), bad('messages must be an array'));
      await assert.rejects(s.append('t', msg, { idempotencyKey: 5 }), bad('idempotencyKey'));
      await assert.rejects(s.append('t', msg, { expectedLength: '1' }), bad('expectedLength must be an integer'));
      await assert.rejects(s.append('t', msg, { expectedLength: NaN }), bad('expectedLength'));
      await assert.rejects(s.append('t', msg, { expectedLength: 2 ** 60 }), bad('expectedLength'));
      await assert.rejects(s.load(7), bad('threadId'));
      await assert.rejects(s.load('t', { limit: '2' }), bad('limit'));
      await assert.rejects(s.load('t', { limit: -1 }), bad('limit must be an integer from 0'));
      await assert.rejects(s.load('t', { fromSeq: 1.5 }), bad('fromSeq'));
      await assert.rejects(s.load('t', 3), bad('load options must be an object'));
      await assert.rejects(s.threadIds({ after: 5 }), bad('after'));
      await assert.rejects(s.threadIds({ limit: NaN }), bad('limit'));
      await assert.rejects(s.fork('t', 'u', NaN), bad('upto'));
      await assert.rejects(s.fork('t', null), bad('dst'));
      await assert.rejects(s.delete(5), bad('threadId'));
      await assert.rejects(s.checkpointPut(null), bad('checkpointPut takes a checkpoint object'));
      await assert.rejects(s.checkpointPut({ threadId: 't', id: 'c2', ns: 5 }), bad('ns'));
      await assert.rejects(s.checkpointPut({ threadId: 't', id: 'c2', channels: 5 }), bad('channels'));
      await assert.rejects(s.checkpointPut({ threadId: 't', id: 'c2', logLength: NaN }), bad('logLength'));
      await assert.rejects(s.checkpointPutWrites('t', '', 'c1', 'task', '', null), bad('writes'));
      await assert.rejects(s.checkpointPutWrites('t', '', 'c1', 7, '', []), bad('taskId'));
      await assert.rejects(s.checkpointGet(5), bad('threadId'));
      await assert.rejects(s.checkpointList({ threadId: 5 }), bad('threadId'));
      await assert.rejects(s.checkpointList({ threadId: 't', limit: -1 }), bad('limit'));
      await assert.rejects(s.checkpointPrune('t', -1), bad('keepLast'));
      await assert.rejects(s.export('t'), bad('threadIds must be an array'));
      await assert.rejects(s.import(5), bad('the dump to import must be a Uint8Array or string'));
      await assert.rejects(Store.open(5), bad('url must be a string'));
      // nothing was written
      assert.equal((await s.load('t')).length, 1);
      assert.deepEqual((await s.threadIds()).ids, ['t']);
      assert.deepEqual((await s.checkpointList({ threadId: 't' })).map((c) => c.id), ['c1']);
      await s.close();
    });

    test('threadIds, fork, delete', async () => {
      const s = await Store.open(freshUrl(base));
      for (const t of ['a', 'b', 'c']) await s.append(t, ['{"role":"user"}', '{"role":"assistant"}']);
      const p1 = await s.threadIds({ limit: 2 });
      assert.deepEqual(p1.ids, ['a', 'b']);
      const p2 = await s.threadIds({ after: p1.next, limit: 2 });
      assert.deepEqual(p2, { ids: ['c'], next: null });
      await s.fork('a', 'a2', 1);
      assert.equal((await s.load('a2')).length, 1);
      await assert.rejects(s.fork('a', 'a2'), ConflictError);
      await s.delete('a');
      await assert.rejects(s.load('a'), NotFoundError);
      await assert.rejects(s.delete('a'), NotFoundError);
      await s.close();
    });

    test('checkpoints: put, putWrites, get, list, prune', async () => {
      const s = await Store.open(freshUrl(base));
      const blob = (x) => ({ type: 'json', bytes: JSON.stringify(x) });
      for (let i = 1; i <= 3; i++) {
        await s.checkpointPut({ threadId: 't', id: `c${i}`, parentId: i > 1 ? `c${i - 1}` : null,
          metadata: { step: i, source: 'loop' }, body: blob({ i }),
          channels: [{ channel: 'x', version: i, value: blob([i]) },
            { channel: 'k', version: 1, value: i === 1 ? blob('kept') : null }] });
      }
      await s.checkpointPutWrites('t', '', 'c3', 'task', 'p', [{ idx: 0, channel: 'x', value: blob(9) }]);
      const cp = await s.checkpointGet('t');
      assert.equal(cp.id, 'c3');
      assert.equal(cp.parentId, 'c2');
      assert.deepEqual(cp.metadata, { step: 3, source: 'loop' });
      assert.equal(cp.body.bytes.toString(), '{"i":3}');
      assert.deepEqual(cp.channels.map((c) => [c.channel, c.version, c.value.bytes.toString()]),
        [['k', '1', '"kept"'], ['x', '3', '[3]']]);
      assert.deepEqual(cp.writes.map((w) => [w.taskId, w.taskPath, w.idx, w.channel]), [['task', 'p', 0, 'x']]);
      assert.equal((await s.checkpointGet('t', '', 'c1')).parentId, null);
      await assert.rejects(s.checkpointGet('t', '', 'nope'), NotFoundError);
      const all = await s.checkpointList({ threadId: 't' });
      assert.deepEqual(all.map((c) => c.id), ['c3', 'c2', 'c1']);
      assert.deepEqual((await s.checkpointList({ threadId: 't', before: 'c3', limit: 1 })).map((c) => c.id), ['c2']);
      assert.deepEqual((await s.checkpointList({ threadId: 't', filter: { step: 2 } })).map((c) => c.id), ['c2']);
      await s.fork('t', 'copy', -1, { withCheckpoints: true });
      assert.deepEqual((await s.checkpointList({ threadId: 'copy' })).map((c) => [c.id, c.parentId]),
        [['c3', 'c2'], ['c2', 'c1'], ['c1', null]]);
      assert.deepEqual((await s.checkpointGet('copy')).writes.map((w) => [w.taskId, w.idx]), [['task', 0]]);
      await assert.rejects(s.fork('t', 'copy', -1, { withCheckpoints: true }), ConflictError);
      await assert.rejects(s.fork('t', 'copy2', -1, { withCheckpoints: 1 }),
        (e) => e instanceof InvalidError && /withCheckpoints/.test(e.message));
      assert.equal(await s.checkpointDelete({ threadId: 'copy', filter: { step: 2 } }), 1);
      assert.deepEqual((await s.checkpointList({ threadId: 'copy' })).map((c) => c.id), ['c3', 'c1']);
      assert.equal(await s.checkpointDelete({ filter: { step: 2 } }), 1); /* t's, on every thread */
      assert.equal(await s.checkpointDelete({ filter: { step: 2 } }), 0);
      await s.checkpointPrune('t', 1);
      assert.deepEqual((await s.checkpointList({ threadId: 't' })).map((c) => c.id), ['c3']);
      await assert.rejects(s.checkpointPutWrites('t', '', 'c1', 'task', '', [{ idx: 0, channel: 'x', value: blob(1) }]),
        NotFoundError);
      await s.close();
    });

    test('export, import, sweep, bytes', async () => {
      const s = await Store.open(freshUrl(base));
      await s.append('e', ['{"role":"user","content":"é"}']);
      await s.saveExtra('e', { k: 'v' });
      const dump = await s.export(['e']);
      assert.ok(dump.length > 0);
      const d = await Store.open(freshUrl(base));
      const stats = await d.import(dump);
      assert.equal(stats.threads, 1);
      assert.equal(stats.messages, 1);
      const h = await d.load('e');
      assert.equal(h.messages[0].json, '{"role":"user","content":"é"}');
      assert.deepEqual(h.extra, { k: 'v' });
      assert.equal((await d.import(dump)).skipped, 1);
      await assert.rejects(d.import(dump.subarray(0, dump.length - 3)), (e) => e.code === codes.ECORRUPT);
      assert.equal(await d.sweep(), 0);
      assert.ok((await d.bytes()) >= 0);
      await s.close();
      await d.close();
    });

    test('calls run concurrently and close waits for them', async () => {
      const s = await Store.open(freshUrl(base));
      const calls = [];
      for (let i = 0; i < 20; i++) calls.push(s.append('c', [{ role: 'user', n: i }]));
      const closed = s.close();
      const seqs = (await Promise.all(calls)).map((r) => r.firstSeq).sort((a, b) => a - b);
      assert.deepEqual(seqs, [...Array(20).keys()]);
      await closed;
    });
  });
}

test('open fails with InvalidError on a bad URL', async () => {
  await assert.rejects(Store.open('nosuch://x'), (e) => e instanceof ConvoError && e.code === codes.EINVAL);
});

test('Symbol.asyncDispose closes the store as close() does, after the calls under way', async () => {
  const s = await Store.open('memory:');
  const pending = s.append('d', ['{"role":"user"}']);
  await s[Symbol.asyncDispose]();
  assert.equal((await pending).count, 1);
  await assert.rejects(s.load('d'), (e) => e instanceof InvalidError && /closed/.test(e.message));
  await s[Symbol.asyncDispose](); // a second time: as close(), nothing to do
});
