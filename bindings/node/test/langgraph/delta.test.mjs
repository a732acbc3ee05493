// delta.test.mjs — LangGraph's DeltaChannel (MessagesDeltaValue) on ConvoSaver through
// LangGraph's real runtime, on every driver: the script of langgraph-script.mjs (a tool call,
// interrupt() + Command resume, getStateHistory, updateState on an old checkpoint,
// RemoveMessage) gives after every step the state it gives on MemorySaver; at checkpoints
// all along the thread ConvoSaver's getDeltaChannelHistory returns exactly what
// BaseCheckpointSaver's walk over getTuple returns, in a bounded number of store calls;
// and the store holds each message once: the log has every message of the conversation,
// once, and no pending write, snapshot or input holds inline a message the log has.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { MemorySaver, StateSchema, MessagesDeltaValue, DeltaValue } from '@langchain/langgraph';
import { BaseCheckpointSaver } from '@langchain/langgraph-checkpoint';
import { Store } from '../../src/index.js';
import { ConvoSaver } from '../../src/langgraph/index.js';
import { buildGraph, runStep, SEGMENTS } from './langgraph-script.mjs';
import { drivers, freshUrl } from '../support.mjs';

const STEPS = SEGMENTS.flat();

// MessagesDeltaValue as LangGraph ships it (a snapshot every 100 updates), and the same
// channel snapshotting every 6 updates, so the script crosses snapshots many times.
const SCHEMAS = {
  'MessagesDeltaValue': new StateSchema({ messages: MessagesDeltaValue }),
  'MessagesDeltaValue, snapshot every 6': new StateSchema({
    messages: new DeltaValue(MessagesDeltaValue.valueSchema, {
      inputSchema: MessagesDeltaValue.inputSchema, reducer: MessagesDeltaValue.reducer, snapshotFrequency: 6,
    }),
  }),
};

async function runAll(checkpointer, state, plain) {
  const graph = buildGraph(checkpointer, { state, plain });
  const out = [];
  for (const step of STEPS) out.push(await runStep(graph, 'chat', step));
  return out;
}

const plainJson = (v) => JSON.parse(JSON.stringify(v));

function messageKey(text) {
  const m = JSON.parse(text);
  const v = m.value ?? {};
  const id = m.serde === 'msg/1' ? m.id : v.kwargs?.id ?? v.id; // the compact form has its id
  return JSON.stringify([m.role, m.content ?? null, id ?? null]);
}

// Counts the store calls of fn.
// fn's result, its store calls, and the channel items its checkpointList calls returned
async function counting(store, fn) {
  const calls = { checkpointGet: 0, checkpointList: 0 };
  const saved = {};
  let listedItems = 0;
  for (const k of Object.keys(calls)) {
    saved[k] = store[k];
    store[k] = async (...a) => {
      calls[k]++;
      const out = await saved[k].apply(store, a);
      if (k === 'checkpointList') {
        for (const cp of out) for (const ch of cp.channels) listedItems += ch.items?.seqs.length ?? 0;
      }
      return out;
    };
  }
  try {
    return [await fn(), calls.checkpointGet + calls.checkpointList, listedItems];
  } finally {
    for (const k of Object.keys(calls)) store[k] = saved[k];
  }
}

// The history of a checkpoint, comparable: task ids, the writes' values and the seed as JSON
// with their classes.
function comparable(h) {
  const out = {};
  for (const [ch, e] of Object.entries(h)) {
    out[ch] = {
      writes: e.writes.map(([t, c, v]) => [t, c, plainJson(v), Array.isArray(v) ? v.map((x) => x?.constructor?.name) : v?.constructor?.name]),
      hasSeed: Object.hasOwn(e, 'seed'),
      seed: e.seed === undefined ? null : plainJson(e.seed),
      seedClass: e.seed?.constructor?.name ?? null,
    };
  }
  return out;
}

// (LangChain classes with MessagesDeltaValue, plain objects with the frequent snapshots: the
// other two pairs add time, not cases)
for (const [schemaName, state] of Object.entries(SCHEMAS)) {
  for (const plain of [schemaName !== 'MessagesDeltaValue']) {
    const kind = `${schemaName}, ${plain ? 'plain-object messages' : 'message classes'}`;
    describe(`LangGraph runtime with ${kind}`, () => {
      let reference;
      for (const [name, base] of drivers()) {
        test(`on ${name}`, async () => {
          reference ??= await runAll(new MemorySaver(), state, plain);
          const store = await Store.open(freshUrl(base));
          const saver = new ConvoSaver(store);
          try {
            const got = await runAll(saver, state, plain);
            assert.equal(got.length, reference.length);
            reference.forEach((want, i) => {
              assert.deepStrictEqual(got[i], want, `step ${i} (${want.kind}) differs from MemorySaver`);
            });

            // getDeltaChannelHistory against the base class's walk
            const all = await store.checkpointList({ threadId: 'chat' });
            const byId = new Map(all.map((cp) => [cp.id, cp]));
            let compared = 0;
            for (const [i, cp] of all.entries()) {
              if (i % 9 !== 0 && i > 3 && i !== all.length - 1) continue;
              const config = { configurable: { thread_id: 'chat', checkpoint_ns: '', checkpoint_id: cp.id } };
              const options = { config, channels: ['messages'] };
              const [mine, calls, listedItems] = await counting(store, () => saver.getDeltaChannelHistory(options));
              const walked = await BaseCheckpointSaver.prototype.getDeltaChannelHistory.call(saver, options);
              assert.deepStrictEqual(comparable(mine), comparable(walked), `history at checkpoint ${i} (${cp.id})`);
              // store calls: 2, one for the seed's value, and 2 more for each branch point on the
              // way (the updateState); the ancestors listed without their channels' lists
              let jumps = 0;
              for (let c = byId.get(cp.parentId), prev = cp; c; prev = c, c = byId.get(c.parentId)) {
                if (all.indexOf(c) !== all.indexOf(prev) + 1) jumps++;
              }
              assert.ok(calls <= 3 + 2 * jumps, `${calls} store calls for ${jumps} branch points`);
              assert.equal(listedItems, 0, 'the ancestors were listed with their channels\' items');
              compared++;
            }
            assert.ok(compared > 15);
            assert.deepStrictEqual(await saver.getDeltaChannelHistory({ config: { configurable: {
              thread_id: 'chat', checkpoint_id: 'nope' } }, channels: ['messages'] }), { messages: { writes: [] } });

            // each message once, in the log
            const log = (await store.loadLog('chat')).texts;
            const keys = log.map(messageKey);
            assert.equal(new Set(keys).size, keys.length, 'a message is in the log twice');
            const final = got[got.length - 1].state.values.messages;
            for (const m of final) {
              const id = m.kwargs.id;
              if (id !== 'ai-h10-0') assert.ok(keys.some((k) => JSON.parse(k)[2] === id), `${id} is not in the log`);
            }
            const logged = new Set(keys);
            let references = 0;
            let lists = 0;
            for (const cp of all) {
              const where = [];
              for (const ch of cp.channels) {
                if (ch.channel !== 'messages' && ch.channel !== '__start__') continue;
                if (!ch.value) continue;
                if (ch.channel === '__start__' && !ch.items) continue; // a resume's Command
                assert.equal(ch.value.type, 'convo/items', `${cp.id} ${ch.channel} is stored as a blob`);
                where.push([`${cp.id} ${ch.channel}`, ch.items]);
              }
              for (const w of cp.writes) {
                if (w.channel !== 'messages') continue;
                if (!w.items) { // a write that is not a list: no message content but RemoveMessage's
                  continue;
                }
                where.push([`${cp.id} write of ${w.taskId}`, w.items]);
              }
              for (const [at, items] of where) {
                lists++;
                items.texts.forEach((t, k) => {
                  if (items.seqs[k] >= 0) references++;
                  else assert.ok(!logged.has(messageKey(t)), `${at} holds inline a message of the log: ${t}`);
                });
              }
            }
            assert.ok(lists > STEPS.length * 2, `only ${lists} lists of items`);
            assert.ok(references > STEPS.length * 2);

            // a fresh saver (another process) reads the same state and history
            const fresh = new ConvoSaver(store);
            const graph = buildGraph(fresh, { state, plain });
            const config = { configurable: { thread_id: 'chat' } };
            assert.deepStrictEqual(plainJson((await graph.getState(config)).values),
              got[got.length - 1].state.values);
          } finally {
            await saver.close();
            await store.close();
          }
        });
      }
    });
  }
}
