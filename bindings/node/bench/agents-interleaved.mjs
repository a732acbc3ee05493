// The session's own time in a Runner turn at two history lengths measured at the same time
// (the Python twin: bindings/python/bench/agents_interleaved.py). Each session is prefilled
// with the items the Runner stores for agents-bench.mjs's conversation, to --sizes items
// (default 220 and 2,200: turn 100 and turn 1,000 of it), then --turns rounds play one Runner
// turn on each session in turn (the order rotating each round), so that the load of a shared
// machine falls on every length alike. Reports per session and length the median time inside
// the session's methods (each call timed to its promise settling) and of the whole turn, and
// the ratio to the shortest length. A bench, not a test.
//
//   node agents-interleaved.mjs [--turns 30] [--sizes 220,2200] [--only NAME,...]
//
// Redis: CONVO_BENCH_REDIS_URL or CONVO_TEST_REDIS_URL (skipped when unset).
import { parseArgs } from 'node:util';
import { mkdtempSync, rmSync } from 'node:fs';
import { execSync } from 'node:child_process';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Runner, MemorySession, setTracingDisabled } from '@openai/agents';
import { convoImports, median, since, withParam } from './common.mjs';
import { conversation, scriptedAgent, turnItems, timedSession } from './agents-common.mjs';

setTracingDisabled(true);
const { values: opts } = parseArgs({ options: {
  turns: { type: 'string', default: '30' }, sizes: { type: 'string', default: '220,2200' },
  only: { type: 'string' } } });
const TURNS = Number(opts.turns);
const SIZES = opts.sizes.split(',').map(Number);
const PAYLOAD = 200;
const LENGTH = Math.max(...SIZES) + TURNS + 10; // turns enough for the longest history and the rounds
const talk = conversation(LENGTH, PAYLOAD);
const { said } = talk;

// the first n items the Runner stores in that conversation
const itemsUpTo = (n) => turnItems(talk, n).flat().slice(0, n);

const [{ Store }, { ConvoSession }] = await convoImports('.', './openai-agents');
const tmp = mkdtempSync(join(tmpdir(), 'convo-agents-interleaved-'));
const redisUrl = process.env.CONVO_BENCH_REDIS_URL ?? process.env.CONVO_TEST_REDIS_URL;
const KINDS = [
  ['agents-memory', async () => ({ session: new MemorySession({ sessionId: 'chat' }), close: async () => {} })],
  ...[['convo-memory', () => 'memory:'], ['convo-sqlite', (n) => `sqlite:${join(tmp, `c${n}.db`)}`],
    ['convo-sqlite-copies', (n) => `sqlite:${join(tmp, `m${n}.db`)}`, true],
    ...(redisUrl ? [['convo-redis', (n) => withParam(redisUrl, 'prefix', `agi${process.pid}n${n}`)]] : [])]
    .map(([name, url, mutableItems = false]) => [name, async (n) => {
      const store = await Store.open(url(n));
      return { session: new ConvoSession({ store, sessionId: 'chat', mutableItems }),
        close: async () => { await store.delete('chat').catch(() => {}); await store.close(); } };
    }]),
].filter(([name]) => !opts.only || opts.only.split(',').includes(name));

const runs = [];
try {
  for (const [name, make] of KINDS) {
    for (const n of SIZES) {
      const { session, close } = await make(n);
      const items = itemsUpTo(n);
      for (let i = 0; i < n; i += 500) await session.addItems(items.slice(i, i + 500));
      await session.getItems(); // a first read, as after the turns before
      const spent = { ms: 0 };
      const timed = timedSession(session, spent);
      const turnsBefore = items.filter((i) => i.role === 'user').length;
      runs.push({ name, n, session: timed, close, spent, agent: scriptedAgent(talk, turnsBefore), first: turnsBefore,
        turnMs: [], sessionMs: [] });
    }
  }
  console.log(`uptime: ${execSync('uptime').toString().trim()}`);
  const runner = new Runner();
  for (let t = 0; t < TURNS; t++) {
    for (let k = 0; k < runs.length; k++) {
      const r = runs[(k + t) % runs.length];
      r.spent.ms = 0;
      const start = process.hrtime.bigint();
      await runner.run(r.agent, said[r.first + t], { session: r.session });
      r.turnMs.push(since(start));
      r.sessionMs.push(r.spent.ms);
    }
  }
  console.log(`uptime: ${execSync('uptime').toString().trim()}`);
  console.log(`session\titems at start\tturn ms\tsession ms\tsession ms / at ${SIZES[0]}`);
  const base = {};
  for (const r of runs) {
    const s = median(r.sessionMs);
    base[r.name] ??= s;
    console.log([r.name, r.n, median(r.turnMs).toFixed(1), s.toFixed(3), (s / base[r.name]).toFixed(2)].join('\t'));
  }
} finally {
  for (const r of runs) await r.close();
  rmSync(tmp, { recursive: true, force: true });
}
