// writes.test.mjs — putWrites on a checkpoint whose put has not happened yet: LangGraph's
// loop saves a task's writes without waiting for the put of their checkpoint (that put is
// chained after the previous ones), and convo keeps writes only for a stored checkpoint.
// ConvoSaver waits for its own put of that checkpoint; a put that fails or never comes
// makes putWrites fail with NotFoundError.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { emptyCheckpoint, uuid6 } from '@langchain/langgraph-checkpoint';
import { NotFoundError } from '../../src/index.js';
import { ConvoSaver } from '../../src/langgraph/index.js';
import { drivers, freshUrl } from '../support.mjs';

const meta = { source: 'loop', step: 0, parents: {} };
const root = { configurable: { thread_id: 't', checkpoint_ns: '' } };
const at = (id) => ({ configurable: { thread_id: 't', checkpoint_ns: '', checkpoint_id: id } });
const tick = () => new Promise((r) => setTimeout(r, 20));

function checkpoint(x) {
  const v = '00000000000000000000000000000001.5';
  return [{ ...emptyCheckpoint(), id: uuid6(-1), channel_values: { x }, channel_versions: { x: v } },
    { x: v }];
}

for (const [name, base] of drivers()) {
  describe(`ConvoSaver putWrites before put on ${name}`, () => {
    test('writes sent before their checkpoint is put are saved once it is', async () => {
      const saver = new ConvoSaver(freshUrl(base), { messageChannels: [] });
      const [cp, versions] = checkpoint('one');
      const writes = saver.putWrites(at(cp.id), [['x', 'w1']], 'task1');
      await tick(); // the writes reached the store first and were refused
      await saver.put(root, cp, meta, versions);
      await writes;
      // once stored, writes go straight in
      await saver.putWrites(at(cp.id), [['x', 'w2']], 'task2');
      const tuple = await saver.getTuple(at(cp.id));
      assert.deepEqual(tuple.pendingWrites, [['task1', 'x', 'w1'], ['task2', 'x', 'w2']]);
      await saver.close();
    });

    test('a put that fails fails the writes waiting for it', async () => {
      const saver = new ConvoSaver(freshUrl(base), { messageChannels: [] });
      const [cp, versions] = checkpoint('x'.repeat(17 << 20)); // over the 16 MiB value limit
      const writes = saver.putWrites(at(cp.id), [['x', 'w']], 'task1');
      writes.catch(() => {});
      await tick();
      await assert.rejects(saver.put(root, cp, meta, versions), (e) => e.codeName === 'CONVO_ETOOLARGE');
      await assert.rejects(writes, NotFoundError);
      await saver.close();
    });
  });
}

test('writes whose checkpoint is never put fail after writesWaitMs', async () => {
  const saver = new ConvoSaver('memory:', { messageChannels: [], writesWaitMs: 100 });
  const started = Date.now();
  await assert.rejects(saver.putWrites(at(uuid6(-1)), [['x', 'w']], 'task1'), NotFoundError);
  assert.ok(Date.now() - started >= 90);
  await saver.close();
});
