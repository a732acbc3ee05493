// The chatbot of issue 24 through LangGraph's real runtime: a StateGraph whose one node
// answers each user message with a 200-byte AIMessage, graph.invoke per turn on one
// thread, with `messages` as MessagesAnnotation (the whole list in each checkpoint) and as
// MessagesDeltaValue (LangGraph's DeltaChannel), on LangGraph's SqliteSaver and
// PostgresSaver and on convo's ConvoSaver over SQLite and PostgreSQL, in one run.
// Reported per run: turns/s, the time spent inside the saver per turn at turn 100 and at
// the last turn (wall, and the process's CPU time during it), the turn's CPU time, getTuple
// and getState ms at turn --full-turns and at the last turn (warm, and from a fresh saver on
// the same store), bytes per table and bytes / raw message content. A bench, not a test: it asserts no timing, but every run must give the
// conversation back whole.
//
//   node --expose-gc langgraph-runtime.mjs [--turns 1000] [--full-turns 300] [--payload 200]
//        [--rounds 1] [--only convo-sqlite-full,langgraph-sqlite-delta,...] [--keep DIR] [--json]
//        [--interleave] [--durability async|sync|exit] [--profile]
//
// --profile also splits the process's CPU per turn by thread (thread-cpu.mjs: the main thread,
// libuv's pool where libconvo runs, V8's workers) and gives the saver's work alone: the main
// thread's samples in the saver's own frames inside its windows plus the pool's CPU in the turn
// (libconvo's calls are the only pool work of a convo run) — LangGraph's and V8's out.
//
// --interleave: the early figures come from a second thread of the same saver whose turns
// alternate with the last window of the main thread (both threads brought there first,
// untimed), so the early and the last turns are timed in the same minutes: on a shared
// machine the load moves between turn 100 and turn 1,000 of one thread.
//
// LangGraph's savers run the full list to --full-turns only (each checkpoint holds the
// whole list: they grow with the square). PostgreSQL: CONVO_BENCH_POSTGRES_URL or
// CONVO_TEST_POSTGRES_URL (skipped with a note when neither is set), a schema per run,
// dropped at the end; SQLite: files in a temporary folder, sized with the sqlite3 CLI's
// dbstat. libconvo: CONVO_LIBRARY or the build tree.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomUUID } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import pg from 'pg';
import * as langgraph from '@langchain/langgraph';
import { HumanMessage, AIMessage } from '@langchain/core/messages';
import { SqliteSaver } from '@langchain/langgraph-checkpoint-sqlite';
import { PostgresSaver } from '@langchain/langgraph-checkpoint-postgres';
import { Session } from 'node:inspector/promises';
import { benchOptions, words, convoImports, median, since, withParam, runnable } from './common.mjs';
import { samplesOf, insideWindows, nowUs, METHODS } from './profile-windows.mjs';
import { ReferenceSaver } from './reference-saver.mjs';
import * as threadCpu from './thread-cpu.mjs';

const { StateGraph, MessagesAnnotation, START, END } = langgraph;
const { opts, TURNS, PAYLOAD, WINDOW, EARLY } = benchOptions('langgraph-runtime', {
  only: { type: 'string' },
  'full-turns': { type: 'string', default: '300' },
  rounds: { type: 'string', default: '1' },
  keep: { type: 'string' }, // a folder for the SQLite files; they and the PostgreSQL schemas are kept
  interleave: { type: 'boolean', default: false },
  durability: { type: 'string', default: 'async' },
  profile: { type: 'boolean', default: false },
});
// --profile: V8's CPU profiler runs through each convo run, and the saver's own CPU per turn
// is its CPU in its windows less the LangGraph and LangChain work the profiler saw in them
// outside the saver's calls (profile-windows.mjs): LangGraph's own growth taken out
const PROFILE = opts.profile;
const PROFILE_US = 200; // the sampling interval
// LangGraph's durability: 'async' (its default: the next step runs while a put is under way,
// so its work lands inside the saver's timed windows) or 'sync' (each step waits for its
// put: the windows hold the saver's own work)
const DURABILITY = opts.durability;
if (!['async', 'sync', 'exit'].includes(DURABILITY)) {
  console.error('langgraph-runtime: --durability is async, sync or exit');
  process.exit(2);
}
const INTERLEAVE = opts.interleave;
const ROUNDS = Number(opts.rounds);
const FULL_TURNS = Math.min(TURNS, Number(opts['full-turns']));
if (!(FULL_TURNS >= 4)) {
  console.error('langgraph-runtime: --full-turns must be >= 4');
  process.exit(2);
}
const PROBES = [...new Set([FULL_TURNS, TURNS])]; // the turns getTuple/getState are timed at
const WARM = 7; // warm calls per probe (median)
const FRESH = 3; // fresh savers per probe (median of their first calls)

const tmp = opts.keep ?? mkdtempSync(join(tmpdir(), 'convo-lg-runtime-'));
const pgUrl = process.env.CONVO_BENCH_POSTGRES_URL ?? process.env.CONVO_TEST_POSTGRES_URL;
const tag = `r${process.pid}`;

// ---- the conversation: a user message and the model's answer per turn ----

const turns = [];
for (let t = 0; t < TURNS; t++) {
  turns.push({ human: { id: `h${t}`, content: words(PAYLOAD) }, ai: { id: `a${t}`, content: words(PAYLOAD) } });
}
const answerTo = new Map(turns.map((t) => [t.human.id, t.ai]));
const rawBytes = (n) => turns.slice(0, n).reduce((s, t) =>
  s + Buffer.byteLength(t.human.content) + Buffer.byteLength(t.ai.content), 0);

// The state kinds: `full` always; `delta` when the installed @langchain/langgraph has it.
const KINDS = { full: MessagesAnnotation };
if (langgraph.MessagesDeltaValue && langgraph.StateSchema) {
  KINDS.delta = new langgraph.StateSchema({ messages: langgraph.MessagesDeltaValue });
} else {
  console.error('langgraph-runtime: this @langchain/langgraph has no MessagesDeltaValue: delta runs skipped');
}

function chatbot(kind, checkpointer) {
  return new StateGraph(KINDS[kind])
    .addNode('model', (state) => {
      const last = state.messages[state.messages.length - 1];
      return { messages: [new AIMessage(answerTo.get(last.id))] };
    })
    .addEdge(START, 'model')
    .addEdge('model', END)
    .compile({ checkpointer });
}

// ---- time inside the saver: the union of the intervals when one of its calls is under
// way (LangGraph's calls overlap with async durability, and getDeltaChannelHistory calls
// getTuple), and the calls per method ----

const SAVER_METHODS = ['put', 'putWrites', 'getTuple', 'list', 'getDeltaChannelHistory'];
const cpuMs = (since_) => { const d = process.cpuUsage(since_); return (d.user + d.system) / 1000; };
function instrument(saver) {
  // cpuMs: the process's CPU time (its threads: libconvo's calls run on libuv's pool) during
  // those intervals, which a loaded machine stretches less than their wall time
  const meter = { ms: 0, cpuMs: 0, calls: {}, byMethod: {}, active: 0, start: 0n, cpuStart: null,
    windows: [], startUs: 0, // windows: the current turn's [from, to] us (--profile)
    durations: {} }; // per method, each call's wall ms (a call on the main thread holds the loop so long)
  for (const name of SAVER_METHODS) {
    const original = saver[name];
    if (typeof original !== 'function') continue;
    // also each method's own calls end to end (inclusive: nested and overlapping calls
    // each count), to tell the turn's reads from its writes
    const enter = () => {
      meter.calls[name] = (meter.calls[name] ?? 0) + 1;
      if (meter.active++ === 0) {
        meter.start = process.hrtime.bigint();
        meter.cpuStart = process.cpuUsage();
        meter.startUs = nowUs();
      }
      return process.hrtime.bigint();
    };
    const leave = (start) => {
      const ms = since(start);
      meter.byMethod[name] = (meter.byMethod[name] ?? 0) + ms;
      (meter.durations[name] ??= []).push(ms);
      if (--meter.active === 0) {
        meter.ms += since(meter.start);
        meter.cpuMs += cpuMs(meter.cpuStart);
        meter.windows.push([meter.startUs, nowUs()]);
      }
    };
    if (name === 'list') { // an async generator: under way until it is done
      saver[name] = async function* (...args) {
        const start = enter();
        try { yield* original.apply(this, args); } finally { leave(start); }
      };
    } else {
      saver[name] = async function (...args) {
        const start = enter();
        try { return await original.apply(this, args); } finally { leave(start); }
      };
    }
  }
  return meter;
}

// ---- sizes per table ----

function sqlite3(path, sql) {
  return execFileSync('sqlite3', ['-json', path, sql], { encoding: 'utf8' });
}
// bytes per table (its indexes included) from dbstat; page_count when the CLI has no dbstat
function sqliteTables(path) {
  sqlite3(path, 'PRAGMA wal_checkpoint(TRUNCATE)');
  try {
    const rows = JSON.parse(sqlite3(path,
      `SELECT coalesce(s.tbl_name, d.name) AS tbl, sum(d.pgsize) AS bytes
         FROM dbstat d LEFT JOIN sqlite_schema s ON s.name = d.name GROUP BY tbl`) || '[]');
    return Object.fromEntries(rows.map((r) => [r.tbl, Number(r.bytes)]));
  } catch {
    const n = (p) => Number(Object.values(JSON.parse(sqlite3(path, `PRAGMA ${p}`))[0])[0]);
    return { '(file, no dbstat)': (n('page_count') - n('freelist_count')) * n('page_size') };
  }
}

async function pgQuery(sql, params) {
  const client = new pg.Client({ connectionString: pgUrl });
  await client.connect();
  try {
    return (await client.query(sql, params)).rows;
  } finally {
    await client.end();
  }
}
async function pgTables(schema) {
  const rows = await pgQuery(
    `SELECT c.relname AS tbl, pg_total_relation_size(c.oid)::bigint AS bytes
       FROM pg_class c JOIN pg_namespace s ON s.oid = c.relnamespace
      WHERE s.nspname = $1 AND c.relkind IN ('r', 'p', 'm')`, [schema]);
  return Object.fromEntries(rows.map((r) => [r.tbl, Number(r.bytes)]));
}
const pgDrop = (schema) => pgQuery(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);

// ---- the savers: open on a store (a fresh saver on the same store for `again`) ----

let ConvoSaver;
async function convoSaver(url) {
  ConvoSaver ??= (await convoImports('./langgraph'))[0].ConvoSaver;
  const saver = new ConvoSaver(url);
  await saver.store(); // opened (schema created) before any figure is taken
  return saver;
}

const BACKENDS = {
  'convo-sqlite': {
    backend: 'sqlite', log: ['convo_messages'],
    create() { this.path = join(tmp, `convo-${randomUUID()}.db`); },
    open() { return convoSaver(`sqlite:${this.path}`); },
    close: (saver) => saver.close(),
    tables() { return sqliteTables(this.path); },
  },
  'langgraph-sqlite': {
    backend: 'sqlite', log: [],
    create() { this.path = join(tmp, `langgraph-${randomUUID()}.db`); },
    async open() {
      const saver = SqliteSaver.fromConnString(this.path);
      saver.setup(); // WAL; synchronous=NORMAL as convo's SQLite driver
      saver.db.pragma('synchronous=NORMAL');
      return saver;
    },
    close: (saver) => saver.db.close(),
    tables() { return sqliteTables(this.path); },
  },
  'convo-postgres': {
    backend: 'postgres', log: ['messages'], needs: () => pgUrl,
    create() { this.schema = `${tag}_convo_${randomUUID().slice(0, 8)}`; },
    open() { return convoSaver(withParam(pgUrl, 'schema', this.schema)); },
    close: (saver) => saver.close(),
    tables() { return pgTables(this.schema); },
    drop() { return pgDrop(this.schema); },
  },
  'langgraph-postgres': {
    backend: 'postgres', log: [], needs: () => pgUrl,
    create() { this.schema = `${tag}_langgraph_${randomUUID().slice(0, 8)}`; },
    async open() {
      const saver = PostgresSaver.fromConnString(pgUrl, { schema: this.schema });
      await saver.setup();
      await saver.pool.query('SELECT 1'); // connected before any figure is taken
      return saver;
    },
    close: (saver) => saver.end(),
    tables() { return pgTables(this.schema); },
    drop() { return pgDrop(this.schema); },
  },
};

BACKENDS['reference-memory'] = { // the control above: one saver per run (its memory is the store)
  backend: 'memory', log: [],
  create() { this.instance = new ReferenceSaver(); },
  async open() { return this.instance; },
  async close() {},
  async tables() { return {}; },
};

const RUNS = [];
for (const name of ['langgraph-sqlite', 'langgraph-postgres', 'convo-sqlite', 'convo-postgres', 'reference-memory']) {
  for (const kind of Object.keys(KINDS)) {
    const store = BACKENDS[name];
    RUNS.push({ ...store, name: `${name}-${kind}`, saver: name, kind,
      turns: name.startsWith('langgraph') && kind === 'full' ? FULL_TURNS : TURNS });
  }
}

// ---- one run ----

const threadConfig = { configurable: { thread_id: 'chat' } };
const earlyConfig = { configurable: { thread_id: 'chat-early' } }; // --interleave
const invokeConfig = (config) => ({ ...config, durability: DURABILITY });

// getTuple and getState on the thread's latest checkpoint: warm on the run's saver, then
// the first call of each on FRESH new savers of the same store.
async function probe(run, saver, graph, turn) {
  const time = async (f) => { const s = process.hrtime.bigint(); await f(); return since(s); };
  const warmTuple = [];
  const warmState = [];
  for (let i = 0; i < WARM; i++) {
    warmTuple.push(await time(() => saver.getTuple(threadConfig)));
    warmState.push(await time(() => graph.getState(threadConfig)));
  }
  const freshTuple = [];
  const freshState = [];
  for (let i = 0; i < FRESH; i++) {
    for (const [f, out] of [[(s) => s.getTuple(threadConfig), freshTuple],
      [(s) => chatbot(run.kind, s).getState(threadConfig), freshState]]) {
      const other = await run.open();
      try { out.push(await time(() => f(other))); } finally { await run.close(other); }
    }
  }
  const state = await graph.getState(threadConfig);
  check(run, state.values.messages, turn);
  return { turn, get_tuple_ms: median(warmTuple), get_state_ms: median(warmState),
    fresh_get_tuple_ms: median(freshTuple), fresh_get_state_ms: median(freshState) };
}

function check(run, messages, turn) {
  const whole = messages?.length === 2 * turn && turns.slice(0, turn).every((t, i) =>
    messages[2 * i].id === t.human.id && messages[2 * i].content === t.human.content &&
    messages[2 * i + 1].id === t.ai.id && messages[2 * i + 1].content === t.ai.content &&
    messages[2 * i].getType() === 'human' && messages[2 * i + 1].getType() === 'ai');
  if (!whole) throw new Error(`${run.name}: the state at turn ${turn} is not the ${2 * turn} messages sent`);
}

async function runOne(run) {
  globalThis.gc?.(); // node --expose-gc: the previous run's garbage is not this one's
  run.create();
  let saver = await run.open();
  const empty = await run.tables();
  const meter = instrument(saver);
  const graph = chatbot(run.kind, saver);
  const main = series();
  const early = series();
  const probes = [];
  const begin = process.hrtime.bigint();
  // one turn of thread `config`, its figures into `into`
  const turn = async (t, config, into) => {
    const before = meter.ms;
    const beforeCpu = meter.cpuMs;
    const cpuStart = process.cpuUsage();
    const calls = { ...meter.calls };
    const byMethod = { ...meter.byMethod };
    meter.windows = [];
    const threads = PROFILE ? threadCpu.snapshot() : null;
    const start = process.hrtime.bigint();
    await graph.invoke({ messages: [new HumanMessage(turns[t].human)] }, invokeConfig(config));
    into.turnMs.push(since(start));
    if (threads) into.threadCpu.push(threadCpu.since(threads));
    into.turnCpu.push(cpuMs(cpuStart));
    into.saverMs.push(meter.ms - before);
    into.saverCpu.push(meter.cpuMs - beforeCpu);
    into.methodMs.push(Object.fromEntries(Object.entries(meter.byMethod).map(([k, ms]) => [k, ms - (byMethod[k] ?? 0)])));
    into.windows.push(meter.windows);
    into.lastCalls = Object.fromEntries(Object.entries(meter.calls).map(([k, n]) => [k, n - (calls[k] ?? 0)]));
  };
  const early0 = Math.min(EARLY, run.turns) - WINDOW; // --interleave: early turns before the timed ones
  const session = PROFILE && run.saver.startsWith('convo') ? new Session() : null;
  if (session) {
    session.connect();
    await session.post('Profiler.enable');
    await session.post('Profiler.setSamplingInterval', { interval: PROFILE_US });
    await session.post('Profiler.start');
  }
  try {
    for (let t = 0; t < run.turns; t++) {
      if (INTERLEAVE && t === run.turns - WINDOW) {
        for (let e = 0; e < early0; e++) await turn(e, earlyConfig, series());
      }
      if (INTERLEAVE && t >= run.turns - WINDOW) await turn(early0 + t - (run.turns - WINDOW), earlyConfig, early);
      await turn(t, threadConfig, main);
      if (PROBES.includes(t + 1)) probes.push(await probe(run, saver, graph, t + 1));
      if ((t + 1) % 100 === 0) console.error(`langgraph-runtime: ${run.name}: turn ${t + 1}, ${since(begin) / 1000 | 0} s`);
    }
  } finally {
    if (session) {
      const { profile } = await session.post('Profiler.stop');
      session.disconnect();
      const samples = samplesOf(profile, PROFILE_US);
      for (const s of [main, early]) {
        s.overlapMs = s.windows.map((w) => insideWindows(samples, w).framework);
        s.ownCpu = s.saverCpu.map((c, i) => c - s.overlapMs[i]);
        const inside = s.windows.map((w) => insideWindows(samples, w));
        s.saverMainMs = inside.map((x) => x.saver);
        s.saverMethodMs = inside.map((x) => x.byMethod);
      }
    }
    await run.close(saver);
  }
  saver = null;
  const tables = await run.tables();
  const { lastCalls, windows: _w, ...figures } = main;
  if (early) delete early.windows;
  return { ...figures, early: INTERLEAVE ? early : null, probes, lastCalls, empty, tables,
    checkpoints: meter.calls.put ?? 0,
    callMs: Object.fromEntries(Object.entries(meter.durations).map(([k, xs]) => {
      const sorted = xs.sort((a, b) => a - b);
      return [k, { p50: sorted[Math.floor(0.5 * sorted.length)], p99: sorted[Math.floor(0.99 * sorted.length)],
        max: sorted.at(-1) }];
    })) };
}

// per turn: wall and CPU ms of the turn and of the saver within it, ms by method
function series() {
  return { turnMs: [], saverMs: [], turnCpu: [], saverCpu: [], methodMs: [], lastCalls: null, windows: [],
    overlapMs: null, ownCpu: null, saverMainMs: null, saverMethodMs: null, threadCpu: [] };
}

// ---- figures ----

const sum = (o) => Object.values(o).reduce((a, b) => a + b, 0);
const growth = (r, names) => names.reduce((n, t) => n + (r.tables[t] ?? 0) - (r.empty[t] ?? 0), 0);

// per method, ms per turn around a turn (median of the window, then over the rounds)
function methodsAt(rounds, turn, m, at) {
  const names = Object.keys(rounds[0].methodMs.at(-1));
  return Object.fromEntries(names.map((k) =>
    [k, +m((r) => at(r, 'methodMs', turn, (x) => x[k] ?? 0)).toFixed(3)]));
}

function summarize(run, rounds) {
  const m = (f) => median(rounds.map(f));
  // the median of figure `key` over the window of turns ending at `turn` (the early turns
  // of the interleaved thread, with --interleave: its last WINDOW turns end at the early turn)
  const at = (r, key, turn, f = (x) => x) => {
    const xs = (turn < run.turns && r.early ? r.early[key] : r[key].slice(Math.max(0, turn - WINDOW), turn));
    return median(xs.map(f));
  };
  const meanAt = (r, key, turn, f = (x) => x) => {
    const xs = (turn < run.turns && r.early ? r.early[key] : r[key].slice(Math.max(0, turn - WINDOW), turn));
    return xs.reduce((a, x) => a + f(x), 0) / xs.length;
  };
  // the bytes of both threads with --interleave (the second one ends at the early turn)
  const raw = rawBytes(run.turns) + (INTERLEAVE && EARLY < run.turns ? rawBytes(EARLY) : 0);
  const r0 = rounds[0];
  const stored = m((r) => sum(r.tables) - sum(r.empty));
  const outside = m((r) => growth(r, Object.keys(r.tables).filter((t) => !run.log.includes(t))));
  const probeAt = (turn, key) => m((r) => r.probes.find((p) => p.turn === turn)?.[key] ?? NaN);
  const early = Math.min(EARLY, run.turns);
  const out = {
    run: run.name, saver: run.saver, backend: run.backend, kind: run.kind, turns: run.turns,
    payload: PAYLOAD, rounds: rounds.length, interleaved: INTERLEAVE, durability: DURABILITY,
    turns_per_sec: +m((r) => (r.turnMs.length * 1000) / r.turnMs.reduce((a, b) => a + b, 0)).toFixed(1),
    early_turn: early,
    saver_ms_early: +m((r) => at(r, 'saverMs', early)).toFixed(3),
    saver_ms_last: +m((r) => at(r, 'saverMs', run.turns)).toFixed(3),
    turn_ms_early: +m((r) => at(r, 'turnMs', early)).toFixed(3),
    turn_ms_last: +m((r) => at(r, 'turnMs', run.turns)).toFixed(3),
    late_vs_early: +m((r) => at(r, 'saverMs', run.turns) / at(r, 'saverMs', early)).toFixed(3),
    saver_cpu_ms_early: +m((r) => at(r, 'saverCpu', early)).toFixed(3),
    saver_cpu_ms_last: +m((r) => at(r, 'saverCpu', run.turns)).toFixed(3),
    cpu_late_vs_early: +m((r) => at(r, 'saverCpu', run.turns) / at(r, 'saverCpu', early)).toFixed(3),
    ...(rounds[0].ownCpu ? {
      overlap_ms_early: +m((r) => at(r, 'overlapMs', early)).toFixed(3),
      overlap_ms_last: +m((r) => at(r, 'overlapMs', run.turns)).toFixed(3),
      saver_own_cpu_ms_early: +m((r) => at(r, 'ownCpu', early)).toFixed(3),
      saver_own_cpu_ms_last: +m((r) => at(r, 'ownCpu', run.turns)).toFixed(3),
      own_cpu_late_vs_early: +m((r) => at(r, 'ownCpu', run.turns) / at(r, 'ownCpu', early)).toFixed(3),
      // thread CPU comes in clock ticks (10 ms): means over the window, not medians
      ...(rounds[0].threadCpu.length ? (() => {
        const byThread = (turn) => Object.fromEntries(['main', 'pool', 'v8'].map((k) =>
          [k, +m((r) => meanAt(r, 'threadCpu', turn, (x) => x[k])).toFixed(3)]));
        const saverOnly = (turn) => m((r) => meanAt(r, 'saverMainMs', turn) + meanAt(r, 'threadCpu', turn, (x) => x.pool));
        const byMethod = (turn) => Object.fromEntries(METHODS.map((k) =>
          [k, +m((r) => meanAt(r, 'saverMethodMs', turn, (x) => x[k])).toFixed(3)]).filter(([, v]) => v > 0));
        return { cpu_by_thread_early: byThread(early), cpu_by_thread_last: byThread(run.turns),
          saver_main_ms_by_method_early: byMethod(early), saver_main_ms_by_method_last: byMethod(run.turns),
          saver_only_cpu_ms_early: +saverOnly(early).toFixed(3), saver_only_cpu_ms_last: +saverOnly(run.turns).toFixed(3),
          saver_only_late_vs_early: +(saverOnly(run.turns) / saverOnly(early)).toFixed(3) };
      })() : {}),
    } : {}),
    turn_cpu_ms_early: +m((r) => at(r, 'turnCpu', early)).toFixed(3),
    turn_cpu_ms_last: +m((r) => at(r, 'turnCpu', run.turns)).toFixed(3),
    calls_per_turn: r0.lastCalls,
    method_ms_early: methodsAt(rounds, early, m, at),
    method_ms_last: methodsAt(rounds, run.turns, m, at),
    probes: PROBES.filter((p) => p <= run.turns).map((turn) => ({
      turn,
      get_tuple_ms: +probeAt(turn, 'get_tuple_ms').toFixed(2),
      get_state_ms: +probeAt(turn, 'get_state_ms').toFixed(2),
      fresh_get_tuple_ms: +probeAt(turn, 'fresh_get_tuple_ms').toFixed(2),
      fresh_get_state_ms: +probeAt(turn, 'fresh_get_state_ms').toFixed(2),
    })),
    checkpoints: r0.checkpoints,
    // the whole run (probes included): each method's calls, wall ms p50 / p99 / max
    call_ms: Object.fromEntries(Object.keys(r0.callMs).map((k) => [k, Object.fromEntries(['p50', 'p99', 'max']
      .map((q) => [q, +m((r) => r.callMs[k][q]).toFixed(2)]))])),
    tables: Object.fromEntries(Object.entries(r0.tables).sort((a, b) => b[1] - a[1])),
    stored_bytes: stored,
    raw_content_bytes: raw,
    stored_per_raw: +(stored / raw).toFixed(2),
  };
  if (run.log.length) {
    out.outside_log_bytes = outside;
    out.outside_log_per_checkpoint = Math.round(outside / r0.checkpoints);
  }
  return out;
}

// The issue's targets, per convo run against LangGraph's on the same backend.
function targets(c, results) {
  const lg = (kind) => results.find((r) => r.run === `langgraph-${c.backend}-${kind}`);
  const delta = lg('delta');
  const same = lg(c.kind);
  const t = {
    'outside the log <= 150 B per checkpoint': c.outside_log_per_checkpoint <= 150,
    [`saver time at turn ${c.turns} within 20% of turn ${c.early_turn}`]: c.late_vs_early <= 1.2,
    [`saver CPU time at turn ${c.turns} within 20% of turn ${c.early_turn}`]: c.cpu_late_vs_early <= 1.2,
  };
  if (c.saver_only_late_vs_early !== undefined) {
    t[`saver-only CPU (its main-thread samples + libconvo on the pool) at turn ${c.turns} within 20% of turn ${c.early_turn}`] =
      c.saver_only_late_vs_early <= 1.2;
  }
  if (c.own_cpu_late_vs_early !== undefined) {
    t[`saver own CPU time (LangGraph's overlap taken out) at turn ${c.turns} within 20% of turn ${c.early_turn}`] =
      c.own_cpu_late_vs_early <= 1.2;
  }
  if (c.backend === 'sqlite') t['total <= 4.5x raw content'] = c.stored_per_raw <= 4.5;
  if (delta?.turns === c.turns) {
    t["5x fewer bytes than LangGraph's DeltaChannel saver"] = delta.stored_bytes >= 5 * c.stored_bytes;
  }
  if (same) { // at the last turn both ran to
    const p = (r) => r.probes.filter((x) => x.turn <= Math.min(same.turns, c.turns)).at(-1);
    const [cp, lp] = [p(c), p(same)];
    if (cp && lp && cp.turn === lp.turn) {
      t[`getTuple no slower than LangGraph's (${c.kind}, turn ${cp.turn})`] =
        cp.get_tuple_ms <= lp.get_tuple_ms && cp.fresh_get_tuple_ms <= lp.fresh_get_tuple_ms;
      t[`getState no slower than LangGraph's (${c.kind}, turn ${cp.turn})`] =
        cp.get_state_ms <= lp.get_state_ms && cp.fresh_get_state_ms <= lp.fresh_get_state_ms;
    }
  }
  return { run: c.run, targets: t };
}

// ---- main ----

const runs = runnable('langgraph-runtime', RUNS, opts.only);
if (PROFILE) { // before the first libconvo call: finds libuv's pool
  await threadCpu.mark();
  console.error(`langgraph-runtime: libuv's pool: ${threadCpu.poolSize()} threads`);
}
const perRun = new Map(runs.map((run) => [run, []]));
try {
  for (let round = 0; round < ROUNDS; round++) {
    for (const run of runs) {
      try {
        console.error(`langgraph-runtime: round ${round + 1}/${ROUNDS}: ${run.name}, ${run.turns} turns...`);
        perRun.get(run).push(await runOne(run));
      } finally {
        if (opts.keep) console.error(`langgraph-runtime: kept ${run.schema ?? run.path}`);
        else await run.drop?.();
      }
    }
  }
} finally {
  if (!opts.keep) rmSync(tmp, { recursive: true, force: true });
}
const results = runs.map((run) => summarize(run, perRun.get(run)));
const checks = results.filter((r) => r.saver.startsWith('convo')).map((c) => targets(c, results));

if (opts.json) {
  for (const r of [...results, ...checks]) console.log(JSON.stringify(r));
} else {
  const fmt = (n) => (Number.isFinite(n) ? n.toLocaleString('en-US') : '—');
  console.log(`LangGraph runtime chatbot: ${PAYLOAD}-byte user message and answer per turn, ` +
    `${fmt(rawBytes(TURNS))} raw content bytes at ${TURNS} turns; ${DURABILITY} durability; median of ${ROUNDS} round(s)` +
    (INTERLEAVE ? `; turn ${EARLY} figures from a second thread interleaved with the last ${WINDOW} turns` : ''));
  console.log('| run | turns | turns/s | saver ms/turn at ' + EARLY + ' | at last | last/early | ' +
    'saver CPU ms/turn at ' + EARLY + ' / last (last/early) | turn CPU ms at ' + EARLY + ' / last | ' +
    'getTuple ms warm / fresh | getState ms warm / fresh | checkpoints | bytes | bytes / raw | ' +
    'outside log B / checkpoint |' + (PROFILE ? ` saver own CPU ms/turn at ${EARLY} / last (last/early) | ` +
      `LangGraph in the saver's windows ms/turn at ${EARLY} / last | saver only (its main-thread samples + libuv's pool) ` +
      `ms/turn at ${EARLY} / last (last/early) | CPU by thread main / pool / V8 at ${EARLY} -> last |` : ''));
  console.log('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|' + (PROFILE ? '---|---|---|---|' : ''));
  for (const r of results) {
    const probes = (key) => r.probes.map((p) => `${p.turn}: ${p[key]} / ${p[`fresh_${key}`]}`).join('; ');
    console.log(`| ${r.run} | ${r.turns} | ${r.turns_per_sec} | ${r.saver_ms_early} | ${r.saver_ms_last} | ` +
      `${r.late_vs_early} | ${r.saver_cpu_ms_early} / ${r.saver_cpu_ms_last} (${r.cpu_late_vs_early}) | ` +
      `${r.turn_cpu_ms_early} / ${r.turn_cpu_ms_last} | ${probes('get_tuple_ms')} | ${probes('get_state_ms')} | ${fmt(r.checkpoints)} | ` +
      `${fmt(r.stored_bytes)} | ${r.stored_per_raw} | ${fmt(r.outside_log_per_checkpoint)} |` +
      (PROFILE ? (r.saver_own_cpu_ms_early === undefined ? ' — | — |' : ` ${r.saver_own_cpu_ms_early} / ` +
        `${r.saver_own_cpu_ms_last} (${r.own_cpu_late_vs_early}) | ${r.overlap_ms_early} / ${r.overlap_ms_last} |`) +
        (r.saver_only_cpu_ms_early === undefined ? ' — | — |' : ` ${r.saver_only_cpu_ms_early} / ${r.saver_only_cpu_ms_last} ` +
          `(${r.saver_only_late_vs_early}) | ${Object.values(r.cpu_by_thread_early).join(' / ')} -> ` +
          `${Object.values(r.cpu_by_thread_last).join(' / ')} |`) : ''));
  }
  console.log('\nbytes per table (with its indexes), at the end of each run:');
  for (const r of results) {
    console.log(`- ${r.run}: ` + Object.entries(r.tables).map(([t, n]) => `${t} ${fmt(n)}`).join(', '));
  }
  if (PROFILE) {
    console.log(`\nthe saver's main-thread CPU (profile samples) by method, ms per turn at turn ${EARLY} -> the last:`);
    for (const r of results.filter((x) => x.saver_main_ms_by_method_early)) {
      const keys = [...new Set([...Object.keys(r.saver_main_ms_by_method_early), ...Object.keys(r.saver_main_ms_by_method_last)])];
      console.log(`- ${r.run}: ` + keys.map((k) => `${k} ${r.saver_main_ms_by_method_early[k] ?? 0} -> ` +
        `${r.saver_main_ms_by_method_last[k] ?? 0}`).join(', ') + `; libconvo on the pool ${r.cpu_by_thread_early.pool} -> ` +
        `${r.cpu_by_thread_last.pool}`);
    }
  }
  console.log('\na call per method, wall ms p50 / p99 / max over the whole run (a call on the main thread holds the ' +
    'event loop so long; one on the pool does not):');
  for (const r of results) {
    console.log(`- ${r.run}: ` + Object.entries(r.call_ms).map(([k, v]) => `${k} ${v.p50} / ${v.p99} / ${v.max}`).join(', '));
  }
  console.log('\nsaver calls in the last turn; ms per turn by method (inclusive) at turn ' + EARLY + ' -> the last:');
  for (const r of results) {
    console.log(`- ${r.run}: ` + Object.entries(r.calls_per_turn).map(([k, n]) =>
      `${k} ${n} (${r.method_ms_early[k]} -> ${r.method_ms_last[k]} ms)`).join(', '));
  }
  console.log('\ntargets:');
  for (const c of checks) {
    console.log(`- ${c.run}: ` + Object.entries(c.targets).map(([k, v]) => `${k}: ${v ? 'met' : 'NOT met'}`).join('; '));
  }
}
