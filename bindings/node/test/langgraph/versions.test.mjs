// versions.test.mjs — ConvoSaver's channel versions never name two values: convo stores a
// (channel, version) value once, so a branch from an older checkpoint (time travel) must
// not reuse a version its sibling already stored with another value.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { emptyCheckpoint, uuid6 } from '@langchain/langgraph-checkpoint';
import { ConvoSaver } from '../../src/langgraph/index.js';
import { drivers, freshUrl } from '../support.mjs';

async function putAfter(saver, parent, prevVersion, x) {
  const version = saver.getNextVersion(prevVersion);
  const checkpoint = { ...emptyCheckpoint(), id: uuid6(-1), channel_values: { x },
    channel_versions: { x: version } };
  const config = await saver.put(parent, checkpoint, { source: 'loop', step: 0, parents: {} },
    { x: version });
  return [config, version];
}

for (const [name, base] of drivers()) {
  describe(`ConvoSaver versions on ${name}`, () => {
    test('a branch from an older checkpoint keeps its own values', async () => {
      const saver = new ConvoSaver(freshUrl(base), { messageChannels: [] });
      const root = { configurable: { thread_id: 't', checkpoint_ns: '' } };
      const [c1, v1] = await putAfter(saver, root, undefined, 'one');
      const [c2] = await putAfter(saver, c1, v1, 'two');
      const [c3] = await putAfter(saver, c1, v1, 'branch'); // time travel: c1 again
      assert.equal((await saver.getTuple(c2)).checkpoint.channel_values.x, 'two');
      assert.equal((await saver.getTuple(c3)).checkpoint.channel_values.x, 'branch');
      await saver.close();
    });
  });
}

test('versions grow and sort as strings', () => {
  const saver = new ConvoSaver('memory:');
  const v1 = saver.getNextVersion(undefined);
  const v2 = saver.getNextVersion(v1);
  const v10 = saver.getNextVersion('0000000000000009.5');
  assert.ok(v1 < v2 && v2 < v10, `${v1} ${v2} ${v10}`);
  assert.match(v1, /^0000000000000001\.[0-9a-z]{10}$/);
  assert.notEqual(saver.getNextVersion(v1), v2);
  assert.ok(saver.getNextVersion(7).startsWith('0000000000000008.'));
  // versions written with LangGraph's 32-digit count (an older ConvoSaver) keep that width
  const old = '00000000000000000000000000000009.4829';
  const next = saver.getNextVersion(old);
  assert.ok(next.startsWith('00000000000000000000000000000010.') && next > old, next);
  return saver.close();
});
