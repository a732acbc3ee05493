// args.js — JavaScript arguments -> what the C calls take: strings without NUL, integers in
// range. Each check throws InvalidError naming the argument: koffi would take a number for
// a char * as an address (a crash), abort the process on a string in an integer field, and
// turn NaN into 0.
import { InvalidError, codes } from '../errors.js';

function shown(v) {
  if (v === null || v === undefined) return String(v);
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? v.slice(0, 40) + '...' : v);
  if (typeof v === 'number' || typeof v === 'bigint') return String(v);
  if (Buffer.isBuffer(v)) return 'a Buffer';
  if (Array.isArray(v)) return 'an array';
  return `a ${typeof v}`;
}

function invalid(message) {
  return new InvalidError(codes.EINVAL, message);
}

/** A string argument (a thread id, a name): a string without NUL characters. */
export function text(v, what) {
  if (typeof v !== 'string') throw invalid(`${what} must be a string, not ${shown(v)}`);
  // C would stop at the NUL and act on another string
  if (v.includes('\0')) throw invalid(`${what} contains a NUL character`);
  return v;
}

/** A string argument that may be absent (null or undefined -> null). */
export function optText(v, what) {
  return v === undefined || v === null ? null : text(v, what);
}

/** An integer argument from min up: a safe integer (a Number beyond 2^53 is not exact). */
export function int(v, what, min) {
  if (!Number.isSafeInteger(v) || v < min) {
    throw invalid(`${what} must be an integer from ${min} to 2^53-1, not ${shown(v)}`);
  }
  return v;
}

/** An array argument. */
export function list(v, what) {
  if (!Array.isArray(v)) throw invalid(`${what} must be an array, not ${shown(v)}`);
  return v;
}

/** An options object (null or undefined -> {}). */
export function options(v, what) {
  if (v === undefined || v === null) return {};
  if (typeof v !== 'object' || Array.isArray(v)) throw invalid(`${what} must be an object, not ${shown(v)}`);
  return v;
}

/** An options object whose keys are all among `names` (a misspelt option is an error, not
 * silently ignored). */
export function known(v, names, what) {
  const o = options(v, what);
  for (const k of Object.keys(o)) {
    if (!names.includes(k)) throw invalid(`${what}: unknown option ${JSON.stringify(k)} (known: ${names.join(', ')})`);
  }
  return o;
}

/** A boolean argument. */
export function bool(v, what) {
  if (typeof v !== 'boolean') throw invalid(`${what} must be a boolean, not ${shown(v)}`);
  return v;
}
