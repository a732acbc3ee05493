// package.test.mjs — the package as a user gets it: `npm pack`, then the tarball installed
// with plain `npm install` into fresh projects in a temporary folder outside the tree, and
// user programs (test/package/*.ts) type-checked by tsc at TypeScript's defaults, compiled
// and run there:
//  - a project with the tarball alone (no framework package can be resolved): the root
//    imports and works, convo/langgraph fails for want of @langchain/*, and without
//    CONVO_LIBRARY the library error names every path tried;
//  - a project with the tarball, @langchain/langgraph and @langchain/core: a StateGraph
//    over MessagesAnnotation on ConvoSaver, run twice (the second run goes on with the thread);
//  - a project with the tarball and @langchain/core alone: RunnableWithMessageHistory on
//    ConvoChatMessageHistory (convo/langchain), run twice likewise;
//  - a project with the tarball, @openai/agents and zod: the SDK's Runner on ConvoSession
//    (convo/openai-agents), run twice likewise. convo/openai-agents imports nothing of the
//    SDK at run time (its types do): it also loads in the project without it;
//  - a project with the tarball, ai and zod: streamText and toUIMessageStream's onEnd on
//    saveChat (convo/ai-sdk), run twice likewise; convo/ai-sdk imports nothing of the SDK at
//    run time either;
//  - a project with the tarball and AI SDK 6 (what `npm install ai` picks on Node 18 and 20,
//    since ai 7 needs Node 22): the same two turns saved from toUIMessageStreamResponse's
//    onFinish (ai 6 has no toUIMessageStream function), as docs/frameworks.md shows.
// The framework versions are the ones of package-lock.json; npm's cache makes it quick.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, readFileSync, copyFileSync, existsSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const pkg = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const srcdir = path.resolve(pkg, '..', '..');
const programs = path.join(pkg, 'test', 'package');
const tsc = path.join(pkg, 'node_modules', 'typescript', 'bin', 'tsc');
const library = process.env.CONVO_LIBRARY ?? path.join(srcdir, '.libs', 'libconvo.so');
const lock = JSON.parse(readFileSync(path.join(pkg, 'package-lock.json'), 'utf8')).packages;
const versionOf = (name) => lock[`node_modules/${name}`].version;
// AI SDK 6, not in package-lock.json (its devDependency is ai 7): the 6.x release tested
const AI6 = '6.0.326';

let tmp, tarball;

function run(cmd, args, { cwd, env = process.env } = {}) {
  return new Promise((resolve) => {
    execFile(cmd, args, { cwd, env, maxBuffer: 16 << 20 }, (err, stdout, stderr) =>
      resolve({ code: err ? (err.code ?? 1) : 0, stdout, stderr, out: `${stdout}${stderr}` }));
  });
}

async function ok(what, p) {
  const r = await p;
  assert.equal(r.code, 0, `${what} failed:\n${r.out}`);
  return r;
}

// A fresh project: its package.json, `npm install` of the tarball and the packages named,
// the programs copied in, and the tsconfig.json that `tsc --init` writes.
async function project(name, packages, files) {
  const dir = path.join(tmp, name);
  await ok('mkdir', run('mkdir', [dir]));
  writeFileSync(path.join(dir, 'package.json'),
    JSON.stringify({ name: `convo-test-${name}`, private: true, type: 'module' }, null, 2));
  await ok(`npm install in ${name}`, run('npm', ['install', '--no-audit', '--no-fund', '--prefer-offline',
    tarball, ...packages], { cwd: dir }));
  for (const f of files) copyFileSync(path.join(programs, f), path.join(dir, f));
  await ok('tsc --init', run(process.execPath, [tsc, '--init'], { cwd: dir }));
  return dir;
}

// tsc on one program under a tsconfig.json that names only that file: nothing else set
// (bare: TypeScript's own defaults, skipLibCheck false, so the package's .d.ts files are
// checked) or `tsc --init`'s options.
function tsconfig(dir, file, kind) {
  const name = `tsconfig.${kind}.json`;
  const init = readFileSync(path.join(dir, 'tsconfig.json'), 'utf8');
  writeFileSync(path.join(dir, name), kind === 'bare' ? JSON.stringify({ files: [file] })
    : init.replace(/\n}\s*$/, `,\n  "files": [${JSON.stringify(file)}]\n}\n`));
  return name;
}

function tscRun(dir, file, kind, ...args) {
  return run(process.execPath, [tsc, '-p', tsconfig(dir, file, kind), ...args], { cwd: dir });
}

function withLibrary() {
  return { ...process.env, CONVO_LIBRARY: library };
}

// the environment without anything that points at a libconvo
function withoutLibrary() {
  const env = { ...process.env };
  for (const k of ['CONVO_LIBRARY', 'LD_LIBRARY_PATH', 'PKG_CONFIG_PATH']) delete env[k];
  return env;
}

let rootProject, graphProject, historyProject, agentsProject, aiProject, ai6Project;

before(async () => {
  tmp = mkdtempSync(path.join(tmpdir(), 'convo-package-'));
  assert.ok(!path.relative(srcdir, tmp).match(/^[^.]/), `${tmp} is inside the source tree`);
  const packed = await ok('npm pack', run('npm', ['pack', '--pack-destination', tmp], { cwd: pkg }));
  tarball = path.join(tmp, packed.stdout.trim().split('\n').pop());
  [rootProject, graphProject, historyProject, agentsProject, aiProject, ai6Project] = await Promise.all([
    project('root', [], ['root.ts']),
    project('langgraph', ['@langchain/langgraph', '@langchain/core'].map((n) => `${n}@${versionOf(n)}`),
      ['graph.ts']),
    project('langchain', [`@langchain/core@${versionOf('@langchain/core')}`], ['history.ts']),
    project('agents', ['@openai/agents', 'zod'].map((n) => `${n}@${versionOf(n)}`), ['agents.ts']),
    project('ai-sdk', ['ai', 'zod'].map((n) => `${n}@${versionOf(n)}`), ['aisdk.ts', 'aisdk_chat.ts']),
    project('ai-sdk-6', [`ai@${AI6}`, `zod@${versionOf('zod')}`], ['aisdk6.ts', 'aisdk_chat.ts']),
  ]);
});

after(() => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

test('the tarball is publishable and holds the sources, not the tests', async () => {
  const manifest = JSON.parse(readFileSync(path.join(pkg, 'package.json'), 'utf8'));
  assert.notEqual(manifest.private, true, 'package.json says "private": true');
  await ok('npm publish --dry-run', run('npm', ['publish', '--dry-run', tarball], { cwd: tmp }));
  const installed = path.join(rootProject, 'node_modules', 'convo');
  assert.deepEqual(readdirSync(installed).sort(), ['README.md', 'package.json', 'src']);
  for (const entry of Object.values(manifest.exports)) {
    for (const f of typeof entry === 'string' ? [entry] : Object.values(entry)) {
      assert.ok(existsSync(path.join(installed, f)), `exports names ${f}, not in the tarball`);
    }
  }
});

test('the root works with no framework package resolvable', async () => {
  assert.ok(!existsSync(path.join(rootProject, 'node_modules', '@langchain')));
  // the program type-checks at TypeScript's defaults and with tsc --init's options
  await ok('tsc (bare tsconfig)', tscRun(rootProject, 'root.ts', 'bare', '--noEmit'));
  await ok('tsc (tsc --init)', tscRun(rootProject, 'root.ts', 'init'));
  const r = await ok('root.js', run(process.execPath, ['root.js'], { cwd: rootProject, env: withLibrary() }));
  assert.equal(r.stdout, 'append 0 2 false\nreplayed true\nuser,assistant\nCONVO_ECONFLICT\n' +
    'dump true\nclosed CONVO_EINVAL\n');
  // convo/langgraph and convo/langchain are the modules that need LangChain
  for (const sub of ['convo/langgraph', 'convo/langchain']) {
    const lg = await run(process.execPath, ['--input-type=module', '-e', `await import('${sub}')`],
      { cwd: rootProject, env: withLibrary() });
    assert.notEqual(lg.code, 0, sub);
    assert.match(lg.stderr, /Cannot find package '@langchain\//);
  }
});

test('without CONVO_LIBRARY the import works and the first open names every path tried', async () => {
  const script = `import { Store } from 'convo';
    try { await Store.open('memory:'); console.log('opened'); } catch (e) { console.log(e.message); }`;
  const bad = path.join(tmp, 'nowhere', 'libconvo.so');
  const r1 = await ok('open', run(process.execPath, ['--input-type=module', '-e', script],
    { cwd: rootProject, env: { ...withoutLibrary(), CONVO_LIBRARY: bad } }));
  assert.match(r1.stdout, /CONVO_LIBRARY/);
  assert.ok(r1.stdout.includes(`Tried: ${bad} (no such file)`), r1.stdout);

  const r2 = await ok('open', run(process.execPath, ['--input-type=module', '-e', script],
    { cwd: rootProject, env: withoutLibrary() }));
  const installed = existsSync('/usr/local/lib/libconvo.so.0') ||
    (await run('/sbin/ldconfig', ['-p'])).stdout.includes('libconvo.so.0');
  if (installed) {
    assert.equal(r2.stdout, 'opened\n'); // a libconvo installed on this machine
  } else {
    assert.match(r2.stdout, /^convo: cannot load libconvo\. Tried: \/usr\/local\/lib\/libconvo\.so\.0 \(no such file\); libconvo\.so\.0 \(.*cannot open shared object file.*\)\. Set CONVO_LIBRARY/);
  }
});

test('a LangGraph graph on ConvoSaver in a project with the framework', async () => {
  // tsc --init's options (skipLibCheck: LangChain's own .d.ts fail without it under
  // exactOptionalPropertyTypes); then TypeScript's defaults: no error in the program or in
  // this package's .d.ts files, whatever LangChain's say
  await ok('tsc (tsc --init)', tscRun(graphProject, 'graph.ts', 'init'));
  const bare = await tscRun(graphProject, 'graph.ts', 'bare', '--noEmit');
  const ours = bare.out.split('\n').filter((l) => /(^| )error TS\d+/.test(l) &&
    (!l.startsWith('node_modules/') || l.startsWith('node_modules/convo/')));
  assert.deepEqual(ours, [], `tsc (bare tsconfig):\n${bare.out}`);
  const first = await ok('graph.js', run(process.execPath, ['graph.js'], { cwd: graphProject, env: withLibrary() }));
  assert.equal(first.stdout, '2 bot#1: hello\n4 bot#3: how are you\n6 bot#5: bye\n' +
    'log 6: user,assistant,user,assistant,user,assistant\nextra {"title":"demo"}\n');
  // a new process goes on with the thread
  const second = await ok('graph.js', run(process.execPath, ['graph.js'], { cwd: graphProject, env: withLibrary() }));
  assert.equal(second.stdout, '8 bot#7: hello\n10 bot#9: how are you\n12 bot#11: bye\n' +
    'log 12: user,assistant,user,assistant,user,assistant,user,assistant,user,assistant,user,assistant\n' +
    'extra {"title":"demo"}\n');
});

test('a LangChain.js chain on ConvoChatMessageHistory in a project with @langchain/core alone', async () => {
  assert.ok(!existsSync(path.join(historyProject, 'node_modules', '@langchain', 'langgraph')));
  await ok('tsc (tsc --init)', tscRun(historyProject, 'history.ts', 'init'));
  const bare = await tscRun(historyProject, 'history.ts', 'bare', '--noEmit');
  const ours = bare.out.split('\n').filter((l) => /(^| )error TS\d+/.test(l) &&
    (!l.startsWith('node_modules/') || l.startsWith('node_modules/convo/')));
  assert.deepEqual(ours, [], `tsc (bare tsconfig):\n${bare.out}`);
  const first = await ok('history.js', run(process.execPath, ['history.js'], { cwd: historyProject, env: withLibrary() }));
  assert.equal(first.stdout, 'hello\nfine\nbye\nlog 6: human,ai,human,ai,human,ai\nextra {"userId":"u1"}\n');
  // a new process goes on with the session (the fake model starts its answers again)
  const second = await ok('history.js', run(process.execPath, ['history.js'], { cwd: historyProject, env: withLibrary() }));
  assert.equal(second.stdout, 'hello\nfine\nbye\nlog 12: ' + Array(6).fill('human,ai').join(',') +
    '\nextra {"userId":"u1"}\n');
});

test('the OpenAI Agents SDK Runner on ConvoSession in a project with @openai/agents', async () => {
  await ok('tsc (tsc --init)', tscRun(agentsProject, 'agents.ts', 'init'));
  const bare = await tscRun(agentsProject, 'agents.ts', 'bare', '--noEmit');
  const ours = bare.out.split('\n').filter((l) => /(^| )error TS\d+/.test(l) &&
    (!l.startsWith('node_modules/') || l.startsWith('node_modules/convo/')));
  assert.deepEqual(ours, [], `tsc (bare tsconfig):\n${bare.out}`);
  const first = await ok('agents.js', run(process.execPath, ['agents.js'], { cwd: agentsProject, env: withLibrary() }));
  const roles = 'user,assistant,user,function_call,function_call_result,assistant';
  assert.equal(first.stdout, '1 items in\nit is {"type":"text","text":"sunny in Paris"}\n' +
    `items 6: ${roles}\nlog: ${roles}\nextra {"userId":"u1"}\n`);
  // a new process goes on with the session
  const second = await ok('agents.js', run(process.execPath, ['agents.js'], { cwd: agentsProject, env: withLibrary() }));
  assert.equal(second.stdout, '7 items in\nit is {"type":"text","text":"sunny in Paris"}\n' +
    `items 12: ${roles},${roles}\nlog: ${roles},${roles}\nextra {"userId":"u1"}\n`);
});

test('convo/openai-agents loads without the SDK installed (it imports none of it at run time)', async () => {
  assert.ok(!existsSync(path.join(rootProject, 'node_modules', '@openai')));
  const script = `import { Store } from 'convo'; import { ConvoSession } from 'convo/openai-agents';
    const store = await Store.open('memory:');
    const s = new ConvoSession({ store, sessionId: 'x' });
    await s.addItems([{ role: 'user', content: 'hi' }, { type: 'function_call', callId: 'c', name: 'f', arguments: '{}' }]);
    console.log(JSON.stringify(await s.getItems(1)), (await store.load('x')).messages.map((m) => m.role).join());`;
  const r = await ok('import', run(process.execPath, ['--input-type=module', '-e', script],
    { cwd: rootProject, env: withLibrary() }));
  assert.equal(r.stdout, '[{"type":"function_call","callId":"c","name":"f","arguments":"{}"}] user,function_call\n');
});

test('the AI SDK on convo/ai-sdk in a project with ai', async () => {
  await ok('tsc (tsc --init)', tscRun(aiProject, 'aisdk.ts', 'init'));
  const bare = await tscRun(aiProject, 'aisdk.ts', 'bare', '--noEmit');
  const ours = bare.out.split('\n').filter((l) => /(^| )error TS\d+/.test(l) &&
    (!l.startsWith('node_modules/') || l.startsWith('node_modules/convo/')));
  assert.deepEqual(ours, [], `tsc (bare tsconfig):\n${bare.out}`);
  const first = await ok('aisdk.js', run(process.execPath, ['aisdk.js'], { cwd: aiProject, env: withLibrary() }));
  assert.equal(first.stdout, 'saved 2 of 2\nsaved 2 of 4\nchat 4: user,assistant,user,assistant\n' +
    'meta demo null\nchats chat:reply 3\n');
  // a new process goes on with the chat
  const second = await ok('aisdk.js', run(process.execPath, ['aisdk.js'], { cwd: aiProject, env: withLibrary() }));
  assert.equal(second.stdout, 'saved 2 of 6\nsaved 2 of 8\nchat 8: ' + Array(4).fill('user,assistant').join(',') +
    '\nmeta demo null\nchats chat:reply 7\n');
});

test('the AI SDK 6 on convo/ai-sdk: the chat saved from toUIMessageStreamResponse\'s onFinish', async () => {
  await ok('tsc (tsc --init)', tscRun(ai6Project, 'aisdk6.ts', 'init'));
  const bare = await tscRun(ai6Project, 'aisdk6.ts', 'bare', '--noEmit');
  const ours = bare.out.split('\n').filter((l) => /(^| )error TS\d+/.test(l) &&
    (!l.startsWith('node_modules/') || l.startsWith('node_modules/convo/')));
  assert.deepEqual(ours, [], `tsc (bare tsconfig):\n${bare.out}`);
  const first = await ok('aisdk6.js', run(process.execPath, ['aisdk6.js'], { cwd: ai6Project, env: withLibrary() }));
  assert.equal(first.stdout, 'saved 2 of 2\nsaved 2 of 4\nchat 4: user,assistant,user,assistant ' +
    'hi|reply 1|bye|reply 3\nmeta demo null\n');
  const second = await ok('aisdk6.js', run(process.execPath, ['aisdk6.js'], { cwd: ai6Project, env: withLibrary() }));
  assert.equal(second.stdout, 'saved 2 of 6\nsaved 2 of 8\nchat 8: ' + Array(4).fill('user,assistant').join(',') +
    ' hi|reply 1|bye|reply 3|hi|reply 5|bye|reply 7\nmeta demo null\n');
});

test('convo/ai-sdk loads without the SDK installed (it imports none of it at run time)', async () => {
  assert.ok(!existsSync(path.join(rootProject, 'node_modules', 'ai')));
  const script = `import { Store } from 'convo'; import { saveChat, loadChat } from 'convo/ai-sdk';
    const store = await Store.open('memory:');
    const messages = [{ id: 'u1', role: 'user', parts: [{ type: 'text', text: 'hi' }] }];
    await saveChat(store, { chatId: 'x', messages });
    console.log(JSON.stringify(await loadChat(store, 'x')), (await store.load('x')).messages[0].json);`;
  const r = await ok('import', run(process.execPath, ['--input-type=module', '-e', script],
    { cwd: rootProject, env: withLibrary() }));
  assert.equal(r.stdout, '[{"role":"user","id":"u1","parts":[{"type":"text","text":"hi"}]}] ' +
    '{"role":"user","id":"u1","parts":[{"type":"text","text":"hi"}]}\n');
});
