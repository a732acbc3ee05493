// items.js — lists of items kept in a thread's log (log references: include/convo.h, docs/
// checkpoints.md): the Store's { items, seqs, key, rest, log } as a convo_items_in, and a
// resolved convo_items back as { texts, seqs, key, rest }. No framework here.
import os from 'node:os';
import { koffi } from './library.js';
import { InvalidError, codes } from '../errors.js';
import { optText, int, list, known, bool } from './args.js';

const ITEMS_KEYS = ['items', 'seqs', 'key', 'rest', 'log'];
const NO_BLOB = { type: null, bytes: null, len: 0 };

function itemBuffer(v, what) {
  if (typeof v === 'string') return Buffer.from(v);
  if (Buffer.isBuffer(v)) return v;
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength);
  throw new InvalidError(codes.EINVAL, `${what} must be a message's JSON text (a string), or null with a seq`);
}

// A list of a long conversation has thousands of items, nearly all given by their seq: the
// C arrays are typed arrays koffi passes as they are (a JS array costs ~0.3 us an element to
// convert, 0.6 ms a call at 2,000 items), and an item's text is copied to C memory of its own.
const LITTLE = os.endianness() === 'LE';

// int64 values as a BigInt64Array, each written as two 32-bit words when it fits in one.
function int64s(values, n) {
  const a = new BigInt64Array(n || 1);
  const words = LITTLE ? new Int32Array(a.buffer) : null;
  for (let i = 0; i < n; i++) {
    const v = values[i];
    if (words && v === (v | 0)) {
      words[2 * i] = v;
      words[2 * i + 1] = v < 0 ? -1 : 0;
    } else {
      a[i] = BigInt(v);
    }
  }
  return a;
}

/** A list of items to store ({ items, seqs?, key?, rest?, log? }, `what` names it in errors)
 * as the convo_items_in to pass and the memory it holds (its texts, and seqs_out: free them
 * with releaseItems once seqs_out is read). */
export function itemsIn(v, what, blobIn) {
  const o = known(v, ITEMS_KEYS, what);
  const src = list(o.items, `${what}.items`);
  const n = src.length;
  let seqs = null;
  if (o.seqs !== undefined && o.seqs !== null) {
    const given = list(o.seqs, `${what}.seqs`);
    if (given.length !== n) {
      throw new InvalidError(codes.EINVAL, `${what}.seqs has ${given.length} entries for ${n} items`);
    }
    for (let i = 0; i < n; i++) {
      const q = given[i];
      if (!Number.isSafeInteger(q) || q < -1) int(q, `${what}.seqs[${i}]`, -1); // throws
    }
    seqs = int64s(given, n);
  }
  const log = o.log === undefined ? false : bool(o.log, `${what}.log`);
  const key = optText(o.key, `${what}.key`);
  const rest = o.rest ? blobIn(o.rest, `${what}.rest`) : NO_BLOB;
  // an empty list is a non-NULL pointer with a count of 0: the arrays have one entry at least
  const items = new BigUint64Array(n || 1);
  const lengths = new BigUint64Array(n || 1);
  const texts = [];
  try {
    for (let i = 0; i < n; i++) {
      if (src[i] === null || src[i] === undefined) continue;
      const b = itemBuffer(src[i], `${what}.items[${i}]`);
      const mem = koffi.alloc('uint8_t', b.length || 1);
      texts.push(mem);
      if (b.length) koffi.encode(mem, koffi.array('uint8_t', b.length), b);
      items[i] = BigInt(koffi.address(mem));
      lengths[i] = BigInt(b.length);
    }
  } catch (e) {
    for (const m of texts) koffi.free(m);
    throw e;
  }
  const out = n ? koffi.alloc('int64_t', n) : null;
  const input = { items, lengths, seqs, n, key, rest, seqs_out: out, log: log ? 1 : 0 };
  return { input, out, n, texts };
}

/** The seqs a put wrote to out (n entries: a log seq, or -1 for an item kept inline). */
export function seqsOut(out, n) {
  if (!out) return [];
  return numbers(new BigInt64Array(koffi.view(out, n * 8)), n);
}

// n int64 values as Numbers, read as two 32-bit words when the high one is the low one's sign.
function numbers(q64, n) {
  const out = new Array(n);
  const q32 = LITTLE ? new Int32Array(q64.buffer, q64.byteOffset, 2 * n) : null;
  for (let k = 0; k < n; k++) {
    const lo = q32 ? q32[2 * k] : 0;
    out[k] = q32 && q32[2 * k + 1] === (lo < 0 ? -1 : 0) ? lo : Number(q64[k]);
  }
  return out;
}

export function releaseItems(list_) {
  for (const x of list_) {
    if (x?.out) koffi.free(x.out);
    for (const m of x?.texts ?? []) koffi.free(m);
  }
}

/** channel i's value (or write i's) as { texts, seqs, key, rest } when it is a list of
 * items, else null: getter is convo_checkpoint_channel_items or _write_items. Only the texts
 * given are decoded (a read that said what it holds gets null for the others). */
export function itemsOut(getter, cp, i, blobOut) {
  const it = {};
  if (!getter(cp, i, it)) return null;
  const n = Number(it.n);
  const texts = new Array(n);
  if (n) {
    const ptrs = new Uint32Array(koffi.view(it.items, n * 8));
    for (let k = 0; k < n; k++) {
      texts[k] = ptrs[2 * k] === 0 && ptrs[2 * k + 1] === 0 ? null : koffi.decode(it.items, k * 8, 'const char *');
    }
  }
  const seqs = n ? numbers(new BigInt64Array(koffi.view(it.seqs, n * 8)), n) : [];
  return { texts, seqs, key: it.key ?? null, rest: blobOut(it.rest) };
}
