// The real Runner of @openai/agents on ConvoSession, with a scripted model
// (agents-script.mjs): tool calls (one and two at once, with reasoning items), an output
// guardrail that blocks an answer and a retried run from its RunState (the SDK's
// append_items and replace_suffix transactions), a model failure and the run tried again,
// the SDK's compaction (atomic replaceHistoryWithCompaction, and the runner's fallback:
// clearSession and addItems). After every step the session's items must equal
// MemorySession's on the same script. On SQLite and every server: a process restart in
// the middle (child processes on the same session), a run stopped for a tool's approval
// and resumed by another process from its serialized RunState,
// two processes playing turns on one session at once; `convo load` prints the history. The
// Runner is given frozen items (a change would throw) and never changes them; an app's
// sessionInputCallback that does gets a TypeError, or with mutableItems copies.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile, spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { MemorySession, OutputGuardrailTripwireTriggered } from '@openai/agents';
import { Store } from 'convo';
import { ConvoSession } from 'convo/openai-agents';
import { scriptedAgent, runner, resumeState } from './agents-script.mjs';
import { drivers, freshUrl } from '../support.mjs';

const execFileP = promisify(execFile);
const here = dirname(fileURLToPath(import.meta.url));
const script = join(here, 'agents-script.mjs');
const builddir = process.env.top_builddir ?? join(here, '..', '..', '..', '..');
const convoTool = join(builddir, 'tools', 'convo');

const TURNS = ['hello', 'weather Paris', 'add 2 3', 'both Rome', 'what did I say?', 'weather Oslo',
  'add 40 2', 'both Lima', 'and now?', 'weather Kyiv', 'add 7 8', 'thanks'];

// One agent per session kind, so both see the same calls of their own model.
function pair() {
  return { convo: scriptedAgent(), memory: scriptedAgent() };
}

async function same(convo, memory, what) {
  assert.deepEqual(await convo.getItems(), await memory.getItems(), `${what}: items differ from MemorySession's`);
  for (const k of [1, 3]) {
    assert.deepEqual(await convo.getItems(k), await memory.getItems(k), `${what}: getItems(${k}) differs`);
  }
}

// A turn on both sessions: the same final output (or the same error), then the same items.
async function turn(agents, sessions, input, what = `turn ${JSON.stringify(input)}`) {
  const outcome = async (agent, session) => {
    try {
      return { output: (await runner.run(agent, input, { session })).finalOutput };
    } catch (e) {
      return { error: e.constructor.name, state: e.state };
    }
  };
  const a = await outcome(agents.convo.agent, sessions.convo);
  const b = await outcome(agents.memory.agent, sessions.memory);
  assert.deepEqual([a.output, a.error], [b.output, b.error], `${what}: outcome differs`);
  await same(sessions.convo, sessions.memory, what);
  return [a, b];
}

function childTurns(url, sessionId, turns) {
  return execFileP(process.execPath, [script, url, sessionId, ...turns], { maxBuffer: 64 << 20 })
    .then(({ stdout }) => stdout.trim().split('\n').map((l) => JSON.parse(l)));
}

function childResume(url, sessionId, stateText) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [script, '--resume', url, sessionId], { stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '', err = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stderr.on('data', (d) => { err += d; });
    child.on('close', (code) => (code === 0 ? resolve(out.trim().split('\n').map((l) => JSON.parse(l)))
      : reject(new Error(`resume exited ${code}: ${err}`))));
    child.stdin.end(stateText);
  });
}

for (const [name, base] of drivers()) {
  test(`${name}: the Runner with tool calls, a blocked answer retried, a failed model call and compaction, as on MemorySession`, async () => {
    const store = await Store.open(freshUrl(base));
    const agents = pair();
    const sessions = { convo: new ConvoSession({ store, sessionId: 'chat', extra: { userId: 'ada', title: 'demo' } }),
      memory: new MemorySession({ sessionId: 'chat' }) };
    try {
      for (const input of TURNS) await turn(agents, sessions, input);

      // an output guardrail blocks the answer: the runner keeps the turn's items with an
      // append_items transaction; the run retried from its RunState replaces the suffix
      const [blocked, blockedMemory] = await turn(agents, sessions, 'bad weather Nice');
      assert.equal(blocked.error, OutputGuardrailTripwireTriggered.name);
      const kept = await store.load('chat', { tail: 4 });
      assert.deepEqual(kept.messages.map((m) => /"\$op":"[\w-]{22}"/.test(m.json)), [true, false, false, false],
        'the blocked turn was an append_items transaction');
      agents.convo.guard.trip = agents.memory.guard.trip = false;
      const resumed = await runner.run(agents.convo.agent, blocked.state, { session: sessions.convo });
      const resumedMemory = await runner.run(agents.memory.agent, blockedMemory.state, { session: sessions.memory });
      assert.equal(resumed.finalOutput, resumedMemory.finalOutput);
      await same(sessions.convo, sessions.memory, 'the blocked run retried');
      assert.equal((await store.load('chat', { tail: 1 })).generation, kept.generation + 1,
        'the retried run replaced the suffix by a tail rewrite');
      agents.convo.guard.trip = agents.memory.guard.trip = true;

      // the model fails after the tool ran; the turn is tried again
      agents.convo.model.failAfterTool = agents.memory.model.failAfterTool = true;
      const [failed] = await turn(agents, sessions, 'weather Bern', 'the failed turn');
      assert.equal(failed.error, 'Error');
      assert.equal(agents.convo.model.failAfterTool, false, 'the model failed after the tool ran');
      await turn(agents, sessions, 'weather Bern', 'the turn tried again');

      for (const input of TURNS.slice(0, 4)) await turn(agents, sessions, input);
      const before = await store.load('chat', { fromSeq: 1e9 });
      // compaction: replaceHistoryWithCompaction, one tail rewrite
      await turn(agents, sessions, 'compact');
      const after = await store.load('chat', { fromSeq: 1e9 });
      assert.equal(after.generation, before.generation + 1, 'compaction is one tail rewrite');
      assert.equal((await sessions.convo.getItems())[0].type, 'compaction');
      assert.deepEqual(after.extra, { userId: 'ada', title: 'demo' });
      for (const input of TURNS.slice(4, 8)) await turn(agents, sessions, input);
      const items = await sessions.convo.getItems();
      assert.ok(items.length > 10);
      assert.deepEqual(items.map((i) => i.type).filter((t, k, a) => a.indexOf(t) === k).sort(),
        ['compaction', 'function_call', 'function_call_result', 'message', 'reasoning']);
    } finally {
      await sessions.convo.close();
      await store.close();
    }
  });

  // The Runner's compaction fallback on a ConvoSession without replaceHistoryWithCompaction
  // (what the runner does for a store that cannot replace a history in one step), after
  // the first turns, as on MemorySession; resolves once it is done.
  async function fallbackRun(store, sessionId) {
    const agents = pair();
    const convo = new ConvoSession({ store, sessionId, extra: { userId: 'bob' } });
    const plain = {};
    for (const m of ['getSessionId', 'getItems', 'addItems', 'popItem', 'clearSession', 'applyHistoryTransaction']) {
      plain[m] = convo[m].bind(convo);
    }
    const calls = [];
    const clear = plain.clearSession;
    plain.clearSession = async () => { calls.push('clearSession'); return clear(); };
    const sessions = { convo: plain, memory: new MemorySession() };
    for (const input of TURNS.slice(0, 5)) await turn(agents, sessions, input);
    await store.saveExtra(sessionId, { title: 'named later' });
    await turn(agents, sessions, 'compact');
    assert.deepEqual(calls, ['clearSession'], 'the runner took its fallback');
    const h = await store.load(sessionId);
    assert.deepEqual(h.extra, { userId: 'bob', title: 'named later' });
    assert.equal(h.generation, 1, 'cleared by one tail rewrite, not deleted');
    for (const input of TURNS.slice(5, 9)) await turn(agents, sessions, input);
  }

  test(`${name}: the runner's compaction fallback (clearSession, then addItems) keeps the thread's extra`, async () => {
    const store = await Store.open(freshUrl(base));
    try {
      await fallbackRun(store, 'fallback');
    } finally {
      await store.close();
    }
  });

  test(`${name}: after the compaction fallback the session keeps its creation time and place in the index`, async () => {
    const store = await Store.open(freshUrl(base));
    try {
      // 'fallback' is created before 'other', and compacted (cleared, rebuilt) after it
      await store.saveExtra('fallback', { userId: 'bob' });
      await store.append('other', [{ role: 'user', content: 'x' }]);
      await store.saveExtra('other', { userId: 'bob' });
      await fallbackRun(store, 'fallback');
      const { sessions: recent } = await ConvoSession.list(store, { where: { userId: 'bob' } });
      assert.deepEqual(recent.map((s) => s.sessionId), ['fallback', 'other'], 'the newest activity first');
      const { sessions: byCreation } = await ConvoSession.list(store, { where: { userId: 'bob' }, order: 'created' });
      assert.deepEqual(byCreation.map((s) => s.sessionId), ['other', 'fallback'],
        'the cleared session kept its creation time (a thread made again would be the newest)');
      assert.ok(byCreation[1].length > 2);
    } finally {
      await store.close();
    }
  });

  // memory: is one store per process: the tests below cross processes
  if (name === 'memory') continue;

  test(`${name}: a process restart in the middle, and a run resumed by another process`, async () => {
    const url = freshUrl(base);
    const agents = pair();
    const memory = new MemorySession();
    let convo = new ConvoSession({ url, sessionId: 'restart' });
    const sessions = () => ({ convo, memory });
    for (const input of TURNS.slice(0, 4)) await turn(agents, sessions(), input);
    await convo.close();

    // another process goes on with the session
    const outputs = await childTurns(url, 'restart', TURNS.slice(4, 8));
    const expected = [];
    for (const input of TURNS.slice(4, 8)) {
      expected.push((await runner.run(agents.memory.agent, input, { session: memory })).finalOutput);
    }
    assert.deepEqual(outputs, expected);
    convo = new ConvoSession({ url, sessionId: 'restart' }); // this process, a new Store
    await same(convo, memory, 'after the other process');

    // a tool call waits for approval here; another process approves it and finishes the run
    const stopped = await runner.run(agents.convo.agent, 'pay 5', { session: convo });
    const stoppedMemory = await runner.run(agents.memory.agent, 'pay 5', { session: memory });
    assert.equal(stopped.interruptions.length, 1);
    await same(convo, memory, 'the run stopped for approval');
    const resumed = await childResume(url, 'restart', stopped.state.toString());
    const stateMemory = await resumeState(agents.memory.agent, stoppedMemory.state.toString());
    const resumedMemory = await runner.run(agents.memory.agent, stateMemory, { session: memory });
    assert.deepEqual(resumed, [resumedMemory.finalOutput]);
    assert.equal(resumed[0], 'pay said paid 5');
    await same(convo, memory, 'after the run resumed by another process');
    for (const input of TURNS.slice(8)) await turn(agents, sessions(), input);
    await convo.close();

    // `convo load` prints one role-tagged JSON item per line
    if (existsSync(convoTool)) {
      const { stdout } = await execFileP(convoTool, ['--url', url, 'load', 'restart'], { maxBuffer: 64 << 20 });
      const lines = stdout.trim().split('\n').map((l) => JSON.parse(l));
      const items = await memory.getItems();
      assert.equal(lines.length, items.length);
      lines.forEach((line, i) => {
        assert.equal(line.role, items[i].role ?? items[i].type);
        assert.equal(line.type, items[i].type);
      });
      assert.ok(lines.some((l) => l.role === 'function_call' && l.name === 'weather'));
      assert.ok(lines.some((l) => l.role === 'function_call_result' && l.output.text === 'sunny in Paris'));
    }
  });

  test(`${name}: two processes playing turns on one session at once`, async () => {
    const url = freshUrl(base);
    const turnsOf = (p) => Array.from({ length: 8 }, (_, i) => (i % 2 ? `weather T${p}x${i}` : `${p}:${i}`));
    // both loaded, then told to play each turn at the same moment, turn by turn (a process
    // left to play all its turns at once may, on a loaded machine, finish before the other
    // starts: the turns would not overlap)
    const children = ['a', 'b'].map((p) => {
      const child = spawn(process.execPath, [script, url, 'shared', ...turnsOf(p)],
        { stdio: ['pipe', 'pipe', 'inherit'], env: { ...process.env, CONVO_AGENTS_WAIT: 'step' } });
      let out = '';
      let waiter = null;
      const lineCount = () => out.split('\n').length - 1;
      // resolves once the child has printed n lines ("ready", then one a turn)
      const printed = (n) => new Promise((resolve) => {
        if (lineCount() >= n) resolve();
        else waiter = { n, resolve };
      });
      child.stdout.on('data', (d) => {
        out += d;
        if (waiter && lineCount() >= waiter.n) {
          const { resolve } = waiter;
          waiter = null;
          resolve();
        }
      });
      const done = new Promise((resolve, reject) => child.on('close', (code) => (code === 0
        ? resolve(out.trim().split('\n').slice(1).map((l) => JSON.parse(l))) : reject(new Error(`${p} exited ${code}`)))));
      done.catch(() => {});
      return { child, printed, done };
    });
    await Promise.all(children.map((c) => c.printed(1)));
    for (let turn = 0; turn < 8; turn++) {
      for (const c of children) c.child.stdin.write('go\n');
      await Promise.race([Promise.all(children.map((c) => c.printed(turn + 2))),
        Promise.all(children.map((c) => c.done))]);
    }
    for (const c of children) c.child.stdin.end();
    const [a, b] = await Promise.all(children.map((c) => c.done));
    assert.equal(a.length, 8);
    assert.equal(b.length, 8);
    const session = new ConvoSession({ url, sessionId: 'shared' });
    try {
      const items = await session.getItems();
      // each turn's items are one batch, whole and in order: its user message, then the
      // reasoning, call and result of a weather turn, then the answer
      const seen = { a: [], b: [] };
      const order = [];
      let i = 0;
      while (i < items.length) {
        const user = items[i++];
        assert.equal(user.role, 'user', `item ${i - 1} starts no turn`);
        const m = user.content.match(/^(?:weather T(a|b)x(\d)|(a|b):(\d))$/);
        assert.ok(m, user.content);
        const p = m[1] ?? m[3];
        seen[p].push(Number(m[2] ?? m[4]));
        order.push(p);
        if (m[1]) {
          assert.deepEqual(items.slice(i, i + 3).map((x) => x.type), ['reasoning', 'function_call', 'function_call_result']);
          assert.equal(items[i + 1].callId, items[i + 2].callId);
          assert.equal(items[i + 2].output.text, `sunny in T${p}x${m[2]}`);
          i += 3;
        }
        assert.equal(items[i].role, 'assistant');
        i++;
      }
      assert.deepEqual(seen, { a: [0, 1, 2, 3, 4, 5, 6, 7], b: [0, 1, 2, 3, 4, 5, 6, 7] });
      // the two played at once: their turns alternate somewhere (a b a, or b a b)
      assert.ok(/ab+a|ba+b/.test(order.join('')), `turns did not interleave: ${order.join('')}`);
    } finally {
      await session.close();
    }
  });
}

// An app whose sessionInputCallback changes the history it is given in place (it redacts the
// user's words before the model sees them). ConvoSession's items are frozen: the change throws
// a TypeError, before anything is written, and the history stays as it was; with
// mutableItems the callback gets copies, as on MemorySession, and every step is the same.
test('a sessionInputCallback changing history items in place: a TypeError by default; with mutableItems as on MemorySession', async () => {
  const store = await Store.open('memory:');
  const redact = (history, input) => {
    for (const item of history) if (item.role === 'user') item.content = '[redacted]';
    return [...history, ...input];
  };
  const frozen = new ConvoSession({ store, sessionId: 'frozen' });
  const agents = pair();
  const sessions = { convo: new ConvoSession({ store, sessionId: 'copies', mutableItems: true }),
    memory: new MemorySession({ sessionId: 'copies' }) };
  try {
    const { agent } = scriptedAgent();
    for (const input of TURNS.slice(0, 3)) await runner.run(agent, input, { session: frozen });
    const before = await frozen.getItems();
    const length = (await store.load('frozen', { fromSeq: 1e9 })).length;
    await assert.rejects(runner.run(agent, 'hello again', { session: frozen, sessionInputCallback: redact }), TypeError);
    assert.deepEqual(await frozen.getItems(), before);
    assert.equal((await store.load('frozen', { fromSeq: 1e9 })).length, length, 'the failed run wrote nothing');

    for (const input of TURNS.slice(0, 3)) await turn(agents, sessions, input);
    for (const input of ['hello again', 'weather Oslo', 'and now?']) {
      const a = await runner.run(agents.convo.agent, input, { session: sessions.convo, sessionInputCallback: redact });
      const b = await runner.run(agents.memory.agent, input, { session: sessions.memory, sessionInputCallback: redact });
      assert.equal(a.finalOutput, b.finalOutput, input);
      await same(sessions.convo, sessions.memory, `${input}, with a redacting callback`);
    }
    const users = (await sessions.convo.getItems()).filter((i) => i.role === 'user').map((i) => i.content);
    assert.deepEqual(users, [...TURNS.slice(0, 3), 'hello again', 'weather Oslo', 'and now?'],
      'the callback changed only its copies');
  } finally {
    await store.close();
  }
});
