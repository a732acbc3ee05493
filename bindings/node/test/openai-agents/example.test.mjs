// examples/node/openai-agents-chat.mjs as a user runs it: processes one after the other on
// one SQLite file (each picks the session up), /undo and /clear, a run reading stdin, and
// `convo load` / `convo extra` (tools/convo) reading the session. The example runs on its
// own packages (examples/node/node_modules; example.test.mjs checks that their copy of
// this package is this tree's).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { wanted } from '../support.mjs';

const pkg = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const srcdir = process.env.top_srcdir ?? join(pkg, '..', '..');
const builddir = process.env.top_builddir ?? srcdir;
const example = join(srcdir, 'examples', 'node');
const convoTool = join(builddir, 'tools', 'convo');

function run(cmd, args, { input } = {}) {
  return new Promise((resolve, reject) => {
    const child = execFile(cmd, args, { cwd: example },
      (err, stdout, stderr) => (err ? reject(Object.assign(err, { stderr })) : resolve(stdout)));
    child.stdin.end(input ?? '');
  });
}

// the example's default store is SQLite (not run when CONVO_TEST_DRIVERS leaves it out)
if (wanted('sqlite')) test('examples/node/openai-agents-chat.mjs keeps its session across restarts', async () => {
  assert.ok(existsSync(join(example, 'node_modules', '@openai', 'agents')),
    'examples/node/node_modules lacks @openai/agents: run npm ci in examples/node');
  const tmp = mkdtempSync(join(tmpdir(), 'convo-agents-example-'));
  const chat = (...args) => run(process.execPath, ['openai-agents-chat.mjs', '--url', `sqlite:${join(tmp, 'chat.db')}`, ...args]);
  const tool = async (...args) => (await run(convoTool, ['--url', `sqlite:${join(tmp, 'chat.db')}`, ...args])).trim();
  try {
    assert.equal(await chat('Hello', 'My name is Ada', 'What is the weather in Paris?'),
      '(session demo: a new conversation)\nagent: You said: "Hello" (1 messages so far).\n' +
      'agent: Nice to meet you, Ada.\nagent: In Paris: sunny, 21 C.\n');
    assert.equal(await chat('What is my name?'),
      '(session demo: picking up 8 earlier items)\nagent: Your name is Ada.\n');
    assert.ok(existsSync(convoTool), `${convoTool} not built`);
    const lines = (await tool('load', 'demo')).split('\n').map((l) => JSON.parse(l));
    assert.deepEqual(lines.map((m) => m.role), ['user', 'assistant', 'user', 'assistant', 'user',
      'function_call', 'function_call_result', 'assistant', 'user', 'assistant']);
    assert.deepEqual(lines[5], { role: 'function_call', type: 'function_call', callId: 'call_5',
      name: 'get_weather', arguments: '{"city":"Paris"}', status: 'completed' });
    assert.equal(lines[6].output.text, '{"city":"Paris","sky":"sunny, 21 C"}');

    assert.equal(await chat('/undo', 'What is my name?', '/undo', '/undo'),
      '(session demo: picking up 10 earlier items)\n(removed the exchange that began "What is my name?")\n' +
      'agent: Your name is Ada.\n(removed the exchange that began "What is my name?")\n' +
      '(removed the exchange that began "What is the weather in Paris?")\n');
    assert.equal((await tool('load', 'demo')).split('\n').length, 4);
    assert.equal(await chat('/clear'),
      '(session demo: picking up 4 earlier items)\n(cleared; kept {"userId":"ada","title":"ada\'s chat"})\n');
    assert.equal(await tool('load', 'demo'), '');
    assert.equal(await tool('extra', 'demo'), '{"userId":"ada","title":"ada\'s chat"}');
    // no arguments: one message per line from stdin; another session of the same store
    assert.equal(await run(process.execPath, ['openai-agents-chat.mjs', '--url', `sqlite:${join(tmp, 'chat.db')}`,
      '--session', 'b', '--user', 'bob'], { input: 'What is my name?\n\nMy name is Bob\n' }),
    '(session b: a new conversation)\nagent: You have not told me your name.\nagent: Nice to meet you, Bob.\n');
    assert.equal(await tool('extra', 'b'), '{"userId":"bob","title":"bob\'s chat"}');
    // the user's sessions, the most recently active first
    await chat('--session', 'c', 'Hello');
    assert.equal(await chat('/sessions'), '(session demo: a new conversation)\n' +
      '(c: 2 items, "ada\'s chat")\n(demo: 0 items, "ada\'s chat")\n');
    assert.equal(await chat('Hi', '/sessions'), '(session demo: a new conversation)\n' +
      'agent: You said: "Hi" (1 messages so far).\n' +
      '(demo: 2 items, "ada\'s chat")\n(c: 2 items, "ada\'s chat")\n');
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});
