// rewrite.test.mjs — Store.replaceTail and Store.pop on every driver: results, the
// thread's generation, the conditions and the state a ConflictError carries, replays,
// checkpoints in the way, bad input writing nothing, racing pops.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { Store, ConflictError, InvalidError, NotFoundError, TooLargeError, codes } from '../src/index.js';
import { drivers, freshUrl } from './support.mjs';

const A = '{"role":"user","content":"a"}';
const B = '{"role":"assistant","content":"b"}';
const C = '{"role":"user","content":"c"}';
const texts = (h) => h.messages.map((m) => m.json);
const conflict = (length, generation) => (e) =>
  e instanceof ConflictError && e.code === codes.ECONFLICT && e.length === length && e.generation === generation;

for (const [name, base] of drivers()) {
  describe(`tail rewrite on ${name}`, () => {
    test('replaceTail: result, seq, generation, load', async () => {
      const s = await Store.open(freshUrl(base));
      await s.append('t', [A, B, C]);
      assert.equal((await s.load('t')).generation, 0);
      const r = await s.replaceTail('t', { keep: 1, messages: [{ role: 'assistant', content: 'B2' }, '{"role" : "tool"}'] });
      assert.deepEqual(r, { firstSeq: 1, count: 2, removed: 2, generation: 1, replayed: false });
      const h = await s.load('t');
      assert.deepEqual([h.length, h.generation], [3, 1]);
      assert.deepEqual(h.messages.map((m) => [m.seq, m.role, m.json]),
        [[0, 'user', A], [1, 'assistant', '{"role":"assistant","content":"B2"}'], [2, 'tool', '{"role" : "tool"}']]);
      assert.deepEqual(await s.replaceTail('t', { keep: 0 }),
        { firstSeq: 0, count: 0, removed: 3, generation: 2, replayed: false });
      assert.deepEqual(texts(await s.load('t')), []);
      await s.close();
    });

    test('pop', async () => {
      const s = await Store.open(freshUrl(base));
      await s.append('t', [A, B, C]);
      assert.deepEqual((await s.pop('t')).map((m) => [m.seq, m.json]), [[2, C]]);
      assert.deepEqual((await s.pop('t', { count: 5, expectedLength: 2 })).map((m) => m.json), [A, B]);
      assert.deepEqual(await s.pop('t'), []);
      assert.equal((await s.load('t')).generation, 2); // the empty pop wrote nothing
      await assert.rejects(s.pop('nobody'), NotFoundError);
      await assert.rejects(s.pop('t', { count: 0 }), InvalidError);
      await s.close();
    });

    test('conditions; a ConflictError carries the length and generation', async () => {
      const s = await Store.open(freshUrl(base));
      await s.append('t', [A, B, C]);
      await assert.rejects(s.replaceTail('t', { keep: 2, messages: [C], expectedLength: 2 }), conflict(3, 0));
      await s.pop('t');
      await assert.rejects(s.replaceTail('t', { keep: 2, messages: [C], expectedGeneration: 0 }), conflict(2, 1));
      await assert.rejects(s.append('t', [C], { expectedGeneration: 0 }), conflict(2, 1));
      await assert.rejects(s.append('t', [C], { expectedLength: 3 }), conflict(2, 1));
      await assert.rejects(s.pop('t', { expectedLength: 3 }), conflict(2, 1));
      assert.deepEqual(texts(await s.load('t')), [A, B]);
      await s.append('t', [C], { expectedLength: 2, expectedGeneration: 1 });
      // the caller's view of the tail: loaded messages (exact text), strings, objects
      const seen = (await s.load('t', { fromSeq: 1 })).messages;
      await s.replaceTail('t', { keep: 2, messages: [A] }); // someone else's rewrite
      await assert.rejects(s.replaceTail('t', { keep: 1, messages: [C], expectedSuffix: seen }), ConflictError);
      const fresh = (await s.load('t', { fromSeq: 1 })).messages;
      assert.equal((await s.replaceTail('t', { keep: 1, messages: [C], expectedSuffix: fresh })).generation, 3);
      assert.equal((await s.replaceTail('t', { keep: 1, messages: [B], expectedSuffix: [{ role: 'user', content: 'c' }] })).generation, 4);
      await assert.rejects(s.replaceTail('t', { keep: 2, messages: [C], expectedSuffix: [B] }), ConflictError);
      assert.equal((await s.replaceTail('t', { keep: 2, messages: [C], expectedSuffix: [] })).generation, 5);
      assert.deepEqual(texts(await s.load('t')), [A, B, C]);
      await s.close();
    });

    test('idempotency keys', async () => {
      const s = await Store.open(freshUrl(base));
      await s.append('t', [A, B, C]);
      const first = await s.replaceTail('t', { keep: 2, messages: [B], idempotencyKey: 'regen-1' });
      const again = await s.replaceTail('t', { keep: 2, messages: [B], idempotencyKey: 'regen-1' });
      assert.deepEqual([again.firstSeq, again.count, again.replayed], [first.firstSeq, first.count, true]);
      assert.deepEqual(texts(await s.load('t')), [A, B, B]);
      await assert.rejects(s.replaceTail('t', { keep: 1, messages: [B], idempotencyKey: 'regen-1' }), ConflictError);
      // an append whose message a rewrite replaced: its replay is a conflict
      await s.append('t', [C], { idempotencyKey: 'turn-4' });
      await s.replaceTail('t', { keep: 3, messages: [A] });
      await assert.rejects(s.append('t', [C], { idempotencyKey: 'turn-4' }), ConflictError);
      await s.close();
    });

    test('a checkpoint in the way', async () => {
      const s = await Store.open(freshUrl(base));
      await s.append('t', [A, B, C]);
      await s.checkpointPut({ threadId: 't', id: 'cp-1', logLength: 3 });
      await assert.rejects(s.pop('t'), (e) => conflict(3, 0)(e) && /cp-1/.test(e.message));
      assert.deepEqual((await s.pop('t', { dropCheckpoints: true })).map((m) => m.json), [C]);
      await assert.rejects(s.checkpointGet('t', '', 'cp-1'), NotFoundError);
      await s.close();
    });

    test('bad input writes nothing', async () => {
      const s = await Store.open(freshUrl(base));
      await s.append('t', [A, B, C]);
      for (const opts of [{ keep: 4, messages: [A] }, { keep: -1 }, { keep: 1, messages: ['{"content":"x"}'] },
        { keep: 1, messages: ['{"role":'] }, { keep: 1, messages: [A, '{"role":""}'] }, {},
        { keep: '1' }, { keep: 1, dropCheckpoints: 1 }, { keep: 1, expectedGeneration: -2 }]) {
        await assert.rejects(s.replaceTail('t', opts), InvalidError, JSON.stringify(opts));
      }
      await assert.rejects(s.replaceTail('t', { keep: 1, messages: [{ role: 'user', x: 'y'.repeat(1 << 20) }] }),
        TooLargeError);
      await assert.rejects(s.replaceTail('nobody', { keep: 0, messages: [A] }), NotFoundError);
      await assert.rejects(s.load('nobody'), NotFoundError);
      const h = await s.load('t');
      assert.deepEqual([texts(h), h.generation], [[A, B, C], 0]);
      await s.close();
    });

    test('fork takes the generation', async () => {
      const s = await Store.open(freshUrl(base));
      await s.append('t', [A, B, C]);
      await s.pop('t');
      await assert.rejects(s.fork('t', 'f', -1, { expectedGeneration: 0 }), ConflictError);
      await s.fork('t', 'f', -1, { expectedGeneration: 1 });
      assert.equal((await s.load('f')).generation, 1);
      await s.close();
    });

    test('racing pops take each message once', async () => {
      const url = freshUrl(base);
      const first = await Store.open(url);
      const stores = url === 'memory:' ? [first, first, first, first]
        : [first, ...await Promise.all([1, 2, 3].map(() => Store.open(url)))];
      await first.append('t', Array.from({ length: 40 }, (_, i) => JSON.stringify({ role: 'user', n: i })));
      const got = [];
      await Promise.all(stores.map(async (s) => {
        for (let i = 0; i < 10; i++) got.push(...(await s.pop('t')).map((m) => JSON.parse(m.json).n));
      }));
      assert.deepEqual(got.sort((a, b) => a - b), Array.from({ length: 40 }, (_, i) => i));
      assert.equal((await first.load('t')).length, 0);
      await Promise.all([...new Set(stores)].map((s) => s.close()));
    });
  });
}
