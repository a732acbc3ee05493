// thread-cpu.mjs — the process's CPU time by thread (Linux /proc/self/task/*/schedstat, ns;
// /proc/self/task/*/stat's clock ticks where schedstat is missing): the main thread, libuv's
// thread pool (where koffi's async calls run libconvo), found by `mark()` as the threads that
// run a burst of pool work, and the others (V8's platform workers: concurrent marking,
// sweeping, compilation). Elsewhere: null.
import { readdirSync, readFileSync } from 'node:fs';
import { pbkdf2 } from 'node:crypto';
import { promisify } from 'node:util';

const TICK_MS = 10; // USER_HZ is 100 on Linux (stat's unit)
let pool = null; // tids of libuv's pool, found by mark()

function threadTimes() {
  const out = new Map();
  let tids;
  try {
    tids = readdirSync('/proc/self/task');
  } catch {
    return null;
  }
  for (const tid of tids) {
    try {
      out.set(tid, threadMs(tid));
    } catch { /* a thread that ended */ }
  }
  return out;
}

let schedstat = true;
// a thread's CPU time in ms
function threadMs(tid) {
  if (schedstat) {
    try {
      return Number(readFileSync(`/proc/self/task/${tid}/schedstat`, 'utf8').split(' ')[0]) / 1e6;
    } catch (e) {
      if (e.code !== 'ENOENT' || tid !== String(process.pid)) throw e;
      schedstat = false; // no schedstat in this kernel
    }
  }
  const stat = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' '); // fields from 3 (state) on
  return (Number(f[11]) + Number(f[12])) * TICK_MS; // utime + stime (fields 14, 15)
}

/** Finds libuv's pool: the threads that gain at least 100 ms of CPU while it runs 16 key
 * derivations (a V8 worker that marks or compiles meanwhile gains a tick or two). */
export async function mark() {
  const before = threadTimes();
  if (!before) return;
  const derive = promisify(pbkdf2);
  await Promise.all(Array.from({ length: 16 }, (_, i) => derive(`p${i}`, 's', 50000, 32, 'sha256')));
  const pid = String(process.pid);
  pool = new Set([...threadTimes()].filter(([tid, t]) => tid !== pid && t - (before.get(tid) ?? 0) >= 100).map(([tid]) => tid));
}

/** A snapshot to pass to since(). */
export const snapshot = threadTimes;

/** ms of CPU per group ({ main, v8, pool }) since a snapshot, divided by n. */
export function since(before, n = 1) {
  const now = threadTimes();
  if (!before || !now) return null;
  const out = { main: 0, v8: 0, pool: 0 };
  const pid = String(process.pid);
  for (const [tid, t] of now) {
    const d = t - (before.get(tid) ?? 0);
    const group = tid === pid ? 'main' : pool?.has(tid) ? 'pool' : 'v8';
    out[group] += d;
  }
  for (const k of Object.keys(out)) out[k] = +(out[k] / n).toFixed(3);
  return out;
}

/** How many threads mark() took for libuv's pool (null before it). */
export const poolSize = () => pool?.size ?? null;
