// stored-once.test.mjs — LangGraph's real runtime on ConvoSaver in one process, on every
// driver (memory: included), with LangChain message classes and with plain role-tagged
// objects: the script of langgraph-script.mjs (turns with a tool and interrupt() + resume
// with Command, getStateHistory, updateState on an old checkpoint, RemoveMessage) gives after
// every step the state it gives on MemorySaver; then the raw store shows each message stored
// once: the thread's log holds every message once, message channels, the `__start__` input
// and pending writes to `messages` are lists of items (type convo/items), and none of them
// holds inline a message the log has.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { MemorySaver } from '@langchain/langgraph';
import { Store } from '../../src/index.js';
import { ConvoSaver } from '../../src/langgraph/index.js';
import { buildGraph, runStep, SEGMENTS } from './langgraph-script.mjs';
import { drivers, freshUrl } from '../support.mjs';

const STEPS = SEGMENTS.flat();

async function runAll(checkpointer, plain) {
  const graph = buildGraph(checkpointer, { plain });
  const out = [];
  for (const step of STEPS) out.push(await runStep(graph, 'chat', step));
  return out;
}

// What identifies a message of a log text: its role, content and id (beside them in the
// compact form, "msg/1"; else in the serialized kwargs of a LangChain message).
function messageKey(text) {
  const m = JSON.parse(text);
  const v = m.value ?? {};
  const id = m.serde === 'msg/1' ? m.id : v.kwargs?.id ?? v.id;
  return JSON.stringify([m.role, m.content ?? null, id ?? null]);
}

// Every list of items of the thread's checkpoints: [where, items].
function listsOf(checkpoints) {
  const out = [];
  for (const cp of checkpoints) {
    for (const ch of cp.channels) {
      if (ch.channel !== 'messages' && ch.channel !== '__start__') continue;
      if (!ch.value) continue; // a version stored with an earlier checkpoint
      if (ch.channel === '__start__' && !ch.items) continue; // a resume's Command, not messages
      assert.equal(ch.value.type, 'convo/items', `${cp.id} ${ch.channel} is stored as a blob`);
      out.push([`${cp.id} channel ${ch.channel}`, ch.items]);
    }
    for (const w of cp.writes) {
      if (w.channel !== 'messages') continue;
      assert.equal(w.value.type, 'convo/items', `${cp.id} write of ${w.taskId} is stored as a blob`);
      out.push([`${cp.id} write of ${w.taskId}`, w.items]);
    }
  }
  return out;
}

for (const plain of [false, true]) {
  const kind = plain ? 'plain-object messages' : 'message classes';
  describe(`LangGraph runtime, ${kind}: each message stored once`, () => {
    let reference;
    for (const [name, base] of drivers()) {
      test(`on ${name}`, async () => {
        reference ??= await runAll(new MemorySaver(), plain);
        const store = await Store.open(freshUrl(base));
        try {
          const got = await runAll(new ConvoSaver(store), plain);
          assert.equal(got.length, reference.length);
          reference.forEach((want, i) => {
            assert.deepStrictEqual(got[i], want, `step ${i} (${want.kind}) differs from MemorySaver`);
          });

          const log = (await store.loadLog('chat')).texts;
          const keys = log.map(messageKey);
          const ids = keys.map((k) => JSON.parse(k)[2]);
          assert.equal(new Set(ids).size, ids.length, 'a message is in the log twice');
          // the messages that are their fields alone (every user message, the approvals) are
          // stored in the compact form; the model's replies (with response and usage
          // metadata) in the full one
          const forms = log.map((t) => [JSON.parse(t).role, JSON.parse(t).serde]);
          assert.ok(forms.every(([role, serde]) => role !== 'user' || serde === 'msg/1'));
          assert.ok(forms.some(([role, serde]) => role === 'assistant' && serde === 'msg/1'));
          assert.ok(forms.some(([role, serde]) => role === 'assistant' && serde !== 'msg/1'));
          // every message of the final state is in the log, except the one edited on the
          // branch (a replaced message is kept inline)
          const final = got[got.length - 1].state.values.messages;
          for (const m of final) {
            if (m.kwargs.id !== 'ai-h10-0') assert.ok(ids.includes(m.kwargs.id), `${m.kwargs.id} is not in the log`);
          }

          const lists = listsOf(await store.checkpointList({ threadId: 'chat' }));
          assert.ok(lists.length > STEPS.length * 2, `only ${lists.length} lists of items`);
          const logged = new Set(keys);
          let references = 0;
          for (const [where, items] of lists) {
            items.texts.forEach((t, i) => {
              if (items.seqs[i] >= 0) references++;
              else assert.ok(!logged.has(messageKey(t)), `${where} holds inline a message of the log: ${t}`);
            });
          }
          assert.ok(references > 0);
        } finally {
          await store.close();
        }
      });
    }
  });
}
