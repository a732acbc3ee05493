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

// The saver method a sample of the saver's own work is part of: the outermost frame of this
// package on its stack whose function names one (a continuation after an await starts at its
// own async function: a Store call resumed in #call, koffi's callback, is 'store call').
const METHOD_OF = {
  getTuple: 'getTuple', '#tuple': 'getTuple', checkpointGet: 'getTuple',
  put: 'put', '#putOnce': 'put', '#channelsIn': 'put', '#readLog': 'put', '#deltaIn': 'put', checkpointPut: 'put',
  putWrites: 'putWrites', '#putWrites': 'putWrites', checkpointPutWrites: 'putWrites',
  list: 'list', checkpointList: 'list', getDeltaChannelHistory: 'getDeltaChannelHistory',
  '#listValue': 'values', '#writeValue': 'values', items: 'values',
};
export const METHODS = [...new Set(Object.values(METHOD_OF)), 'store call'];

function partOf(frame) {
  const { url, functionName } = frame;
  if (!url) {
    if (functionName === '(garbage collector)') return 'gc';
    if (functionName === '(idle)') return 'idle';
    return 'rest';
  }
  return url.includes('@langchain/') ? 'framework' : 'rest';
}

/** The profile's samples: { at: [us], dt: [us], kind: [one of KINDS], method: [one of METHODS
 * for a saver sample, else null] }, in time order;
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
  const methods = new Map(); // node id -> the outermost saver method on its stack, or null
  const methodOf = (id) => {
    let v = methods.get(id);
    if (v === undefined) {
      const { url, functionName } = byId.get(id).callFrame;
      const up = parent.has(id) ? methodOf(parent.get(id)) : null;
      v = up ?? (url.includes('/bindings/node/src/') ? METHOD_OF[functionName] ?? null : null);
      methods.set(id, v);
    }
    return v;
  };
  const n = profile.samples.length;
  const method = new Array(n).fill(null);
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
    if (kind[i] === 'saver') method[i] = methodOf(id) ?? 'store call';
  }
  return { at, dt, kind, method };
}

/** ms of each kind among the samples inside `windows` ([[from, to] us, ...], sorted), and of the
 * saver's samples by method (`byMethod`). */
export function insideWindows(samples, windows) {
  const out = Object.fromEntries(KINDS.map((k) => [k, 0]));
  const byMethod = Object.fromEntries(METHODS.map((k) => [k, 0]));
  let w = 0;
  let i = lowerBound(samples.at, windows.length ? windows[0][0] : Infinity);
  for (; i < samples.at.length && w < windows.length; i++) {
    const t = samples.at[i];
    while (w < windows.length && windows[w][1] < t) w++;
    if (w < windows.length && windows[w][0] <= t) {
      out[samples.kind[i]] += samples.dt[i] / 1000;
      if (samples.method[i]) byMethod[samples.method[i]] += samples.dt[i] / 1000;
    }
  }
  return { ...out, byMethod };
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
