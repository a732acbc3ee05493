// The 1,000-turn AI SDK chat on convo/ai-sdk (loadChat / saveChat on a convo SQLite store)
// against the naive persistence of the SDK's guide done on SQLite: the chat's whole
// UIMessage array as JSON in one row, read and rewritten whole on every save
// (better-sqlite3, the same WAL and synchronous=NORMAL as convo's SQLite driver, a file of
// its own). A turn is what the "send only the last message" route does: load the chat,
// then save it with the user's message and the assistant's answer; every TOOL_EVERY-th turn
// the answer is a client-side tool call, saved, then saved again with more parts once the
// client answered (the same assistant message, continued: convo replaces that message).
// Reports turns/s, the turn rate at turn 100 and at the last (from the median of the 50
// turns ending there), the same for the turn's saves alone (a route whose client sends the
// whole chat does no load), loadChat at the last turn (median of 30; in the process that ran
// the turns and in a new one: a new Store / connection on the same file) and bytes stored
// next to the raw bytes of the messages. Both must give the conversation back equal. The
// two run one after the other in ROUNDS rounds (3 by default, the order turned each round);
// each figure is the median over the rounds. A bench, not a test.
//
//   node ai-sdk-bench.mjs [--turns N] [--payload BYTES] [--tool-every K] [--rounds R] [--sends last|all] [--json]
//
// --sends all: the client sends the whole chat (useChat's default transport) and the route
// loads nothing: a turn is the saves alone.
//
// libconvo: CONVO_LIBRARY or the build tree. SQLite files go to a temporary folder.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isDeepStrictEqual } from 'node:util';
import Database from 'better-sqlite3';
import { benchOptions, words, convoImports, median, since, fileBytes, inTurn } from './common.mjs';

const { opts, TURNS, PAYLOAD, ROUNDS, WINDOW, EARLY } = benchOptions('ai-sdk-bench', {
  'tool-every': { type: 'string', default: '10' },
  sends: { type: 'string', default: 'last' },
});
const TOOL_EVERY = Number(opts['tool-every']);
const LOADS = 30;
const SENDS_ALL = opts.sends === 'all';
if (!['last', 'all'].includes(opts.sends) || !(TOOL_EVERY >= 0)) {
  console.error('ai-sdk-bench: --sends is last (the route loads the chat) or all (the client sends it); ' +
    '--tool-every >= 0 (0: none)');
  process.exit(2);
}

// convo (the root) and convo/ai-sdk of the package this folder sits in (bindings/node).
async function convoModules() {
  const [root, ai] = await convoImports('.', './ai-sdk');
  return { Store: root.Store, ...ai };
}

// The conversation, the same for both: per turn the user's message, and the assistant's
// answer as toUIMessageStream's onEnd gives it — for a tool turn first the call waiting
// for the client, then the same message with the output and the text after it.
const script = [];
for (let t = 0; t < TURNS; t++) {
  const u = { id: `u${t}`, role: 'user', parts: [{ type: 'text', text: words(PAYLOAD) }] };
  const text = { type: 'text', text: words(PAYLOAD), state: 'done' };
  if (TOOL_EVERY > 0 && t % TOOL_EVERY === TOOL_EVERY - 1) {
    const call = { type: 'tool-confirm', toolCallId: `call-${t}`, state: 'input-available', input: { action: 'go' } };
    const waiting = { id: `a${t}`, role: 'assistant', parts: [{ type: 'step-start' }, call] };
    const done = { id: `a${t}`, role: 'assistant', parts: [{ type: 'step-start' },
      { ...call, state: 'output-available', output: { confirmed: true } }, { type: 'step-start' }, text] };
    script.push({ user: u, answers: [waiting, done] });
  } else {
    script.push({ user: u, answers: [{ id: `a${t}`, role: 'assistant', parts: [{ type: 'step-start' }, text] }] });
  }
}
const finalChat = [];
for (const s of script) finalChat.push(s.user, s.answers.at(-1));
const rawBytes = finalChat.reduce((n, m) => n + Buffer.byteLength(JSON.stringify(m)), 0);

const tmp = mkdtempSync(join(tmpdir(), 'convo-ai-sdk-bench-'));

// ---- the two persistences: { load(), save(messages), reopen(), bytes(), close() } ----

let convo;
async function convoChat(file) {
  convo ??= await convoModules();
  const url = `sqlite:${file}`;
  let store = await convo.Store.open(url);
  return {
    load: () => convo.loadChat(store, 'chat'),
    save: (messages) => convo.saveChat(store, { chatId: 'chat', messages }),
    async reopen() {
      await store.close();
      store = await convo.Store.open(url);
    },
    close: () => store.close(),
  };
}

// The guide's file-based chat store, in one SQLite row per chat.
async function naiveChat(file) {
  let db;
  const open = () => {
    db = new Database(file);
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = NORMAL');
    db.exec('CREATE TABLE IF NOT EXISTS chats (id TEXT PRIMARY KEY, messages TEXT NOT NULL)');
    return { get: db.prepare('SELECT messages FROM chats WHERE id = ?'),
      put: db.prepare('INSERT INTO chats (id, messages) VALUES (?, ?) ON CONFLICT (id) DO UPDATE SET messages = excluded.messages') };
  };
  let q = open();
  return {
    load: async () => {
      const row = q.get.get('chat');
      return row ? JSON.parse(row.messages) : [];
    },
    save: async (messages) => { q.put.run('chat', JSON.stringify(messages)); },
    async reopen() {
      db.close();
      q = open();
    },
    close: async () => db.close(),
  };
}

async function loadMs(chat) {
  const ms = [];
  for (let i = 0; i < LOADS; i++) {
    const t0 = process.hrtime.bigint();
    await chat.load();
    ms.push(since(t0));
  }
  return median(ms);
}

async function runOne(name, make, round) {
  const file = join(tmp, `${name}-${round}.db`);
  const chat = await make(file);
  const perTurn = new Array(TURNS);
  const perSave = new Array(TURNS);
  const held = []; // --sends all: the client's copy of the chat
  const t0 = process.hrtime.bigint();
  for (let t = 0; t < TURNS; t++) {
    const s = script[t];
    const a = process.hrtime.bigint();
    const messages = [...SENDS_ALL ? held : await chat.load(), s.user];
    const saves = s.answers.map((answer) => [...messages, answer]); // what onEnd hands over
    const b = process.hrtime.bigint();
    for (const all of saves) await chat.save(all);
    const c = process.hrtime.bigint();
    perTurn[t] = Number(c - a) / 1e6;
    perSave[t] = Number(c - b) / 1e6;
    if (SENDS_ALL) held.push(s.user, s.answers.at(-1));
  }
  const seconds = since(t0) / 1000;
  const loaded = await chat.load();
  if (!isDeepStrictEqual(loaded, finalChat)) throw new Error(`${name}: the chat did not come back equal`);
  const loadHot = await loadMs(chat);
  await chat.reopen();
  const t1 = process.hrtime.bigint();
  const cold = await chat.load();
  const loadCold = since(t1);
  if (cold.length !== finalChat.length) throw new Error(`${name}: a new process read ${cold.length} messages`);
  await chat.close();
  const bytes = fileBytes(file);
  const rateAt = (end) => 1000 / median(perTurn.slice(end - WINDOW, end));
  const saveAt = (end) => median(perSave.slice(end - WINDOW, end));
  return { turnsPerSecond: TURNS / seconds, rateAt100: rateAt(EARLY), rateAtLast: rateAt(TURNS),
    saveMsAt100: saveAt(EARLY), saveMsAtLast: saveAt(TURNS),
    loadMs: loadHot, loadNewProcessMs: loadCold, bytes };
}

const runs = { 'convo saveChat/loadChat': convoChat, 'naive whole array in one row': naiveChat };
const results = Object.fromEntries(Object.keys(runs).map((k) => [k, []]));
for (let r = 0; r < ROUNDS; r++) {
  for (const name of inTurn(Object.keys(runs), r)) results[name].push(await runOne(name.split(' ')[0], runs[name], r));
}
if (!process.env.KEEP) rmSync(tmp, { recursive: true, force: true }); else console.log(tmp);

const summary = {};
for (const [name, rs] of Object.entries(results)) {
  const m = (k) => median(rs.map((x) => x[k]));
  summary[name] = { turnsPerSecond: m('turnsPerSecond'), rateAt100: m('rateAt100'), rateAtLast: m('rateAtLast'),
    saveMsAt100: m('saveMsAt100'), saveMsAtLast: m('saveMsAtLast'),
    loadMsAtLast: m('loadMs'), loadNewProcessMs: m('loadNewProcessMs'), bytes: m('bytes') };
}
if (opts.json) {
  console.log(JSON.stringify({ turns: TURNS, payload: PAYLOAD, toolEvery: TOOL_EVERY, rounds: ROUNDS, sends: opts.sends,
    messages: finalChat.length, rawBytes, summary }, null, 2));
} else {
  console.log(`${TURNS} turns (${finalChat.length} UIMessages, ${PAYLOAD}-byte texts, the client sends ` +
    `${SENDS_ALL ? 'the whole chat' : 'its last message'}, a tool call continued every ` +
    `${TOOL_EVERY || 'no'} turn(s)), raw ${rawBytes} bytes; medians of ${ROUNDS} round(s)`);
  for (const [name, s] of Object.entries(summary)) {
    console.log(`${name.padEnd(30)} ${s.turnsPerSecond.toFixed(0).padStart(6)} turns/s; at turn ${EARLY} ` +
      `${s.rateAt100.toFixed(0)}/s, at ${TURNS} ${s.rateAtLast.toFixed(0)}/s (${(s.rateAtLast / s.rateAt100).toFixed(2)}); ` +
      `the turn's saves ${s.saveMsAt100.toFixed(3)} ms at ${EARLY}, ${s.saveMsAtLast.toFixed(3)} ms at ${TURNS}; ` +
      `loadChat at ${TURNS}: ${s.loadMsAtLast.toFixed(2)} ms, new process ${s.loadNewProcessMs.toFixed(2)} ms; ` +
      `${s.bytes} bytes (${(s.bytes / rawBytes).toFixed(2)}x raw)`);
  }
}
