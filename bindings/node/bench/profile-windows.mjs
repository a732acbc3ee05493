// What the main thread did inside a saver's timed windows, from V8's CPU profile (the
// inspector's Profiler; sample times in microseconds of the monotonic clock, as
// process.hrtime). A sample is the saver's own work when a frame of this package
// (bindings/node/src: the saver, the Store, the koffi calls and serde calls they make) is on
// its stack; LangGraph's or LangChain's when its function is theirs and no such frame is
// under it (under async durability the next step's work runs while a saver call is under
// way); idle when the main thread waits (for libconvo on libuv's thread pool, or for the
// machine); the garbage collector; the rest (Node's own, other packages). A sample counts as
// one sampling interval, not as the time to the next sample: on a loaded machine the process
// is descheduled between samples, and the gap is not CPU time (the count approximates the
// thread's running time, to compare with process.cpuUsage()).

export const KINDS = ['saver', 'framework', 'idle', 'gc', 'rest'];

function partOf(frame) {
  const { url, functionName } = frame;
  if (!url) {
    if (functionName === '(garbage collector)') return 'gc';
    if (functionName === '(idle)') return 'idle';
    return 'rest';
  }
  return url.includes('@langchain/') ? 'framework' : 'rest';
}

/** The profile's samples: { at: [us], dt: [us], kind: [one of KINDS] }, in time order;
 * intervalUs: the sampling interval the profiler was given. */
export function samplesOf(profile, intervalUs) {
  const byId = new Map(profile.nodes.map((x) => [x.id, x]));
  const parent = new Map();
  for (const x of profile.nodes) for (const c of x.children ?? []) parent.set(c, x.id);
  const ours = new Map(); // node id -> a frame of this package on its stack
  const isOurs = (id) => {
    let v = ours.get(id);
    if (v === undefined) {
      v = byId.get(id).callFrame.url.includes('/bindings/node/src/') || (parent.has(id) && isOurs(parent.get(id)));
      ours.set(id, v);
    }
    return v;
  };
  const n = profile.samples.length;
  const at = new Float64Array(n);
  const dt = new Float64Array(n);
  const kind = new Array(n);
  let t = profile.startTime;
  for (let i = 0; i < n; i++) {
    t += profile.timeDeltas[i];
    at[i] = t;
    dt[i] = Math.min(intervalUs, profile.timeDeltas[i + 1] ?? intervalUs);
    const id = profile.samples[i];
    kind[i] = isOurs(id) ? 'saver' : partOf(byId.get(id).callFrame);
  }
  return { at, dt, kind };
}

/** ms of each kind among the samples inside `windows` ([[from, to] us, ...], sorted). */
export function insideWindows(samples, windows) {
  const out = Object.fromEntries(KINDS.map((k) => [k, 0]));
  let w = 0;
  let i = lowerBound(samples.at, windows.length ? windows[0][0] : Infinity);
  for (; i < samples.at.length && w < windows.length; i++) {
    const t = samples.at[i];
    while (w < windows.length && windows[w][1] < t) w++;
    if (w < windows.length && windows[w][0] <= t) out[samples.kind[i]] += samples.dt[i] / 1000;
  }
  return out;
}

function lowerBound(xs, v) {
  let lo = 0;
  let hi = xs.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (xs[mid] < v) lo = mid + 1; else hi = mid;
  }
  return lo;
}

/** The monotonic clock in the profile's unit (us). */
export const nowUs = () => Number(process.hrtime.bigint() / 1000n);
