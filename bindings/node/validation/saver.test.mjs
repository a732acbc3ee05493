// saver.test.mjs — ConvoSaver's message channels in the log, on every driver: items
// stored once as role-tagged messages `convo load` prints, restored exactly (LangChain
// classes), and lists that do not extend the log (time travel, removal, replacement,
// another writer) returned as they were put.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { emptyCheckpoint, uuid6 } from '@langchain/langgraph-checkpoint';
import { HumanMessage, AIMessage, ToolMessage, SystemMessage } from '@langchain/core/messages';
import { Store } from '../src/index.js';
import { ConvoSaver } from '../src/langgraph/index.js';
import { drivers, freshUrl } from '../test/support.mjs';

const meta = { source: 'loop', step: 0, parents: {} };

// Puts a checkpoint after `parent` (a config) whose channels have the values given;
// every channel named gets a new version.
async function putValues(saver, parent, values) {
  const prev = parent.configurable.checkpoint_id ? await saver.getTuple(parent) : undefined;
  const versions = { ...(prev?.checkpoint.channel_versions ?? {}) };
  const newVersions = {};
  for (const k of Object.keys(values)) newVersions[k] = versions[k] = saver.getNextVersion(versions[k]);
  const checkpoint = { ...emptyCheckpoint(), id: uuid6(-1),
    channel_values: { ...(prev?.checkpoint.channel_values ?? {}), ...values }, channel_versions: versions };
  return saver.put(parent, checkpoint, meta, newVersions);
}

async function valuesOf(saver, config) {
  return (await saver.getTuple(config)).checkpoint.channel_values;
}

const root = (thread) => ({ configurable: { thread_id: thread, checkpoint_ns: '' } });

function convoLoad(url, thread) {
  const tool = path.join(process.env.top_builddir ?? path.resolve('../..'), 'tools', 'convo');
  return execFileSync(tool, ['--url', url, 'load', thread], { encoding: 'utf8' }).trim().split('\n');
}

for (const [name, base] of drivers()) {
  describe(`ConvoSaver on ${name}`, () => {
    test('messages are appended to the log once and restored exactly', async () => {
      const url = freshUrl(base);
      const shared = await Store.open(url); // memory: is one store per open
      const saver = new ConvoSaver(shared);
      const sys = new SystemMessage({ content: 'be brief', id: 's1' });
      const h = new HumanMessage({ content: 'hi', id: 'h1' });
      const ai = new AIMessage({ content: '', id: 'a1',
        tool_calls: [{ id: 'call1', name: 'search', args: { q: 'x' }, type: 'tool_call' }] });
      const tool = new ToolMessage({ content: 'found', tool_call_id: 'call1', id: 't1' });
      let c = await putValues(saver, root('t'), { messages: [sys, h], other: { n: 1 } });
      c = await putValues(saver, c, { messages: [sys, h, ai] });
      c = await putValues(saver, c, { messages: [sys, h, ai, tool, 'hi', 42] });
      const store = await saver.store();
      const log = await store.load('t');
      assert.deepEqual(log.messages.map((m) => m.role),
        ['system', 'user', 'assistant', 'tool', 'user', 'value']);
      assert.equal(JSON.parse(log.messages[1].json).content, 'hi');
      assert.equal((await store.checkpointGet('t')).logLength, 6);
      const v = await valuesOf(saver, c);
      assert.deepEqual(v.messages, [sys, h, ai, tool, 'hi', 42]);
      assert.ok(v.messages[2] instanceof AIMessage);
      assert.deepEqual(v.messages[2].tool_calls, ai.tool_calls);
      assert.deepEqual(v.other, { n: 1 });
      // and a new saver (a restart) continues the same log without repeating it
      await saver.close();
      const again = new ConvoSaver(shared);
      const latest = await again.getTuple(root('t'));
      const next = await putValues(again, latest.config,
        { messages: [...latest.checkpoint.channel_values.messages, new AIMessage('bye')] });
      assert.equal((await (await again.store()).load('t')).length, 7);
      assert.equal((await valuesOf(again, next)).messages.length, 7);
      if (name === 'sqlite') {
        const lines = convoLoad(url, 't');
        assert.equal(lines.length, 7);
        assert.equal(JSON.parse(lines[1]).role, 'user');
        assert.equal(JSON.parse(lines[6]).content, 'bye');
      }
      await again.close();
      await shared.close();
    });

    test('lists that do not extend the log come back as put', async () => {
      const saver = new ConvoSaver(freshUrl(base));
      const [a, b, c, d] = ['a', 'b', 'c', 'd'].map((x) => new HumanMessage({ content: x, id: x }));
      const c1 = await putValues(saver, root('t'), { messages: [a] });
      const c2 = await putValues(saver, c1, { messages: [a, b] });
      const c3 = await putValues(saver, c2, { messages: [a, b, c] });
      // time travel: a branch from c2
      const c4 = await putValues(saver, c2, { messages: [a, b, d] });
      assert.deepEqual((await valuesOf(saver, c4)).messages, [a, b, d]);
      assert.deepEqual((await valuesOf(saver, c3)).messages, [a, b, c]);
      // a branch from c1 that replaces b by id, then goes on
      const b2 = new HumanMessage({ content: 'B', id: 'b' });
      const c5 = await putValues(saver, c3, { messages: [a, b2, c] });
      assert.deepEqual((await valuesOf(saver, c5)).messages, [a, b2, c]);
      const c6 = await putValues(saver, c5, { messages: [a, b2, c, d] });
      assert.deepEqual((await valuesOf(saver, c6)).messages, [a, b2, c, d]);
      // removal (RemoveMessage leaves a shorter list), then an empty list
      const c7 = await putValues(saver, c3, { messages: [a, c] });
      assert.deepEqual((await valuesOf(saver, c7)).messages, [a, c]);
      const c8 = await putValues(saver, c3, { messages: [a] });
      assert.deepEqual((await valuesOf(saver, c8)).messages, [a]);
      const c9 = await putValues(saver, c8, { messages: [] });
      assert.deepEqual((await valuesOf(saver, c9)).messages, []);
      // every checkpoint still reads as put, and list gives the same values
      const listed = [];
      for await (const t of saver.list(root('t'))) listed.push(t.checkpoint.channel_values.messages.length);
      assert.deepEqual(listed, [0, 1, 2, 4, 3, 3, 3, 2, 1]);
      await saver.close();
    });

    test('two savers writing one thread: a new message goes after the other saver\'s', async () => {
      const shared = await Store.open(freshUrl(base));
      const s1 = new ConvoSaver(shared);
      const s2 = new ConvoSaver(shared);
      const m = (x) => new HumanMessage({ content: x, id: x });
      const c1 = await putValues(s1, root('t'), { messages: [m('a')] });
      await putValues(s2, c1, { messages: [m('a'), m('x')] }); // s2 grows the log
      const c2 = await putValues(s1, c1, { messages: [m('a'), m('b')] }); // a branch of s1 from c1
      assert.deepEqual((await valuesOf(s1, c2)).messages, [m('a'), m('b')]);
      assert.deepEqual((await (await s1.store()).load('t')).messages.map((x) => JSON.parse(x.json).content),
        ['a', 'x', 'b']);
      await shared.close();
    });

    test('messageChannels decides what goes to the log', async () => {
      const store = await Store.open(freshUrl(base));
      const saver = new ConvoSaver(store, { messageChannels: ['chat'] });
      const c = await putValues(saver, root('t'), { messages: ['kept as a blob'], chat: ['logged'],
        notalist: 'x' });
      assert.deepEqual(await valuesOf(saver, c), { messages: ['kept as a blob'], chat: ['logged'], notalist: 'x' });
      assert.equal((await store.load('t')).length, 1);
      const c2 = await putValues(saver, c, { chat: 'now a string' });
      assert.equal((await valuesOf(saver, c2)).chat, 'now a string');
      await saver.close(); // the store was given: it stays open
      await store.append('t', ['{"role":"user"}']);
      await store.close();
    });
  });
}
