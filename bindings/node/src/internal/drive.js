// drive.js — runs a call written as a generator of its steps: synchronously while each step
// it yields is a value, as a promise from the first step that is one. One code path serves a
// store whose calls return at once ({ sync: true }) and one whose calls wait on the pool.

const isThenable = (x) => x !== null && typeof x === 'object' && typeof x.then === 'function';

/** The generator's return value, or a promise of it once a step yielded a promise; a step's
 * value (or a promise's outcome) is what its `yield` gives back, an error is thrown there. */
export function drive(steps) {
  let r = steps.next();
  while (!r.done) {
    if (isThenable(r.value)) return rest(steps, r.value);
    r = steps.next(r.value);
  }
  return r.value;
}

async function rest(steps, pending) {
  let step = pending;
  for (;;) {
    let ok = true;
    let value;
    try {
      value = await step;
    } catch (e) {
      ok = false;
      value = e;
    }
    const r = ok ? steps.next(value) : steps.throw(value);
    if (r.done) return r.value;
    step = r.value;
  }
}

/** drive(steps) as a promise (settled at once when every step was a value); a throw becomes
 * a rejection. */
export function driveAsync(steps) {
  try {
    const out = drive(steps);
    return isThenable(out) ? out : Promise.resolve(out);
  } catch (e) {
    return Promise.reject(e);
  }
}
