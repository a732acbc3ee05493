// examples/node/ai-sdk-route.mjs as a Next.js server runs it: its POST called with Request
// objects by the SDK's own client side (route-client.mjs: DefaultChatTransport sending the
// last message, readUIMessageStream), in processes one after the other on one SQLite file;
// the chat read back by loadChat and by `convo load` / `convo extra` (tools/convo), the
// user's chats by its GET. The example runs on its own packages (examples/node/node_modules).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Store } from 'convo';
import { loadChat } from 'convo/ai-sdk';
import { wanted } from '../support.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const pkg = join(here, '..', '..');
const srcdir = process.env.top_srcdir ?? join(pkg, '..', '..');
const builddir = process.env.top_builddir ?? srcdir;
const example = join(srcdir, 'examples', 'node');
const route = join(example, 'ai-sdk-route.mjs');
const convoTool = join(builddir, 'tools', 'convo');

function run(cmd, args, env = {}) {
  return new Promise((resolve, reject) => {
    execFile(cmd, args, { cwd: example, env: { ...process.env, ...env }, maxBuffer: 16 << 20 },
      (err, stdout, stderr) => (err ? reject(Object.assign(err, { stderr })) : resolve(stdout)));
  });
}

if (wanted('sqlite')) test('examples/node/ai-sdk-route.mjs: POST(Request) keeps the chat across restarts', async () => {
  assert.ok(existsSync(join(example, 'node_modules', 'ai')),
    'examples/node/node_modules lacks ai: run npm ci in examples/node');
  const tmp = mkdtempSync(join(tmpdir(), 'convo-ai-sdk-example-'));
  const url = `sqlite:${join(tmp, 'chat.db')}`;
  const client = async (chatId, userId, ...steps) => {
    const out = (await run(process.execPath, [join(here, 'route-client.mjs'), route, chatId, userId, ...steps],
      { CONVO_URL: url })).trim().split('\n');
    return { said: out.slice(0, -2), messages: JSON.parse(out.at(-2)).messages, chats: JSON.parse(out.at(-1)) };
  };
  const tool = async (...args) => (await run(convoTool, ['--url', url, ...args])).trim();
  try {
    const first = await client('demo', 'ada', 'Hello', 'My name is Ada', 'What is the weather in Paris?',
      'Please delete old.txt', '/yes');
    assert.deepEqual(first.said, ['You said: "Hello" (message 1 of this chat).', 'Nice to meet you, Ada.',
      'In Paris: sunny, 21 C.', '[confirm Please delete old.txt]', 'Done: deleted.']);
    // what the browser holds is what the store holds
    const store = await Store.open(url);
    try {
      assert.deepEqual(await loadChat(store, 'demo'), first.messages);
    } finally {
      await store.close();
    }
    assert.equal(first.messages.length, 8);
    // the answered tool call went on in the same assistant message
    assert.deepEqual(first.messages[7].parts.map((p) => p.type), ['step-start', 'tool-confirm', 'step-start', 'text']);
    assert.ok(existsSync(convoTool), `${convoTool} not built`);
    const lines = (await tool('load', 'demo')).split('\n');
    assert.deepEqual(lines.map((l) => JSON.parse(l).role), ['user', 'assistant', 'user', 'assistant', 'user',
      'assistant', 'user', 'assistant']);
    assert.equal(lines[0], '{"role":"user","id":"demo-u1","parts":[{"type":"text","text":"Hello"}]}');
    assert.equal(await tool('extra', 'demo'), '{"title":"Hello","userId":"ada","activeStreamId":null}');

    // a new process: the route loads the chat, the model sees it
    const second = await client('demo', 'ada', 'What is my name?');
    assert.deepEqual(second.said, ['Your name is Ada.']);
    const bob = await client('bob-chat', 'bob', 'Hi, I am Bob');
    assert.deepEqual(bob.said, ['You said: "Hi, I am Bob" (message 1 of this chat).']);
    assert.deepEqual(bob.chats.map((c) => [c.chatId, c.title, c.preview]),
      [['bob-chat', 'Hi, I am Bob', 'You said: "Hi, I am Bob" (message 1 of this chat).']]);
    const ada = await client('demo2', 'ada', 'Second chat');
    assert.deepEqual(ada.chats.map((c) => [c.chatId, c.title, c.preview]),
      [['demo2', 'Second chat', 'You said: "Second chat" (message 1 of this chat).'],
        ['demo', 'Hello', 'Your name is Ada.']]);
    assert.equal((await tool('load', 'demo')).split('\n').length, 10);
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
});
