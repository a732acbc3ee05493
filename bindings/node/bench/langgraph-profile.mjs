// Where a ConvoSaver turn's main-thread time goes, early and late: the chatbot of
// langgraph-runtime.mjs (one node answering each user message, graph.invoke per turn) on one
// saver, with V8's CPU profiler on over turns [early - window, early) and [last - window, last),
// self time summed per part of the code (the saver's JS, the Store and koffi, LangGraph and
// LangChain, the garbage collector, idle), in ms per turn, and what the main thread did inside
// the saver's timed windows (profile-windows.mjs: the saver's own code, LangGraph's overlap,
// idle while libconvo works on the thread pool). libconvo's own calls run on libuv's
// thread pool and are not in a main-thread profile: callgrind of `convo bench --graph` is
// their measure (docs/performance.md).
//
// --saver reference: the control saver (reference-saver.mjs: LangGraph's objects by
// reference), to tell LangGraph's own work from what a saver adds to it. Per window also the
// process's CPU by thread (thread-cpu.mjs: the main thread, V8's workers, libuv's pool).
//
//   node --expose-gc langgraph-profile.mjs [--turns 1000] [--early 100] [--window 50]
//        [--kind full|delta] [--durability async|sync] [--url sqlite:PATH]
//        [--saver convo|reference] [--json]
import { Session } from 'node:inspector/promises';
import { parseArgs } from 'node:util';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as langgraph from '@langchain/langgraph';
import { HumanMessage, AIMessage } from '@langchain/core/messages';
import { words, convoImports } from './common.mjs';
import { samplesOf, insideWindows, nowUs } from './profile-windows.mjs';
import { ReferenceSaver } from './reference-saver.mjs';
import * as threadCpu from './thread-cpu.mjs';

const INTERVAL_US = 100;

const { values: opts } = parseArgs({ options: {
  turns: { type: 'string', default: '1000' }, early: { type: 'string', default: '100' },
  window: { type: 'string', default: '50' }, kind: { type: 'string', default: 'full' },
  durability: { type: 'string', default: 'async' }, url: { type: 'string' },
  saver: { type: 'string', default: 'convo' },
  json: { type: 'boolean', default: false },
} });
const TURNS = Number(opts.turns);
const EARLY = Number(opts.early);
const WINDOW = Number(opts.window);
if (!(EARLY >= WINDOW && TURNS >= EARLY + WINDOW)) throw new Error('need --window <= --early <= --turns - --window');
if (!['convo', 'reference'].includes(opts.saver)) throw new Error('--saver is convo or reference');
const { StateGraph, MessagesAnnotation, START, END } = langgraph;
const state = opts.kind === 'delta' ? new langgraph.StateSchema({ messages: langgraph.MessagesDeltaValue })
  : MessagesAnnotation;

const turns = [];
for (let t = 0; t < TURNS; t++) {
  turns.push({ human: { id: `h${t}`, content: words(200) }, ai: { id: `a${t}`, content: words(200) } });
}
const answerTo = new Map(turns.map((t) => [t.human.id, t.ai]));

// the part of the code a profile node's function belongs to
function partOf(node) {
  const { url, functionName } = node.callFrame;
  if (!url) {
    if (functionName === '(garbage collector)') return 'gc';
    if (functionName === '(idle)' || functionName === '(program)') return functionName.slice(1, -1);
    return 'native';
  }
  if (url.includes('/src/langgraph/')) return 'saver js';
  if (url.includes('/src/store.js') || url.includes('/src/internal/')) return 'store + marshalling';
  if (url.includes('/koffi/')) return 'koffi';
  if (url.includes('@langchain/langgraph')) return 'langgraph';
  if (url.includes('@langchain/')) return 'langchain';
  if (url.startsWith('node:')) return 'node';
  return 'other';
}

function summarize(profile, n, windows) {
  const byId = new Map(profile.nodes.map((x) => [x.id, x]));
  const self = new Map(); // node id -> us
  for (let i = 0; i < profile.samples.length; i++) {
    const dt = Math.min(INTERVAL_US, profile.timeDeltas[i + 1] ?? INTERVAL_US); // see profile-windows.mjs
    self.set(profile.samples[i], (self.get(profile.samples[i]) ?? 0) + dt);
  }
  const parts = {};
  const fns = {};
  for (const [id, us] of self) {
    const node = byId.get(id);
    const part = partOf(node);
    parts[part] = (parts[part] ?? 0) + us / 1000 / n;
    const { functionName, url, lineNumber } = node.callFrame;
    const key = `${functionName || '(anonymous)'} ${url.split('/').slice(-2).join('/')}:${lineNumber + 1}`;
    fns[key] = (fns[key] ?? 0) + us / 1000 / n;
  }
  const round = (o) => Object.fromEntries(Object.entries(o).sort((a, b) => b[1] - a[1])
    .map(([k, v]) => [k, +v.toFixed(3)]));
  const top = Object.fromEntries(Object.entries(round(fns)).slice(0, 25));
  const { byMethod, ...inside } = insideWindows(samplesOf(profile, INTERVAL_US), windows);
  const perTurn = (o) => round(Object.fromEntries(Object.entries(o).map(([k, v]) => [k, v / n])));
  return { in_saver_windows: perTurn(inside), saver_by_method: perTurn(byMethod), parts: round(parts), top };
}

// the saver's windows: the union of the intervals when one of its calls is under way, in the
// profile's clock (microseconds of the monotonic clock, as process.hrtime)
function instrument(target) {
  const meter = { active: 0, start: 0, windows: [], cpu: 0, cpuStart: null };
  const now = nowUs;
  for (const name of ['put', 'putWrites', 'getTuple', 'list', 'getDeltaChannelHistory']) {
    const original = target[name];
    const enter = () => {
      if (meter.active++ === 0) { meter.start = now(); meter.cpuStart = process.cpuUsage(); }
    };
    const leave = () => {
      if (--meter.active === 0) {
        meter.windows.push([meter.start, now()]);
        const d = process.cpuUsage(meter.cpuStart);
        meter.cpu += (d.user + d.system) / 1000;
      }
    };
    target[name] = name === 'list'
      ? async function* (...a) { enter(); try { yield* original.apply(this, a); } finally { leave(); } }
      : async function (...a) { enter(); try { return await original.apply(this, a); } finally { leave(); } };
  }
  return meter;
}

const [{ ConvoSaver }] = await convoImports('./langgraph');
await threadCpu.mark();
const tmp = mkdtempSync(join(tmpdir(), 'convo-lg-profile-'));
const saver = opts.saver === 'reference' ? new ReferenceSaver()
  : new ConvoSaver(opts.url ?? `sqlite:${join(tmp, 'p.db')}`);
await saver.store?.();
const meter = instrument(saver);
const graph = new StateGraph(state)
  .addNode('model', (s) => ({ messages: [new AIMessage(answerTo.get(s.messages.at(-1).id))] }))
  .addEdge(START, 'model').addEdge('model', END).compile({ checkpointer: saver });
const config = { configurable: { thread_id: 'chat' }, durability: opts.durability };
const session = new Session();
session.connect();
await session.post('Profiler.enable');
await session.post('Profiler.setSamplingInterval', { interval: INTERVAL_US });
const out = {};
try {
  for (let t = 0; t < TURNS; t++) {
    const window = t === EARLY - WINDOW ? 'early' : t === TURNS - WINDOW ? 'last' : null;
    if (window) {
      globalThis.gc?.();
      await session.post('Profiler.start');
      meter.windows = [];
      meter.cpu = 0;
      out[window] = { from: t, cpu: process.cpuUsage(), threads: threadCpu.snapshot() };
    }
    await graph.invoke({ messages: [new HumanMessage(turns[t].human)] }, config);
    const ending = t === EARLY - 1 ? 'early' : t === TURNS - 1 ? 'last' : null;
    if (ending) {
      const { profile } = await session.post('Profiler.stop');
      const cpu = process.cpuUsage(out[ending].cpu);
      const threads = threadCpu.since(out[ending].threads, WINDOW);
      const windowMs = meter.windows.reduce((a, [s0, s1]) => a + s1 - s0, 0) / 1000 / WINDOW;
      out[ending] = { turns: [out[ending].from, t + 1], process_cpu_ms_per_turn:
        +((cpu.user + cpu.system) / 1000 / WINDOW).toFixed(3), cpu_ms_per_turn_by_thread: threads,
      saver_window_ms_per_turn: +windowMs.toFixed(3), saver_window_cpu_ms_per_turn: +(meter.cpu / WINDOW).toFixed(3),
      ...summarize(profile, WINDOW, meter.windows) };
    }
  }
} finally {
  session.disconnect();
  await saver.close?.();
  rmSync(tmp, { recursive: true, force: true });
}
if (opts.json) console.log(JSON.stringify(out));
else {
  for (const [w, r] of Object.entries(out)) {
    console.log(`${w} turns ${r.turns[0]}..${r.turns[1]}: process CPU ${r.process_cpu_ms_per_turn} ms/turn ` +
      `(by thread: ${Object.entries(r.cpu_ms_per_turn_by_thread ?? {}).map(([k, v]) => `${k} ${v}`).join(', ')}); ` +
      `saver windows ${r.saver_window_ms_per_turn} ms/turn wall, ${r.saver_window_cpu_ms_per_turn} CPU; inside them (main thread): ` +
      Object.entries(r.in_saver_windows).map(([k, v]) => `${k} ${v}`).join(', '));
    console.log('  the saver\'s own samples in them by method: ' +
      Object.entries(r.saver_by_method).map(([k, v]) => `${k} ${v}`).join(', '));
    console.log('  main-thread self ms/turn by part, whole turn:');
    console.log('  ' + Object.entries(r.parts).map(([k, v]) => `${k} ${v}`).join(', '));
    console.log('  top functions: ' + Object.entries(r.top).map(([k, v]) => `${k} ${v}`).join('; '));
  }
}
