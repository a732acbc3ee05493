// threads.test.mjs — the thread index through Store.listThreads / Store.threads on every
// driver: the row shape, the filter, each order both ways, paging by cursor, the async
// iterator, the indexedKeys open option and argument checks (nothing written on a refusal).
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import { Store, InvalidError, codes } from '../src/index.js';
import { drivers, freshUrl } from './support.mjs';

const msg = (role, content) => JSON.stringify({ role, content });

// Threads a (u1), b (u2), c (u1), written in that order, then a again: recent order is
// a, c, b; creation order c, b, a; id order a, b, c. Each write a millisecond apart so
// that the stored microsecond times differ on every backend.
async function seed(s) {
  for (const [t, user] of [['a', 'u1'], ['b', 'u2'], ['c', 'u1']]) {
    await s.append(t, [msg('user', `hi ${t}`)]);
    await s.saveExtra(t, { user_id: user, team: { name: 'x' } });
    await sleep(2);
  }
  await s.append('a', [msg('assistant', 'last of a')]);
}

for (const [name, base] of drivers()) {
  describe(`thread index on ${name}`, () => {
    test('rows, filter and orders', async () => {
      const s = await Store.open(freshUrl(base), { indexedKeys: ['user_id'] });
      const before = Date.now() * 1000;
      await seed(s);
      const page = await s.listThreads();
      assert.deepEqual(page.threads.map((t) => t.id), ['a', 'c', 'b']);
      assert.equal(page.next, null);
      const a = page.threads[0];
      assert.deepEqual(Object.keys(a), ['id', 'createdAt', 'updatedAt', 'length', 'cursor']);
      assert.equal(a.length, 2);
      assert.equal(typeof a.cursor, 'string');
      // microseconds since the epoch, as load's createdAt
      const h = await s.load('a');
      assert.ok(Math.abs(a.createdAt - h.messages[0].createdAt) < 1e6, `${a.createdAt} vs ${h.messages[0].createdAt}`);
      assert.ok(Math.abs(a.updatedAt - h.messages[1].createdAt) < 1e6 && a.updatedAt > a.createdAt);
      assert.ok(a.createdAt >= before - 5e6 && a.updatedAt <= Date.now() * 1000 + 5e6);

      const ids = async (o) => (await s.listThreads(o)).threads.map((t) => t.id);
      assert.deepEqual(await ids({ order: 'recent', reverse: true }), ['b', 'c', 'a']);
      assert.deepEqual(await ids({ order: 'created' }), ['c', 'b', 'a']);
      assert.deepEqual(await ids({ order: 'created', reverse: true }), ['a', 'b', 'c']);
      assert.deepEqual(await ids({ order: 'id' }), ['a', 'b', 'c']);
      assert.deepEqual(await ids({ order: 'id', reverse: true }), ['c', 'b', 'a']);
      assert.deepEqual(await ids({ where: { user_id: 'u1' } }), ['a', 'c']);
      assert.deepEqual(await ids({ where: { user_id: 'u1' }, order: 'id', reverse: true }), ['c', 'a']);
      assert.deepEqual(await ids({ where: { team: { name: 'x' } }, order: 'id' }), ['a', 'b', 'c']);
      assert.deepEqual(await ids({ where: { user_id: 'u3' } }), []);
      assert.deepEqual(await ids({ where: {} , order: 'id' }), ['a', 'b', 'c']);
      await s.close();
    });

    test('extra and the last message on request', async () => {
      const s = await Store.open(freshUrl(base));
      await seed(s);
      await s.saveExtra('empty', { user_id: 'u1' });
      const page = await s.listThreads({ where: { user_id: 'u1' }, withExtra: true, withLastMessage: true });
      assert.deepEqual(page.threads.map((t) => t.id), ['empty', 'a', 'c']);
      const [empty, a] = page.threads;
      assert.deepEqual(Object.keys(a), ['id', 'createdAt', 'updatedAt', 'length', 'extra', 'lastMessage', 'cursor']);
      assert.deepEqual(a.extra, { user_id: 'u1', team: { name: 'x' } });
      assert.equal(a.lastMessage, msg('assistant', 'last of a')); // the exact text
      assert.equal(empty.length, 0);
      assert.equal(empty.lastMessage, null);
      assert.deepEqual(empty.extra, { user_id: 'u1' });
      const onlyExtra = (await s.listThreads({ withExtra: true, limit: 1 })).threads[0];
      assert.ok('extra' in onlyExtra && !('lastMessage' in onlyExtra));
      await s.close();
    });

    test('pages by cursor, and threads() walks them all', async () => {
      const s = await Store.open(freshUrl(base));
      await seed(s);
      for (const order of ['recent', 'created', 'id']) {
        for (const reverse of [false, true]) {
          const all = (await s.listThreads({ order, reverse })).threads.map((t) => t.id);
          const p1 = await s.listThreads({ order, reverse, limit: 2 });
          assert.deepEqual(p1.threads.map((t) => t.id), all.slice(0, 2));
          assert.equal(p1.next, p1.threads[1].cursor);
          const p2 = await s.listThreads({ order, reverse, limit: 2, after: p1.next });
          assert.deepEqual(p2.threads.map((t) => t.id), all.slice(2));
          assert.equal(p2.next, null);
          // a row's cursor continues after that row
          const p3 = await s.listThreads({ order, reverse, after: p1.threads[0].cursor });
          assert.deepEqual(p3.threads.map((t) => t.id), all.slice(1));
          const walked = [];
          for await (const t of s.threads({ order, reverse, limit: 1 })) walked.push(t.id);
          assert.deepEqual(walked, all);
        }
      }
      const rows = [];
      for await (const t of s.threads({ where: { user_id: 'u1' }, limit: 1, withExtra: true })) rows.push(t);
      assert.deepEqual(rows.map((t) => [t.id, t.extra.user_id]), [['a', 'u1'], ['c', 'u1']]);
      // stopping early is fine; threads() starts from `after` when given
      for await (const t of s.threads({ limit: 1 })) {
        assert.equal(t.id, 'a');
        break;
      }
      const first = (await s.listThreads({ limit: 1 })).next;
      const rest = [];
      for await (const t of s.threads({ after: first, limit: 1 })) rest.push(t.id);
      assert.deepEqual(rest, ['c', 'b']);
      // the byte-order id listing of every driver
      assert.deepEqual(await s.threadIds({ limit: 2 }), { ids: ['a', 'b'], next: 'b' });
      await s.close();
    });

    test('bad input rejects with InvalidError, nothing written', async () => {
      const s = await Store.open(freshUrl(base));
      await s.append('t', [msg('user', 'x')]);
      const bad = (what) => (e) => e instanceof InvalidError && e.code === codes.EINVAL &&
        e.message.includes(what);
      await assert.rejects(s.listThreads({ where: '{"user_id":"u1"}' }), bad('where must be an object'));
      await assert.rejects(s.listThreads({ where: [1] }), bad('where must be an object (what the extra contains), not an array'));
      await assert.rejects(s.listThreads({ where: 5 }), bad('where must be an object'));
      await assert.rejects(s.listThreads({ where: { n: 10n } }), bad('where'));
      await assert.rejects(s.listThreads({ order: 'newest' }), bad(`order must be 'recent', 'created' or 'id'`));
      await assert.rejects(s.listThreads({ order: 0 }), bad('order must be'));
      await assert.rejects(s.listThreads({ reverse: 1 }), bad('reverse must be a boolean'));
      await assert.rejects(s.listThreads({ withExtra: 'yes' }), bad('withExtra must be a boolean'));
      await assert.rejects(s.listThreads({ withLastMessage: null }), bad('withLastMessage must be a boolean'));
      await assert.rejects(s.listThreads({ limit: 0 }), bad('limit'));
      await assert.rejects(s.listThreads({ limit: NaN }), bad('limit'));
      await assert.rejects(s.listThreads({ limit: 10001 }), bad('limit'));
      await assert.rejects(s.listThreads({ after: 5 }), bad('after must be a string'));
      await assert.rejects(s.listThreads({ filter: {} }), bad('unknown option "filter"'));
      await assert.rejects(s.listThreads([]), bad('listThreads options must be an object'));
      // cursors: not one, and one of another order or direction (the library's checks)
      await assert.rejects(s.listThreads({ after: 'nonsense' }), bad('cursor'));
      const c = (await s.listThreads({ order: 'created' })).threads[0].cursor;
      await assert.rejects(s.listThreads({ after: c }), bad('cursor'));
      await assert.rejects(s.listThreads({ order: 'created', reverse: true, after: c }), bad('cursor'));
      assert.throws(() => s.threads({ order: 'oldest' }), bad('order must be'));
      assert.throws(() => s.threads({ limit: 10001 }), bad('limit must be at most 10000'));
      await assert.rejects(Store.open('memory:', { indexedKeys: 'user_id' }), bad('indexedKeys must be an array'));
      await assert.rejects(Store.open('memory:', { indexedKeys: [1] }), bad('indexedKeys[0] must be a string'));
      await assert.rejects(Store.open('memory:', { indexedKeys: ['k', 'k'] }), bad('named twice'));
      await assert.rejects(Store.open('memory:', { indexedKey: ['k'] }), bad('unknown option "indexedKey"'));
      assert.deepEqual((await s.listThreads({ withLastMessage: true })).threads.map((t) => [t.id, t.length,
        t.lastMessage]), [['t', 1, msg('user', 'x')]]);
      await s.close();
    });

    test('indexedKeys: recorded in the store, another set refused', async () => {
      const url = freshUrl(base);
      const s = await Store.open(url, { indexedKeys: ['user_id', 'project'] });
      await s.saveExtra('t', { user_id: 'u9', project: 'p' });
      assert.deepEqual((await s.listThreads({ where: { user_id: 'u9' } })).threads.map((t) => t.id), ['t']);
      if (name !== 'memory') { // memory: each open is a new, empty store
        const same = await Store.open(url, { indexedKeys: ['project', 'user_id'] });
        const plain = await Store.open(url);
        await plain.saveExtra('t2', { user_id: 'u9' });
        assert.deepEqual((await same.listThreads({ where: { user_id: 'u9' }, order: 'id' })).threads
          .map((t) => t.id), ['t', 't2']);
        await Promise.all([same.close(), plain.close()]);
        await assert.rejects(Store.open(url, { indexedKeys: ['tenant'] }),
          (e) => e instanceof InvalidError && e.code === codes.EINVAL);
      }
      await s.close();
    });
  });
}
