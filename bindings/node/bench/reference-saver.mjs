// reference-saver.mjs — the control of the LangGraph runtime benches (langgraph-runtime.mjs,
// langgraph-profile.mjs): a saver that keeps LangGraph's objects by reference.
import { BaseCheckpointSaver } from '@langchain/langgraph-checkpoint';

// A control, not a saver to use: it keeps the objects LangGraph hands it, by reference, and
// gives them back (no copy, no serialization: O(1) a call whatever the conversation's
// length), so its "saver time" is what LangGraph itself does while one of its calls is under
// way (the next step's reducer runs beside a put with async durability).
export class ReferenceSaver extends BaseCheckpointSaver {
  threads = new Map(); // thread -> { tuples: Map id -> tuple, latest: id }
  async getTuple(config) {
    const t = this.threads.get(config.configurable?.thread_id);
    const id = config.configurable?.checkpoint_id ?? t?.latest;
    return t?.tuples.get(id);
  }
  async *list(config) {
    const t = this.threads.get(config.configurable?.thread_id);
    if (t) yield* [...t.tuples.values()].reverse();
  }
  async put(config, checkpoint, metadata) {
    const threadId = config.configurable.thread_id;
    const ns = config.configurable.checkpoint_ns ?? '';
    let t = this.threads.get(threadId);
    if (!t) this.threads.set(threadId, (t = { tuples: new Map(), latest: null }));
    const own = { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: checkpoint.id } };
    const parent = config.configurable.checkpoint_id;
    t.tuples.set(checkpoint.id, { config: own, checkpoint, metadata, pendingWrites: [],
      parentConfig: parent ? { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: parent } } : undefined });
    t.latest = checkpoint.id;
    return own;
  }
  async putWrites(config, writes, taskId) {
    const tuple = this.threads.get(config.configurable.thread_id)?.tuples.get(config.configurable.checkpoint_id);
    for (const [channel, value] of writes) tuple?.pendingWrites.push([taskId, channel, value]);
  }
  async deleteThread(threadId) {
    this.threads.delete(threadId);
  }
}
