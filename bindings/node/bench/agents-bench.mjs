// The 1,000-turn OpenAI Agents SDK chat on convo's ConvoSession (convo/openai-agents) and on
// the SDK's own MemorySession (it has no other local store); convo-sqlite-copies: ConvoSession
// with mutableItems (getItems() copies every item at every call instead of handing out the
// frozen ones it keeps). A turn is the SDK's Runner
// running an agent on a scripted model (no network) with the session: the Runner reads the
// whole history (getItems()), then adds the turn's items in one addItems; every 10th turn
// the model calls a tool first (4 items: user, function_call, function_call_result,
// assistant; else 2). Then the same conversation again without the Runner ("session" mode:
// per turn exactly the session calls the Runner made, getItems() and addItems), which is the
// session's own cost, and "tail" mode: getItems(20) and addItems, a bounded read per turn.
// Reports turns/s, the turn rate at turn 100 and at the last turn (from the median of the 50
// turns ending there), getItems() at the end (the session that ran the turns; a new
// process: a new Store on the same URL; medians of 30), getItems(20) in a new process,
// bytes stored (Store.bytes(); SQLite: the file and its WAL) next to the items' JSON bytes.
// Every session must give the conversation back whole. The sessions run one after the other
// in ROUNDS rounds (3 by default, the order turned each round); each figure is the median
// over the rounds. A bench, not a test.
//
//   node --expose-gc agents-bench.mjs [--turns N] [--payload BYTES] [--rounds R] [--only NAME,...]
//                                     [--modes runner,session,tail] [--json]
//
// Redis and PostgreSQL come from CONVO_BENCH_{REDIS,POSTGRES}_URL or CONVO_TEST_{...}_URL
// (skipped, with a note, when unset); each run has a prefix or schema of its own. SQLite
// files go to a temporary folder. libconvo: CONVO_LIBRARY or the build tree.
import { isDeepStrictEqual } from 'node:util';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { Runner, MemorySession, setTracingDisabled } from '@openai/agents';
import { conversation, scriptedAgent, turnItems, timedSession } from './agents-common.mjs';
import { benchOptions, convoImports, median, rate, rateAt as rateIn, since, withParam, fileBytes,
  runnable, inTurn } from './common.mjs';

setTracingDisabled(true);

const { opts, TURNS, PAYLOAD, ROUNDS, WINDOW, EARLY } = benchOptions('agents-bench', {
  only: { type: 'string' },
  modes: { type: 'string', default: 'runner,session,tail' },
});
const GETS = 30;

// convo and convo/openai-agents of the package this folder sits in (bindings/node).
async function convoModules() {
  const [{ Store }, { ConvoSession }] = await convoImports('.', './openai-agents');
  return { Store, ConvoSession };
}

const tmp = mkdtempSync(join(tmpdir(), 'convo-agents-bench-'));
const redisUrl = process.env.CONVO_BENCH_REDIS_URL ?? process.env.CONVO_TEST_REDIS_URL;
const postgresUrl = process.env.CONVO_BENCH_POSTGRES_URL ?? process.env.CONVO_TEST_POSTGRES_URL;
const tag = `agb${process.pid}`;

// The conversation, the same for every session: what the user says and the model answers.
const talk = conversation(TURNS, PAYLOAD);
const { said } = talk;

let convo;
let round = 0;
async function convoSession(spec, url) {
  convo ??= await convoModules();
  const mutableItems = spec.mutableItems === true;
  spec.url = url;
  spec.store = await convo.Store.open(url);
  spec.restart = url === 'memory:' ? null : async () => {
    const store = await convo.Store.open(url);
    return { session: new convo.ConvoSession({ store, sessionId: 'chat', mutableItems }), close: () => store.close() };
  };
  return new convo.ConvoSession({ store: spec.store, sessionId: 'chat', mutableItems });
}

const SESSIONS = [
  {
    name: 'agents-memory', backend: 'memory',
    async open() {
      this.restart = null;
      return new MemorySession({ sessionId: 'chat' });
    },
    async close() {},
    async size() { return null; },
  },
  {
    name: 'convo-memory', backend: 'memory',
    async open() { return convoSession(this, 'memory:'); },
    async close() { await this.store.close(); },
    async size() { return this.store.bytes(); },
  },
  {
    name: 'convo-sqlite', backend: 'sqlite',
    async open() {
      this.path = join(tmp, `convo-${randomUUID()}.db`);
      return convoSession(this, `sqlite:${this.path}`);
    },
    async close() { await this.store.close(); },
    async size() { return fileBytes(this.path); },
    sizeAfterClose: true,
  },
  {
    // getItems() handing out a deep copy of every item at every call (mutableItems)
    name: 'convo-sqlite-copies', backend: 'sqlite', mutableItems: true,
    async open() {
      this.path = join(tmp, `convo-${randomUUID()}.db`);
      return convoSession(this, `sqlite:${this.path}`);
    },
    async close() { await this.store.close(); },
    async size() { return fileBytes(this.path); },
    sizeAfterClose: true,
  },
  {
    name: 'convo-redis', backend: 'redis', needs: () => redisUrl,
    async open() { return convoSession(this, withParam(redisUrl, 'prefix', `${tag}r${round}${this.mode}`)); },
    async close() {
      await this.store.delete('chat');
      await this.store.close();
    },
    async size() { return this.store.bytes(); },
  },
  {
    name: 'convo-postgres', backend: 'postgres', needs: () => postgresUrl,
    async open() { return convoSession(this, withParam(postgresUrl, 'schema', `${tag}p${round}${this.mode}`)); },
    async close() {
      await this.store.delete('chat');
      await this.store.close();
    },
    async size() { return this.store.bytes(); },
  },
];

const rateAt = (ms, turn) => rateIn(ms, turn, WINDOW);
const msAt = (ms, turn) => median(ms.slice(turn - WINDOW, turn));
// a rate to 3 significant digits (the Runner's late turns are a few a second)
const r3 = (x) => (x >= 100 ? Math.round(x) : +x.toPrecision(3));

async function timed(n, make, call) {
  const ms = [];
  let got;
  for (let i = 0; i < n; i++) {
    const made = await make();
    const start = process.hrtime.bigint();
    got = await call(made.session);
    ms.push(since(start));
    await made.close?.();
  }
  return { ms, got };
}

// runner mode: the Runner (and the time spent in the session's own methods per turn); session
// mode: per turn the calls the Runner made in runner mode; tail mode: the same with getItems(20)
async function play(spec, session, mode, script) {
  const turnMs = [];
  const sessionMs = [];
  const spent = { ms: 0, calls: {} };
  const runner = new Runner();
  const agent = scriptedAgent(talk);
  const seen = mode === 'runner' ? timedSession(session, spent) : session;
  for (let t = 0; t < TURNS; t++) {
    spent.ms = 0;
    const start = process.hrtime.bigint();
    if (mode === 'runner') {
      await runner.run(agent, said[t], { session: seen });
    } else {
      await session.getItems(mode === 'tail' ? 20 : undefined);
      await session.addItems(structuredClone(script[t]));
    }
    turnMs.push(since(start));
    sessionMs.push(spent.ms);
  }
  return { turnMs, sessionMs: mode === 'runner' ? sessionMs : null, calls: spent.calls };
}

async function runOne(spec, mode, script) {
  globalThis.gc?.();
  spec.mode = mode[0];
  const session = await spec.open();
  let warm, cold = null, tail = null, stored, items;
  let turnMs, sessionMs, calls;
  try {
    ({ turnMs, sessionMs, calls } = await play(spec, session, mode, script));
    warm = await timed(GETS, () => ({ session }), (s) => s.getItems());
    items = warm.got;
    if (spec.restart) {
      cold = await timed(GETS, spec.restart, (s) => s.getItems());
      tail = await timed(GETS, spec.restart, (s) => s.getItems(20));
      if (!isDeepStrictEqual(cold.got, items) || !isDeepStrictEqual(tail.got, items.slice(-20))) {
        throw new Error(`${spec.name}: a new process read another conversation`);
      }
    }
    if (!spec.sizeAfterClose) stored = await spec.size();
  } finally {
    await spec.close();
  }
  if (spec.sizeAfterClose) stored = await spec.size();
  return { turnMs, sessionMs, calls, warmMs: warm.ms, coldMs: cold?.ms ?? null, tailMs: tail?.ms ?? null,
    stored, items };
}

function summarize(spec, mode, rounds, rawBytes) {
  const m = (f) => median(rounds.map(f));
  const orNull = (k, f) => (rounds[0][k] === null ? null : f());
  return {
    session: spec.name, backend: spec.backend, mode, turns: TURNS, items: rounds[0].items.length, payload: PAYLOAD,
    rounds: rounds.length,
    turns_per_sec: r3(m((r) => rate(r.turnMs))),
    [`turns_per_sec_at_turn_${EARLY}`]: r3(m((r) => rateAt(r.turnMs, EARLY))),
    [`turns_per_sec_at_turn_${TURNS}`]: r3(m((r) => rateAt(r.turnMs, TURNS))),
    late_vs_early: +m((r) => rateAt(r.turnMs, TURNS) / rateAt(r.turnMs, EARLY)).toFixed(3),
    // runner mode: ms of a turn and ms spent in the session's methods in that turn, at turn
    // EARLY and the last (medians of the WINDOW turns ending there), and last / early
    ...(rounds[0].sessionMs && {
      [`runner_turn_ms_at_turn_${EARLY}`]: +m((r) => msAt(r.turnMs, EARLY)).toFixed(3),
      [`runner_turn_ms_at_turn_${TURNS}`]: +m((r) => msAt(r.turnMs, TURNS)).toFixed(3),
      [`session_ms_at_turn_${EARLY}`]: +m((r) => msAt(r.sessionMs, EARLY)).toFixed(3),
      [`session_ms_at_turn_${TURNS}`]: +m((r) => msAt(r.sessionMs, TURNS)).toFixed(3),
      session_late_vs_early: +m((r) => msAt(r.sessionMs, TURNS) / msAt(r.sessionMs, EARLY)).toFixed(3),
      session_calls_per_turn: Object.entries(rounds[0].calls)
        .map(([k, n]) => `${k}:${+(n / TURNS).toFixed(2)}`).join(' '),
    }),
    get_items_ms: +m((r) => median(r.warmMs)).toFixed(3),
    new_process_get_items_ms: orNull('coldMs', () => +m((r) => median(r.coldMs)).toFixed(3)),
    new_process_get_items_20_ms: orNull('tailMs', () => +m((r) => median(r.tailMs)).toFixed(3)),
    stored_bytes: orNull('stored', () => m((r) => r.stored)),
    item_json_bytes: rawBytes,
    stored_per_raw: orNull('stored', () => +(m((r) => r.stored) / rawBytes).toFixed(2)),
  };
}

const specs = runnable('agents-bench', SESSIONS, opts.only);

// The items of each turn: the script of session and tail modes, and the conversation every
// session must give back.
function script() {
  const turns = turnItems(talk, TURNS);
  return { script: turns, items: turns.flat() };
}

const results = [];
try {
  const reference = script();
  const rawBytes = reference.items.reduce((n, i) => n + Buffer.byteLength(JSON.stringify(i)), 0);
  const modes = opts.modes.split(',');
  if (modes.some((m) => !['runner', 'session', 'tail'].includes(m))) throw new Error(`--modes: ${opts.modes}`);
  for (const mode of modes) {
    const per = new Map(specs.map((spec) => [spec, []]));
    for (round = 0; round < ROUNDS; round++) {
      for (const spec of inTurn(specs, round)) {
        console.error(`agents-bench: ${mode} round ${round + 1}/${ROUNDS}: ${spec.name}, ${TURNS} turns...`);
        const r = await runOne(spec, mode, reference.script);
        if (!isDeepStrictEqual(r.items, reference.items)) throw new Error(`${spec.name}: not the conversation`);
        per.get(spec).push(r);
      }
    }
    for (const spec of specs) results.push(summarize(spec, mode, per.get(spec), rawBytes));
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}

if (opts.json) {
  console.log(JSON.stringify(results, null, 2));
} else {
  const cols = Object.keys(results[0]).filter((k) => !['turns', 'payload', 'rounds'].includes(k));
  console.log(`${TURNS} turns, ${PAYLOAD}-byte texts, median of ${ROUNDS} rounds`);
  console.log(cols.join('\t'));
  for (const r of results) console.log(cols.map((k) => r[k] ?? '-').join('\t'));
}
