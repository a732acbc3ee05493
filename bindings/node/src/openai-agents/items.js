// items.js — how an item of an OpenAI Agents session (an AgentInputItem) is kept in the
// thread's log: role-tagged JSON that `convo load` prints readably and that decodes to an
// item deep-equal to the one stored. Imports no framework.
//
// Three forms, chosen per item; decodeItem tells them apart without being told:
//  A. an item with a role ({type: 'message', role: 'user', ...}): its JSON, as it is;
//  B. an item without a `role` key ({type: 'function_call', ...}): its JSON with
//     "role": its type put first (read back: a role equal to the type is taken off; form A
//     never has role === type);
//  C. anything JSON would not give back (undefined, bytes, NaN, -0, a lone surrogate, a
//     Date, role === type, no usable role or type, a key "$item" or "$op"):
//     {"role": R, "$item": V}, V the item in the tagged encoding below.
// A transaction's first item also carries "$op": the digest of the transaction, so that a
// retry with the same operationId but another transaction is not taken for a replay (the
// store compares a replayed call's messages byte for byte).
import { createHash } from 'node:crypto';
import { InvalidError, CorruptError, codes } from '../errors.js';
import { validRole } from '../internal/roles.js';

const ITEM = '$item';
const OP = '$op';
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

function invalid(message) {
  return new InvalidError(codes.EINVAL, `ConvoSession: ${message}`);
}

function isPlain(v) {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false;
  const proto = Object.getPrototypeOf(v);
  return proto === Object.prototype || proto === null;
}

// Whether JSON.stringify(item) would give back something other than the item.
function needsTags(item) {
  let special = false;
  const json = JSON.stringify(item, function replacer(key, value) {
    if (special) return null;
    const raw = this[key]; // before toJSON
    if (raw === undefined || typeof raw === 'bigint' || typeof raw === 'function' || typeof raw === 'symbol' ||
        (typeof raw === 'number' && (!Number.isFinite(raw) || Object.is(raw, -0))) ||
        (raw !== null && typeof raw === 'object' && !Array.isArray(raw) && !isPlain(raw)) ||
        (typeof raw === 'string' && LONE_SURROGATE.test(raw)) ||
        (raw !== null && typeof raw === 'object' && (typeof raw.toJSON === 'function' ||
          (!Array.isArray(raw) && Object.keys(raw).some((k) => LONE_SURROGATE.test(k)))))) {
      special = true;
      return null;
    }
    return value;
  });
  return special ? null : json;
}

// The tagged encoding: JSON, except that an object whose only key starts with "$" is a tag.
function encodeValue(v, where) {
  if (v === undefined) return { $undefined: 1 };
  if (v === null || typeof v === 'boolean') return v;
  if (typeof v === 'number') {
    return Number.isFinite(v) && !Object.is(v, -0) ? v : { $number: Object.is(v, -0) ? '-0' : String(v) };
  }
  if (typeof v === 'bigint') return { $bigint: v.toString() };
  if (typeof v === 'string') {
    return LONE_SURROGATE.test(v) ? { $utf16: Array.from({ length: v.length }, (_, i) => v.charCodeAt(i)) } : v;
  }
  if (v instanceof Uint8Array) return { $bytes: Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64') };
  if (v instanceof Date) return { $date: encodeValue(v.getTime(), where) };
  if (Array.isArray(v)) return Array.from(v, (x) => encodeValue(x, where));
  if (!isPlain(v)) {
    throw invalid(`${where} holds ${typeof v === 'object' ? `a ${v.constructor?.name ?? 'non-plain object'}` : `a ${typeof v}`}, ` +
      'which a session cannot store (plain objects, arrays, strings, numbers, booleans, null, ' +
      'undefined, Uint8Array and Date can be stored)');
  }
  const keys = Object.keys(v);
  if ((keys.length === 1 && keys[0].startsWith('$')) || keys.some((k) => LONE_SURROGATE.test(k))) {
    return { $object: keys.map((k) => [encodeValue(k, where), encodeValue(v[k], where)]) };
  }
  return Object.fromEntries(keys.map((k) => [k, encodeValue(v[k], where)]));
}

function corrupt(message) {
  return new CorruptError(codes.ECORRUPT, `ConvoSession: a stored item ${message}`);
}

function decodeValue(v) {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map(decodeValue);
  const keys = Object.keys(v);
  if (keys.length === 1 && keys[0].startsWith('$')) {
    const x = v[keys[0]];
    switch (keys[0]) {
      case '$undefined': return undefined;
      case '$number': return x === '-0' ? -0 : Number(x);
      case '$bigint': return BigInt(x);
      case '$utf16': return String.fromCharCode(...x);
      case '$bytes': return new Uint8Array(Buffer.from(x, 'base64'));
      case '$date': return new Date(decodeValue(x));
      case '$object': return Object.fromEntries(x.map(([k, val]) => [decodeValue(k), decodeValue(val)]));
      default: throw corrupt(`has an unknown tag ${keys[0]}`);
    }
  }
  return Object.fromEntries(keys.map((k) => [k, decodeValue(v[k])]));
}

/** The log message (JSON text) of one item; op: the digest a transaction's first item carries. */
export function encodeItem(item, op = null, where = 'an item') {
  if (!isPlain(item)) throw invalid(`${where} must be a plain object`);
  const opText = op ? `,"${OP}":${JSON.stringify(op)}` : '';
  const reserved = Object.hasOwn(item, ITEM) || Object.hasOwn(item, OP);
  const json = reserved ? null : needsTags(item);
  if (json !== null) {
    const role = validRole(item.role);
    if (role && role !== item.type) return json.slice(0, -1) + opText + '}';
    if (!Object.hasOwn(item, 'role') && validRole(item.type)) {
      const rest = json.length > 2 ? ',' + json.slice(1, -1) : '';
      return `{"role":${JSON.stringify(item.type)}${rest}${opText}}`;
    }
  }
  // (a lone surrogate would be JSON the store refuses)
  const role = [item.role, item.type].map(validRole).find((r) => r && !LONE_SURROGATE.test(r)) ?? 'item';
  return `{"role":${JSON.stringify(role)},"${ITEM}":${JSON.stringify(encodeValue(item, where))}${opText}}`;
}

/** The item a log message stores. */
export function decodeItem(text) {
  return decodeParsed(parse(text));
}

function parse(text) {
  let m;
  try {
    m = JSON.parse(text);
  } catch (e) {
    throw corrupt(`is not JSON: ${e.message}`);
  }
  if (!isPlain(m)) throw corrupt('is not an object');
  return m;
}

/**
 * What a session keeps of a log message it read, to give its item again without parsing:
 * the item, deep-frozen, when it holds JSON values only (forms A and B: handed out as it
 * is, shared by every call and every session of the Store), else the text (form C: decoded
 * again each time, as Dates and bytes cannot be frozen).
 */
export function keepItem(text) {
  const m = parse(text);
  return Object.hasOwn(m, ITEM) ? text : freezeItem(decodeParsed(m));
}

/**
 * The item a keepItem value stands for: the shared frozen item (a new frozen one for form
 * C), or with `mutable` a new object the caller may change (a deep copy: O(its size)).
 */
export function itemOf(kept, mutable = false) {
  if (typeof kept === 'string') return mutable ? decodeItem(kept) : freezeItem(decodeItem(kept));
  return mutable ? copyJson(kept) : kept;
}

/**
 * Freezes the plain objects and arrays of an item, deep (Dates and bytes, made anew for
 * each call, are left as they are): a caller changing it gets a TypeError (in strict code)
 * instead of changing what every later getItems() returns.
 */
export function freezeItem(v) {
  if (v === null || typeof v !== 'object' || Object.isFrozen(v)) return v;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) freezeItem(v[i]);
  } else if (isPlain(v)) {
    for (const k of Object.keys(v)) freezeItem(v[k]);
  } else {
    return v;
  }
  return Object.freeze(v);
}

// A deep copy of a value JSON.parse made (objects, arrays, strings, numbers, booleans,
// null): several times faster than parsing the text again or structuredClone.
function copyJson(v) {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) {
    const a = new Array(v.length);
    for (let i = 0; i < v.length; i++) a[i] = copyJson(v[i]);
    return a;
  }
  const o = {};
  for (const k of Object.keys(v)) {
    // ("__proto__" from JSON.parse is an own key: keep it one, not o's prototype)
    if (k === '__proto__') Object.defineProperty(o, k, { value: copyJson(v[k]), enumerable: true, writable: true, configurable: true });
    else o[k] = copyJson(v[k]);
  }
  return o;
}

function decodeParsed(m) {
  if (Object.hasOwn(m, ITEM)) return decodeValue(m[ITEM]);
  // (rest copies, not delete: an object a key was deleted from is slower to use)
  if (Object.hasOwn(m, OP)) {
    const { [OP]: op, ...item } = m;
    m = item;
  }
  if (m.role === m.type) {
    const { role, ...item } = m;
    return item;
  }
  return m;
}

// JSON text with object keys sorted: one text per value, whatever its key order.
function canonical(v) {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v !== null && typeof v === 'object') {
    return `{${Object.keys(v).sort().map((k) => `${JSON.stringify(k)}:${canonical(v[k])}`).join(',')}}`;
  }
  return JSON.stringify(v);
}

/** A short digest of a transaction (its type and items, in the tagged encoding). */
export function digest(transaction) {
  return createHash('sha256').update(canonical(encodeValue(transaction, 'the transaction')))
    .digest('base64url').slice(0, 22);
}
