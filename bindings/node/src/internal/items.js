// items.js — lists of items kept in a thread's log (log references: include/convo.h, docs/
// checkpoints.md): the Store's { items, seqs, key, rest, log } as a convo_items_in, and a
// resolved convo_items back as { texts, seqs, key, rest }. No framework here.
import { koffi } from './library.js';
import { InvalidError, codes } from '../errors.js';
import { optText, int, list, known, bool } from './args.js';

const ITEMS_KEYS = ['items', 'seqs', 'key', 'rest', 'log'];
const NO_BLOB = { type: null, bytes: null, len: 0 };

function itemBuffer(v, what) {
  if (v === null || v === undefined) return null;
  if (typeof v === 'string') return Buffer.from(v);
  if (Buffer.isBuffer(v)) return v;
  if (v instanceof Uint8Array) return Buffer.from(v.buffer, v.byteOffset, v.byteLength);
  throw new InvalidError(codes.EINVAL, `${what} must be a message's JSON text (a string), or null with a seq`);
}

/** A list of items to store ({ items, seqs?, key?, rest?, log? }, `what` names it in errors)
 * as the convo_items_in to pass and the memory its seqs_out is written to (free it with
 * releaseItems once read). */
export function itemsIn(v, what, blobIn) {
  const o = known(v, ITEMS_KEYS, what);
  const bufs = list(o.items, `${what}.items`).map((x, i) => itemBuffer(x, `${what}.items[${i}]`));
  const n = bufs.length;
  let seqs = null;
  if (o.seqs !== undefined && o.seqs !== null) {
    seqs = list(o.seqs, `${what}.seqs`).map((q, i) => int(q, `${what}.seqs[${i}]`, -1));
    if (seqs.length !== n) {
      throw new InvalidError(codes.EINVAL, `${what}.seqs has ${seqs.length} entries for ${n} items`);
    }
  }
  const log = o.log === undefined ? false : bool(o.log, `${what}.log`);
  const key = optText(o.key, `${what}.key`);
  const rest = o.rest ? blobIn(o.rest, `${what}.rest`) : NO_BLOB;
  const out = n ? koffi.alloc('int64_t', n) : null;
  const input = {
    // an empty list is a non-NULL pointer with a count of 0
    items: n ? bufs : [null],
    lengths: n ? bufs.map((b) => (b ? b.length : 0)) : null,
    seqs: seqs && n ? seqs : null,
    n,
    key,
    rest,
    seqs_out: out,
    log: log ? 1 : 0,
  };
  return { input, out, n };
}

/** The seqs a put wrote to out (n entries: a log seq, or -1 for an item kept inline). */
export function seqsOut(out, n) {
  if (!out) return [];
  return Array.from(koffi.decode(out, 'int64_t', n), Number);
}

export function releaseItems(list_) {
  for (const x of list_) if (x?.out) koffi.free(x.out);
}

/** channel i's value (or write i's) as { texts, seqs, key, rest } when it is a list of
 * items, else null: getter is convo_checkpoint_channel_items or _write_items. */
export function itemsOut(getter, cp, i, blobOut) {
  const it = {};
  if (!getter(cp, i, it)) return null;
  const n = Number(it.n);
  const texts = n ? koffi.decode(it.items, 'const char *', n) : [];
  const seqs = n ? Array.from(koffi.decode(it.seqs, 'int64_t', n), Number) : [];
  return { texts, seqs, key: it.key ?? null, rest: blobOut(it.rest) };
}
