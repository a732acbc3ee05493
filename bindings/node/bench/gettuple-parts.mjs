// gettuple-parts.mjs — where a warm getTuple's main-thread time goes at two lengths of the
// chatbot's thread (langgraph-runtime.mjs's conversation, full list): after --early turns and
// after --turns, 300 getTuple calls each, CPU of the main thread per part (process.cpuUsage is
// the process's; the parts are timed with hrtime, the machine's load in them).
//
// With the calls the main thread's self time by function (V8's sampling profiler, top 12).
//
//   node --expose-gc gettuple-parts.mjs [--turns 1000] [--early 100] [--calls 300]
import { parseArgs } from 'node:util';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as langgraph from '@langchain/langgraph';
import { HumanMessage, AIMessage } from '@langchain/core/messages';
import { Session } from 'node:inspector/promises';
import { words, convoImports, median } from './common.mjs';

const { values: opts } = parseArgs({ options: {
  turns: { type: 'string', default: '1000' }, early: { type: 'string', default: '100' },
  calls: { type: 'string', default: '300' },
} });
const TURNS = Number(opts.turns);
const EARLY = Number(opts.early);
const CALLS = Number(opts.calls);
const [{ ConvoSaver }, { Store }] = await convoImports('./langgraph', '.');
const { StateGraph, MessagesAnnotation, START, END } = langgraph;

// self time per function, ms per call, the 12 largest
function topSelf(profile, calls) {
  const byId = new Map(profile.nodes.map((x) => [x.id, x]));
  const self = {};
  for (let i = 0; i < profile.samples.length; i++) {
    const { functionName, url, lineNumber } = byId.get(profile.samples[i]).callFrame;
    const key = `${functionName || '(anonymous)'} ${url.split('/').slice(-2).join('/')}:${lineNumber + 1}`;
    self[key] = (self[key] ?? 0) + Math.min(100, profile.timeDeltas[i + 1] ?? 100) / 1000;
  }
  return Object.fromEntries(Object.entries(self).sort((a, b) => b[1] - a[1]).slice(0, 12)
    .map(([k, v]) => [k, +(v / calls).toFixed(4)]));
}

// every call of these methods timed (wall, hrtime), in ms, per name
const spent = {};
function wrap(proto, name, label = name) {
  const f = proto[name];
  proto[name] = function (...a) {
    const s = process.hrtime.bigint();
    const r = f.apply(this, a);
    const done = () => { spent[label] = (spent[label] ?? 0) + Number(process.hrtime.bigint() - s) / 1e6; };
    if (r && typeof r.then === 'function') return r.finally(done);
    done();
    return r;
  };
}
wrap(Store.prototype, 'checkpointGet');
const revivedJs = await import(new URL('../src/langgraph/revived.js', import.meta.url));
for (const m of Object.getOwnPropertyNames(revivedJs.Revived.prototype)) {
  if (m !== 'constructor' && typeof revivedJs.Revived.prototype[m] === 'function') wrap(revivedJs.Revived.prototype, m, `Revived.${m}`);
}

const tmp = mkdtempSync(join(tmpdir(), 'convo-gt-'));
const saver = new ConvoSaver(`sqlite:${join(tmp, 'g.db')}`);
await saver.store();
const graph = new StateGraph(MessagesAnnotation)
  .addNode('model', (s) => ({ messages: [new AIMessage({ id: `a${s.messages.length}`, content: words(200) })] }))
  .addEdge(START, 'model').addEdge('model', END).compile({ checkpointer: saver });
const config = { configurable: { thread_id: 'chat' } };
const out = {};
try {
  for (let t = 0; t < TURNS; t++) {
    await graph.invoke({ messages: [new HumanMessage({ id: `h${t}`, content: words(200) })] }, config);
    if (t + 1 === EARLY || t + 1 === TURNS) {
      globalThis.gc?.();
      for (const k of Object.keys(spent)) delete spent[k];
      const walls = [];
      const session = new Session();
      session.connect();
      await session.post('Profiler.enable');
      await session.post('Profiler.setSamplingInterval', { interval: 100 });
      await session.post('Profiler.start');
      const cpu0 = process.cpuUsage();
      for (let i = 0; i < CALLS; i++) {
        const s = process.hrtime.bigint();
        const tuple = await saver.getTuple(config);
        walls.push(Number(process.hrtime.bigint() - s) / 1e6);
        if (tuple.checkpoint.channel_values.messages.length !== 2 * (t + 1)) throw new Error('wrong length');
      }
      const cpu = process.cpuUsage(cpu0);
      const { profile } = await session.post('Profiler.stop');
      session.disconnect();
      out[t + 1] = { top_self_ms_per_call: topSelf(profile, CALLS), getTuple_wall_median: +median(walls).toFixed(3),
        process_cpu_per_call: +((cpu.user + cpu.system) / 1000 / CALLS).toFixed(3),
        ...Object.fromEntries(Object.entries(spent).map(([k, v]) => [k, +(v / CALLS).toFixed(3)])) };
    }
  }
} finally {
  await saver.close();
  rmSync(tmp, { recursive: true, force: true });
}
console.log(JSON.stringify(out, null, 1));
