// usage.ts — compiled (not run) by types.test.mjs: the package's types as a user sees them.
import { Store, ConvoSaver, ConvoError, NotFoundError, codes } from 'convo';
import type { BaseCheckpointSaver } from '@langchain/langgraph-checkpoint';

async function main(): Promise<void> {
  const store: Store = await Store.open('memory:');
  const r: { firstSeq: number; count: number; replayed: boolean } =
    await store.append('t', ['{"role":"user"}', { role: 'assistant', content: 'x' }], { expectedLength: 0 });
  const h = await store.load('t', { tail: 1 });
  const role: string = h.messages[0].role;
  const cp = await store.checkpointGet('t');
  const n: number = cp.logLength;
  const saver: BaseCheckpointSaver = new ConvoSaver(store, { messageChannels: ['messages'] });
  const t = await saver.getTuple({ configurable: { thread_id: 't' } });
  try {
    await store.load('missing');
  } catch (e) {
    if (e instanceof NotFoundError && e.code === codes.ENOTFOUND) console.log(e.backendCode);
    if (e instanceof ConvoError) console.log(e.codeName);
  }
  const dump: Buffer = await store.export();
  await store.import(dump);
  console.log(r, role, n, t, await store.sweep());
  await new ConvoSaver('sqlite:x.db').close();
  await store.close();
}
void main;
