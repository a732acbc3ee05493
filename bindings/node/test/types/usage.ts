// usage.ts — compiled (not run) by types.test.mjs: the package's types as a user sees them.
import { Store, ConvoError, ConflictError, NotFoundError, codes } from 'convo';
import type { ThreadInfo, ThreadPage, ListThreadsOptions } from 'convo';
import { ConvoSaver } from 'convo/langgraph';
import type { BaseCheckpointSaver } from '@langchain/langgraph-checkpoint';
import { StateGraph, MessagesAnnotation } from '@langchain/langgraph';

async function main(): Promise<void> {
  const store: Store = await Store.open('memory:');
  const r: { firstSeq: number; count: number; replayed: boolean } =
    await store.append('t', ['{"role":"user"}', { role: 'assistant', content: 'x' }], { expectedLength: 0 });
  const h = await store.load('t', { tail: 1 });
  const log: { texts: string[]; length: number; generation: number } = await store.loadLog('t', { fromSeq: 1 });
  void log;
  const role: string = h.messages[0].role;
  const cp = await store.checkpointGet('t');
  const n: number = cp.logLength;
  // log references: a message channel as items, seqs back, resolved on get
  const put: { seqsOut: Record<string, number[]> } = await store.checkpointPut({ threadId: 't', id: 'c',
    channels: [{ channel: 'messages', version: 1, items: { items: ['{"role":"user"}', null], seqs: [-1, 0], log: true } },
      { channel: '__start__', version: 1, items: { items: [], key: 'messages', rest: { type: 'json', bytes: '{}' } } }] });
  await store.checkpointPutWrites('t', '', 'c', 'task', '', [{ idx: 0, channel: 'messages', items: { items: ['{"role":"ai"}'] } },
    { idx: 1, channel: 'x', value: { type: 'json', bytes: '1' } }]);
  const resolved: (string | null)[] | undefined = cp.channels[0].items?.texts;
  // a read that leaves out the messages the caller holds
  const again = await store.checkpointGet('t', '', null, { knownGeneration: cp.generation,
    knownLength: 2, knownOrigin: cp.origin });
  const listed = await store.checkpointList({ threadId: 't', knownGeneration: again.generation,
    knownLength: 2, knownOrigin: again.origin });
  console.log(listed.length, new ConvoSaver(store, { cache: { threads: 8, items: 1000 } }),
    new ConvoSaver(store, { cache: false }));
  const wseqs: number[] | undefined = cp.writes[0]?.items?.seqs;
  console.log(put.seqsOut.messages, resolved, wseqs);
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
  // the tail rewrite: typed options, results, the generation and a conflict's state
  const rw: { firstSeq: number; removed: number; generation: number; replayed: boolean } =
    await store.replaceTail('t', { keep: 1, messages: [{ role: 'user' }], expectedLength: h.length,
      expectedGeneration: h.generation, expectedSuffix: h.messages, idempotencyKey: 'k', dropCheckpoints: false });
  const popped: string[] = (await store.pop('t', { count: 1, expectedLength: 1 })).map((m) => m.json);
  await store.append('t', ['{"role":"user"}'], { expectedGeneration: rw.generation });
  await store.fork('t', 'u', -1, { expectedGeneration: rw.generation });
  try {
    await store.pop('t');
  } catch (e) {
    if (e instanceof ConflictError) console.log(e.length ?? 0, e.generation ?? 0, popped);
  }
  // the thread index: a user's conversations, newest first, with a preview
  const indexed: Store = await Store.open('memory:', { indexedKeys: ['user_id'] });
  const q: ListThreadsOptions = { where: { user_id: 'u1' }, order: 'recent', limit: 20, withLastMessage: true };
  const page: ThreadPage = await indexed.listThreads(q);
  const row: ThreadInfo | undefined = page.threads[0];
  const preview: string | null | undefined = row?.lastMessage;
  const more: ThreadPage = await indexed.listThreads({ ...q, after: page.next, reverse: false, withExtra: true });
  for await (const th of indexed.threads({ order: 'created' })) {
    const when: number = th.updatedAt - th.createdAt;
    console.log(th.id, th.length, th.cursor, th.extra?.user_id, when);
  }
  const ids: string[] = (await indexed.threadIds({ limit: 10 })).ids;
  console.log(preview, more.next, ids);
  const dump: Uint8Array = await store.export();
  await store.import(dump);
  console.log(r, role, n, t, graph, await store.sweep());
  await new ConvoSaver('sqlite:x.db').close();
  await store.close();
}
void main;
