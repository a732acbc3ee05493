// common.mjs — what the 1,000-turn benches of this folder share: their options, the seeded
// text of their conversations, the package's own entry points, the figures they take from
// timings, and which of their runs can run here.
import { parseArgs } from 'node:util';
import { readFileSync, statSync, existsSync } from 'node:fs';

// --turns, --payload, --rounds and --json, and a bench's own options (`own`, parseArgs's
// form); exits 2 when a number is out of range. WINDOW: how many turns a rate at a turn is
// the median of; EARLY: the early turn rates are compared with.
export function benchOptions(name, own = {}) {
  const { values: opts } = parseArgs({
    options: {
      turns: { type: 'string', default: '1000' },
      payload: { type: 'string', default: '200' },
      rounds: { type: 'string', default: '3' },
      json: { type: 'boolean', default: false },
      ...own,
    },
  });
  const TURNS = Number(opts.turns);
  const PAYLOAD = Number(opts.payload);
  const ROUNDS = Number(opts.rounds);
  if (!(TURNS >= 4) || !(PAYLOAD >= 1) || !(ROUNDS >= 1)) {
    console.error(`${name}: --turns must be >= 4, --payload and --rounds >= 1`);
    process.exit(2);
  }
  return { opts, TURNS, PAYLOAD, ROUNDS, WINDOW: Math.max(1, Math.min(50, Math.floor(TURNS / 4))),
    EARLY: Math.min(100, TURNS) };
}

// Random words from a fixed seed: poorly compressible text, the same in every run.
let seed = 42;
function rand() {
  seed = (seed * 1103515245 + 12345) % 2147483648;
  return seed / 2147483648;
}
export function words(bytes) {
  let s = '';
  while (s.length < bytes) {
    const len = 2 + Math.floor(rand() * 8);
    for (let i = 0; i < len; i++) s += String.fromCharCode(97 + Math.floor(rand() * 26));
    s += ' ';
  }
  return s.slice(0, bytes);
}

// The modules of the package this folder sits in (bindings/node, its own npm ci done) by
// export name ('.', './langgraph', ...), imported only when a convo run needs them.
export function convoImports(...names) {
  const dir = new URL('../', import.meta.url);
  const pkg = JSON.parse(readFileSync(new URL('package.json', dir), 'utf8'));
  const entry = (name) => {
    const e = pkg.exports[name];
    return new URL(typeof e === 'object' ? (e.import ?? e.default) : e, dir);
  };
  return Promise.all(names.map((name) => import(entry(name))));
}

export const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};
// calls per second over a run of timings (ms)
export const rate = (ms) => (ms.length * 1000) / ms.reduce((a, b) => a + b, 0);
// The rate around a turn: from the median of the `window` timings ending there, so a stall
// of the (shared) machine in that window does not decide it.
export const rateAt = (ms, turn, window) => 1000 / median(ms.slice(turn - window, turn));
// ms since a process.hrtime.bigint()
export const since = (start) => Number(process.hrtime.bigint() - start) / 1e6;

export function withParam(url, name, value) {
  return `${url}${url.includes('?') ? '&' : '?'}${name}=${value}`;
}

// A SQLite file's bytes and its WAL's.
export function fileBytes(path) {
  return [path, `${path}-wal`].reduce((n, f) => n + (existsSync(f) ? statSync(f).size : 0), 0);
}

// The runs (objects with name, backend and maybe needs()) that --only names and whose
// server is given; a note for each one skipped for want of a server.
export function runnable(name, runs, only) {
  const names = only ? new Set(only.split(',')) : null;
  return runs.filter((run) => {
    if (names && !names.has(run.name)) return false;
    if (run.needs && !run.needs()) {
      const b = run.backend.toUpperCase();
      console.error(`${name}: ${run.name} skipped: set CONVO_BENCH_${b}_URL or CONVO_TEST_${b}_URL`);
      return false;
    }
    return true;
  });
}

// The runs in the order of a round: turned by one each round, so none always runs first.
export const inTurn = (runs, round) => runs.map((_, i) => runs[(i + round) % runs.length]);
