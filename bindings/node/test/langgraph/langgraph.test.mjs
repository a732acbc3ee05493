// A real @langchain/langgraph runtime on ConvoSaver: a StateGraph over MessagesAnnotation
// (fake deterministic model, a tool, interrupt()) run for ~50 turns in three processes
// (the interrupt of the first is resumed by the second), getStateHistory, updateState
// on an old checkpoint, RemoveMessage. The state after every step must equal the same
// script's (langgraph-script.mjs) on LangGraph's MemorySaver, and `convo load THREAD`
// must print the conversation readably. On SQLite and on every server named by
// CONVO_TEST_*_URL (memory: cannot outlive a process).
// The test starts this file again as its child processes (CONVO_LG_CHILD=URL THREAD
// SEGMENT): each opens a ConvoSaver, runs one segment and prints a JSON line per step.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { MemorySaver } from '@langchain/langgraph';
import { ConvoSaver } from 'convo/langgraph';
import { buildGraph, runStep, SEGMENTS } from './langgraph-script.mjs';
import { drivers, freshUrl, wanted } from '../support.mjs';

const run = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url));
const self = fileURLToPath(import.meta.url);
const builddir = process.env.top_builddir ?? join(here, '..', '..', '..', '..');
const convoTool = join(builddir, 'tools', 'convo');

// SQLite and every server: a fresh file, prefix, schema or database (memory: is one
// store per process, and this test is about crossing processes); SQLite twice: with its
// calls on the main thread (the saver's default there) and on libuv's pool
function persistentDrivers() {
  const out = drivers().filter(([name]) => name !== 'memory').map(([name, base]) => [name, freshUrl(base), {}]);
  if (wanted('sqlite')) out.push(['sqlite, calls on the pool', freshUrl('sqlite:'), { sync: false }]);
  return out;
}

let reference;
async function referenceRun() {
  if (!reference) {
    const graph = buildGraph(new MemorySaver());
    reference = [];
    for (const segment of SEGMENTS) {
      for (const step of segment) reference.push(await runStep(graph, 'chat', step));
    }
  }
  return reference;
}

async function segmentInChild(url, threadId, segment, opts) {
  const { stdout } = await run(process.execPath, [self], {
    maxBuffer: 256 << 20,
    env: { ...process.env, CONVO_LG_CHILD: JSON.stringify([url, threadId, segment, opts]) },
  });
  return stdout.trim().split('\n').map((line) => JSON.parse(line));
}

// The log must hold the conversation as it stood before the branch, in order, each
// message a role-tagged JSON line with its text.
const ROLE = { human: 'user', ai: 'assistant', system: 'system', tool: 'tool' };
function checkLog(lines, messages) {
  assert.ok(lines.length >= messages.length,
    `convo load printed ${lines.length} messages, the conversation has ${messages.length}`);
  messages.forEach((m, i) => {
    const line = JSON.parse(lines[i]);
    const type = m.id[m.id.length - 1].replace(/Message$/, '').toLowerCase();
    assert.equal(line.role, ROLE[type], `log line ${i}: ${lines[i]}`);
    assert.equal(line.content, m.kwargs.content, `log line ${i}: ${lines[i]}`);
  });
}

function registerTests() {
  for (const [driver, url, opts] of persistentDrivers()) {
    test(`LangGraph runtime on ConvoSaver (${driver})`, async (t) => {
      const expected = await referenceRun();
      const threadId = 'chat'; // as the reference: LangGraph copies it into the metadata
      const got = [];
      for (let segment = 0; segment < SEGMENTS.length; segment++) {
        got.push(...await segmentInChild(url, threadId, segment, opts));
      }
      assert.equal(got.length, expected.length);
      expected.forEach((want, i) => {
        assert.deepStrictEqual(got[i], want, `step ${i} (${want.kind}) differs from MemorySaver`);
      });
      // the interrupt really crossed a process: segment 0 ended waiting on it
      const first = got[SEGMENTS[0].length - 1].state;
      assert.deepEqual(first.next, ['approval']);

      await t.test('convo load shows the conversation', async () => {
        assert.ok(existsSync(convoTool), `${convoTool} not built`);
        const { stdout } = await run(convoTool, ['--url', url, 'load', threadId], { maxBuffer: 64 << 20 });
        const beforeBranch = expected.find((s) => s.kind === 'history').state.values.messages;
        checkLog(stdout.trim().split('\n'), beforeBranch);
      });
    });
  }
}

if (process.env.CONVO_LG_CHILD) {
  const [url, threadId, segment, opts] = JSON.parse(process.env.CONVO_LG_CHILD);
  const saver = new ConvoSaver(url, opts);
  try {
    const graph = buildGraph(saver);
    for (const step of SEGMENTS[segment]) {
      process.stdout.write(`${JSON.stringify(await runStep(graph, threadId, step))}\n`);
    }
  } finally {
    await saver.close();
  }
} else {
  registerTests();
}
