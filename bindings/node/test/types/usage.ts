// usage.ts — compiled (not run) by types.test.mjs: the package's types as a user sees them.
import { Store, ConvoSaver, ConvoError, NotFoundError, codes } from 'convo';
import type { BaseCheckpointSaver } from '@langchain/langgraph-checkpoint';
import { StateGraph, MessagesAnnotation } from '@langchain/langgraph';

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
  // the one line a LangGraph user writes (fails to type-check if ConvoSaver is declared
  // over BaseCheckpointSaver<string>)
  const graph = new StateGraph(MessagesAnnotation).addNode('echo', () => ({ messages: [] }))
    .addEdge('__start__', 'echo').compile({ checkpointer: new ConvoSaver(store) });
  try {
    await store.load('missing');
  } catch (e) {
    if (e instanceof NotFoundError && e.code === codes.ENOTFOUND) console.log(e.backendCode);
    if (e instanceof ConvoError) console.log(e.codeName);
  }
  const dump: Buffer = await store.export();
  await store.import(dump);
  console.log(r, role, n, t, graph, await store.sweep());
  await new ConvoSaver('sqlite:x.db').close();
  await store.close();
}
void main;
