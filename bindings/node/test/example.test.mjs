// example.test.mjs — examples/node/chatbot.mjs as a user runs it: two processes on one
// SQLite file (the second picks the conversation up after the "restart"), a third
// reading its messages from stdin, then `convo load` (tools/convo) reads the thread.
// The example runs on its own packages (examples/node/node_modules, from its lockfile),
// where npm installed a copy of this package: the copy must be this tree's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { wanted } from './support.mjs';

const pkg = join(dirname(fileURLToPath(import.meta.url)), '..');
const srcdir = process.env.top_srcdir ?? join(pkg, '..', '..');
const builddir = process.env.top_builddir ?? srcdir;
const example = join(srcdir, 'examples', 'node');
const convoTool = join(builddir, 'tools', 'convo');

function files(dir) {
  const out = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...files(p));
    else out.push(p);
  }
  return out.sort();
}

function run(cmd, args, { input, env } = {}) {
  return new Promise((resolve, reject) => {
    const child = execFile(cmd, args, { cwd: example, env: { ...process.env, ...env } },
      (err, stdout, stderr) => (err ? reject(Object.assign(err, { stderr })) : resolve(stdout)));
    child.stdin.end(input ?? '');
  });
}

// on SQLite, the example's default store (not when CONVO_TEST_DRIVERS leaves SQLite out)
// (a skip would count as a failure in tests/node.sh: the test is not registered)
if (wanted('sqlite')) test('examples/node/chatbot.mjs continues its conversation after a restart', async () => {
  const installed = join(example, 'node_modules', 'convo');
  assert.ok(existsSync(join(example, 'node_modules', '@langchain', 'langgraph')),
    'examples/node/node_modules is missing: run scripts/install-deps.sh (npm ci in examples/node)');
  // install-links=true: npm copied bindings/node; a copy older than the tree is not tested
  const want = files(join(pkg, 'src')).map((f) => relative(pkg, f));
  assert.deepEqual(files(join(installed, 'src')).map((f) => relative(installed, f)), want,
    'examples/node/node_modules/convo is not this tree\'s bindings/node: run npm ci in examples/node');
  for (const f of [...want, 'package.json']) {
    assert.ok(readFileSync(join(installed, f)).equals(readFileSync(join(pkg, f))),
      `examples/node/node_modules/convo/${f} differs from bindings/node/${f}: run npm ci in examples/node`);
  }

  const tmp = mkdtempSync(join(tmpdir(), 'convo-example-'));
  try {
    const url = `sqlite:${join(tmp, 'chat.db')}`;
    const first = await run(process.execPath, ['chatbot.mjs', '--url', url, 'Hello', 'My name is Ada']);
    assert.equal(first, '(thread demo: a new conversation)\nbot: You said: "Hello".\n' +
      'bot: Nice to meet you, Ada.\n');
    const second = await run(process.execPath, ['chatbot.mjs', '--url', url, 'What is my name?']);
    assert.equal(second, '(thread demo: picking up 5 earlier messages)\nbot: Your name is Ada.\n');
    // no arguments: one message per line from stdin; $CONVO_URL names the store
    const third = await run(process.execPath, ['chatbot.mjs'], { input: 'How many messages?\n\n',
      env: { CONVO_URL: url } });
    assert.equal(third, '(thread demo: picking up 7 earlier messages)\n' +
      'bot: You have sent me 4 messages in this thread.\n');
    // another thread of the same store starts empty
    const other = await run(process.execPath, ['chatbot.mjs', '--url', url, '--thread', 'b', 'What is my name?']);
    assert.equal(other, '(thread b: a new conversation)\nbot: You have not told me your name.\n');

    assert.ok(existsSync(convoTool), `${convoTool} not built`);
    const lines = (await run(convoTool, ['--url', url, 'load', 'demo'])).trim().split('\n')
      .map((l) => JSON.parse(l));
    assert.deepEqual(lines.map((m) => [m.role, m.content]), [
      ['system', 'You are a small deterministic demo bot.'],
      ['user', 'Hello'],
      ['assistant', 'You said: "Hello".'],
      ['user', 'My name is Ada'],
      ['assistant', 'Nice to meet you, Ada.'],
      ['user', 'What is my name?'],
      ['assistant', 'Your name is Ada.'],
      ['user', 'How many messages?'],
      ['assistant', 'You have sent me 4 messages in this thread.'],
    ]);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});
