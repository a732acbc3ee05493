'use strict';
// BSON value helpers for the stand-in.
//
// Documents are stored exactly as the `bson` package deserialises them with
// promoteValues:false, i.e. numbers stay Int32 / Long / Double wrappers,
// binaries stay Binary, and so on.  That keeps every BSON type intact on the
// way back out.  mingo, however, only understands plain JS numbers, so for
// matching and aggregation we build a "query view" (toQ) and map results back
// to typed values afterwards (restore).
//
// JS objects order integer-like keys ("0", "42") before all others.  To keep
// BSON key order faithful, objects that have such keys carry their real key
// order in a hidden symbol property (KEY_ORDER); toWire() turns them into Maps,
// which the bson serialiser writes in insertion order.

const BSON = require('bson');
const { Int32, Double, Long, Decimal128, ObjectId } = BSON;

const KEY_ORDER = Symbol('keyOrder');
const INT32_MIN = -2147483648;
const INT32_MAX = 2147483647;

/** True for keys that JS would reorder (canonical array indices). */
function isIndexLikeKey(k) {
  return /^(0|[1-9][0-9]*)$/.test(k) && Number(k) < 4294967295;
}

function isPlainDoc(v) {
  if (v === null || typeof v !== 'object') return false;
  if (Array.isArray(v) || v instanceof Date || v instanceof RegExp || v instanceof Map) return false;
  if (v._bsontype !== undefined || ArrayBuffer.isView(v)) return false;
  return true;
}

/** Keys of a document in BSON order. */
function keysOf(obj) {
  return obj[KEY_ORDER] ? obj[KEY_ORDER].slice() : Object.keys(obj);
}

/** Set obj[key] = val, keeping the BSON key order (new keys go last). */
function setKey(obj, key, val) {
  const has = Object.prototype.hasOwnProperty.call(obj, key);
  if (!has) {
    if (obj[KEY_ORDER]) obj[KEY_ORDER].push(key);
    else if (isIndexLikeKey(key)) {
      Object.defineProperty(obj, KEY_ORDER, {
        value: Object.keys(obj).concat(key), enumerable: false, writable: true, configurable: true,
      });
    }
  }
  assignOwn(obj, key, val);
}

/** obj[key] = val as an own property, even for the key "__proto__". */
function assignOwn(obj, key, val) {
  if (key === '__proto__') Object.defineProperty(obj, key, { value: val, enumerable: true, writable: true, configurable: true });
  else obj[key] = val;
}

function deleteKey(obj, key) {
  if (!Object.prototype.hasOwnProperty.call(obj, key)) return;
  delete obj[key];
  if (obj[KEY_ORDER]) obj[KEY_ORDER] = obj[KEY_ORDER].filter((k) => k !== key);
}

function setKeyOrder(obj, order) {
  Object.defineProperty(obj, KEY_ORDER, { value: order, enumerable: false, writable: true, configurable: true });
}

/** Build a new document from [key, value] pairs in the given order. */
function docFromPairs(pairs) {
  const out = {};
  for (const [k, v] of pairs) setKey(out, k, v);
  return out;
}

// ---------------------------------------------------------------------------
// Raw BSON walk: recover key order for objects that have integer-like keys.

function skipCString(buf, pos) {
  while (buf[pos] !== 0) pos++;
  return pos + 1;
}

/** Walk the raw BSON document at `pos` in parallel with its parsed form `obj`. */
function annotateKeyOrder(buf, pos, obj) {
  const end = pos + buf.readInt32LE(pos);
  pos += 4;
  const names = [];
  let needOrder = false;
  while (pos < end - 1) {
    const type = buf[pos++];
    const nameEnd = skipCString(buf, pos);
    const name = buf.toString('utf8', pos, nameEnd - 1);
    pos = nameEnd;
    names.push(name);
    if (isIndexLikeKey(name)) needOrder = true;
    switch (type) {
      case 0x01: case 0x09: case 0x11: case 0x12: pos += 8; break; // double, date, timestamp, int64
      case 0x02: case 0x0d: case 0x0e: pos += 4 + buf.readInt32LE(pos); break; // string, code, symbol
      case 0x03: case 0x04: { // embedded document / array
        const len = buf.readInt32LE(pos);
        const child = obj == null ? undefined : obj[Array.isArray(obj) ? Number(name) : name];
        if (child !== null && typeof child === 'object') annotateKeyOrder(buf, pos, child);
        pos += len;
        break;
      }
      case 0x05: pos += 5 + buf.readInt32LE(pos); break; // binary
      case 0x06: case 0x0a: case 0xff: case 0x7f: break; // undefined, null, minKey, maxKey
      case 0x07: pos += 12; break; // ObjectId
      case 0x08: pos += 1; break; // bool
      case 0x0b: pos = skipCString(buf, skipCString(buf, pos)); break; // regex
      case 0x0c: pos += 4 + buf.readInt32LE(pos) + 12; break; // DBPointer
      case 0x0f: pos += buf.readInt32LE(pos); break; // code with scope
      case 0x10: pos += 4; break; // int32
      case 0x13: pos += 16; break; // decimal128
      default: return; // unknown type: give up quietly
    }
  }
  if (needOrder && isPlainDoc(obj)) setKeyOrder(obj, names);
}

const DESERIALIZE_OPTS = {
  promoteValues: false, promoteLongs: false, promoteBuffers: false, bsonRegExp: true,
};

// Bytes of decoded values that may be stored (binary data, ObjectIds) are
// copied into slabs of their own.  bson decodes binary data as a view into
// the buffer it reads, here the whole wire message, and ObjectIds into
// Node's shared 8 KB buffer pool, where the replies are built too: a stored
// value kept its request, or a slab of dead replies, alive outside the heap
// (about 1.7 KB a stored document at 100,000 threads).
const SLAB = 64 * 1024;
let slab = Buffer.allocUnsafeSlow(SLAB);
let slabUsed = 0;

/** A copy of bytes in the decoded values' own slabs (a buffer of its own when large). */
function ownCopy(bytes) {
  const n = bytes.length;
  if (n > SLAB / 16) {
    const out = Buffer.allocUnsafeSlow(n);
    bytes.copy(out);
    return out;
  }
  if (slabUsed + n > SLAB) {
    slab = Buffer.allocUnsafeSlow(SLAB);
    slabUsed = 0;
  }
  const out = slab.subarray(slabUsed, slabUsed + n);
  bytes.copy(out);
  slabUsed += (n + 7) & ~7;
  return out;
}

/** Gives every Binary and ObjectId in v bytes of its own (ownCopy). */
function ownBytes(v) {
  if (v === null || typeof v !== 'object') return;
  if (Array.isArray(v)) {
    for (const x of v) ownBytes(x);
  } else if (v._bsontype === 'Binary') {
    v.buffer = ownCopy(v.buffer);
  } else if (v._bsontype === 'ObjectId') {
    v.buffer = ownCopy(v.buffer);
  } else if (isPlainDoc(v)) {
    for (const k of Object.keys(v)) ownBytes(v[k]);
  }
}

/** Deserialize one BSON document (buffer slice) keeping every type. */
function decode(buf) {
  const doc = BSON.deserialize(buf, DESERIALIZE_OPTS);
  annotateKeyOrder(buf, 0, doc);
  ownBytes(doc);
  return doc;
}

/** Convert documents carrying KEY_ORDER into Maps so serialisation keeps order. */
function toWire(v) {
  if (Array.isArray(v)) {
    let out = null;
    for (let i = 0; i < v.length; i++) {
      const w = toWire(v[i]);
      if (w !== v[i]) { out = out || v.slice(); out[i] = w; }
    }
    return out || v;
  }
  if (isPlainDoc(v)) {
    if (v[KEY_ORDER]) {
      const m = new Map();
      for (const k of v[KEY_ORDER]) if (v[k] !== undefined) m.set(k, toWire(v[k]));
      return m;
    }
    let out = null;
    for (const k of Object.keys(v)) {
      const w = toWire(v[k]);
      if (w !== v[k]) { out = out || Object.assign({}, v); out[k] = w; }
    }
    return out || v;
  }
  return v;
}

function encode(doc) {
  return BSON.serialize(toWire(doc), { ignoreUndefined: true });
}

// Sizes come from serialising: bson 6's calculateObjectSize() counts an Int32
// wrapper as a 16-byte object, so it overstates stored documents.

/** Bytes of a document once serialised to BSON. */
function bsonSize(doc) {
  return encode(doc).length;
}

/** Bytes of one element {"": v} inside a BSON document (type, empty name, value). */
function elementSize(v) {
  if (v === undefined || v === null) return 2;
  return BSON.serialize(new Map([['', toWire(v)]])).length - 5;
}

// ---------------------------------------------------------------------------
// Type inspection and numbers.

/** MongoDB type alias ($type name) of a stored value; 'missing' for undefined. */
function bsonType(v) {
  if (v === undefined) return 'missing';
  if (v === null) return 'null';
  switch (typeof v) {
    case 'number': return Number.isInteger(v) && v >= INT32_MIN && v <= INT32_MAX ? 'int' : 'double';
    case 'string': return 'string';
    case 'boolean': return 'bool';
    case 'bigint': return 'long';
    default: break;
  }
  if (Array.isArray(v)) return 'array';
  if (v instanceof Date) return 'date';
  if (v instanceof RegExp) return 'regex';
  if (ArrayBuffer.isView(v)) return 'binData';
  switch (v._bsontype) {
    case 'Int32': return 'int';
    case 'Double': return 'double';
    case 'Long': return 'long';
    case 'Decimal128': return 'decimal';
    case 'ObjectId': return 'objectId';
    case 'Binary': return 'binData';
    case 'Timestamp': return 'timestamp';
    case 'BSONRegExp': return 'regex';
    case 'MinKey': return 'minKey';
    case 'MaxKey': return 'maxKey';
    case 'Code': return 'javascript';
    case 'BSONSymbol': return 'symbol';
    default: return 'object';
  }
}

const NUMERIC = new Set(['int', 'long', 'double', 'decimal']);
const isNumeric = (v) => NUMERIC.has(bsonType(v));

/** JS number for any numeric BSON value (int64 beyond 2^53 loses precision). */
function numberOf(v) {
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') return Number(v);
  switch (v && v._bsontype) {
    case 'Int32': case 'Double': return v.value;
    case 'Long': return v.toNumber();
    case 'Decimal128': return Number(v.toString());
    default: return NaN;
  }
}

function toLong(v) {
  if (v && v._bsontype === 'Long') return v;
  return Long.fromNumber(Math.trunc(numberOf(v)));
}

/** Typed number from a JS number: int32 if it fits, else int64 if integral, else double. */
function typedNumber(n) {
  if (Number.isInteger(n) && !Object.is(n, -0)) {
    if (n >= INT32_MIN && n <= INT32_MAX) return new Int32(n);
    if (Number.isSafeInteger(n)) return Long.fromNumber(n);
  }
  return new Double(n);
}

/** Arithmetic with MongoDB's result-type rules (int32 < int64 < double < decimal). */
function arith(a, b, op) {
  const ka = bsonType(a);
  const kb = bsonType(b);
  const fn = op === 'add' ? (x, y) => x + y : (x, y) => x * y;
  if (ka === 'decimal' || kb === 'decimal') {
    return Decimal128.fromString(String(fn(numberOf(a), numberOf(b))));
  }
  if (ka === 'double' || kb === 'double') return new Double(fn(numberOf(a), numberOf(b)));
  if (ka === 'long' || kb === 'long') {
    const la = toLong(a);
    const lb = toLong(b);
    return op === 'add' ? la.add(lb) : la.multiply(lb);
  }
  const r = fn(numberOf(a), numberOf(b));
  return r >= INT32_MIN && r <= INT32_MAX ? new Int32(r) : Long.fromNumber(r);
}

// ---------------------------------------------------------------------------
// Comparison in MongoDB's canonical BSON order.

const TYPE_RANK = {
  minKey: 1, missing: 2, null: 2, int: 3, long: 3, double: 3, decimal: 3,
  string: 4, symbol: 4, object: 5, array: 6, binData: 7, objectId: 8, bool: 9,
  date: 10, timestamp: 11, regex: 12, javascript: 13, maxKey: 100,
};

const cmp = (a, b) => (a < b ? -1 : a > b ? 1 : 0);

function compareValues(a, b) {
  const ta = bsonType(a);
  const tb = bsonType(b);
  const ra = TYPE_RANK[ta] || 50;
  const rb = TYPE_RANK[tb] || 50;
  if (ra !== rb) return cmp(ra, rb);
  switch (ra) {
    case 2: case 1: case 100: return 0;
    case 3: {
      if (ta === 'long' && tb === 'long') return a.compare(b);
      const x = numberOf(a);
      const y = numberOf(b);
      if (Number.isNaN(x) || Number.isNaN(y)) return cmp(Number.isNaN(x) ? 0 : 1, Number.isNaN(y) ? 0 : 1);
      return cmp(x, y);
    }
    case 4: return Buffer.compare(Buffer.from(String(a.value ?? a)), Buffer.from(String(b.value ?? b)));
    case 5: return compareDocs(a, b);
    case 6: {
      const n = Math.min(a.length, b.length);
      for (let i = 0; i < n; i++) {
        const c = compareValues(a[i], b[i]);
        if (c) return c;
      }
      return cmp(a.length, b.length);
    }
    case 7: {
      const ba = binBytes(a);
      const bb = binBytes(b);
      return cmp(ba.length, bb.length) || cmp(a.sub_type || 0, b.sub_type || 0) || Buffer.compare(ba, bb);
    }
    case 8: return cmp(a.toHexString(), b.toHexString());
    case 9: return cmp(a ? 1 : 0, b ? 1 : 0);
    case 10: return cmp(a.getTime(), b.getTime());
    case 11: return cmp(a.t, b.t) || cmp(a.i, b.i);
    case 12: return cmp(a.source ?? a.pattern, b.source ?? b.pattern) || cmp(a.flags ?? a.options, b.flags ?? b.options);
    default: return cmp(String(a), String(b));
  }
}

function binBytes(v) {
  if (ArrayBuffer.isView(v)) return Buffer.from(v.buffer, v.byteOffset, v.byteLength);
  const b = v.buffer;
  return Buffer.from(b.buffer, b.byteOffset, v.position ?? b.byteLength);
}

/** Documents compare field by field: value type, then field name, then value. */
function compareDocs(a, b) {
  const ka = keysOf(a);
  const kb = keysOf(b);
  const n = Math.min(ka.length, kb.length);
  for (let i = 0; i < n; i++) {
    const va = a[ka[i]];
    const vb = b[kb[i]];
    const c = cmp(TYPE_RANK[bsonType(va)] || 50, TYPE_RANK[bsonType(vb)] || 50)
      || Buffer.compare(Buffer.from(ka[i]), Buffer.from(kb[i]))
      || compareValues(va, vb);
    if (c) return c;
  }
  return cmp(ka.length, kb.length);
}

const valuesEqual = (a, b) => compareValues(a, b) === 0;

// ---------------------------------------------------------------------------
// Cloning (BSON wrapper objects are immutable and can be shared).

function clone(v) {
  if (Array.isArray(v)) return v.map(clone);
  if (v instanceof Date) return new Date(v.getTime());
  if (isPlainDoc(v)) {
    const out = {};
    for (const k of Object.keys(v)) assignOwn(out, k, clone(v[k]));
    if (v[KEY_ORDER]) setKeyOrder(out, v[KEY_ORDER].slice());
    return out;
  }
  return v;
}

// ---------------------------------------------------------------------------
// Path access on typed documents (read-only).

/** Value at a dotted path, without array traversal except numeric indices. */
function getPath(doc, path) {
  let cur = doc;
  for (const seg of path.split('.')) {
    if (Array.isArray(cur)) {
      if (!/^\d+$/.test(seg)) return undefined;
      cur = cur[Number(seg)];
    } else if (isPlainDoc(cur)) {
      cur = Object.prototype.hasOwnProperty.call(cur, seg) ? cur[seg] : undefined;
    } else {
      return undefined;
    }
    if (cur === undefined) return undefined;
  }
  return cur;
}

/**
 * All values reachable at a dotted path, fanning out over arrays the way
 * MongoDB does for queries and indexes.  Arrays found at the end of the path
 * are returned as-is (callers decide whether to expand them).
 */
function valuesAtPath(doc, path) {
  const segs = path.split('.');
  const out = [];
  (function walk(cur, i) {
    if (i === segs.length) { out.push(cur); return; }
    const seg = segs[i];
    if (Array.isArray(cur)) {
      if (/^\d+$/.test(seg) && Number(seg) < cur.length) walk(cur[Number(seg)], i + 1);
      for (const el of cur) if (isPlainDoc(el)) walk(el, i);
      return;
    }
    if (isPlainDoc(cur) && Object.prototype.hasOwnProperty.call(cur, seg)) walk(cur[seg], i + 1);
    else out.push(undefined);
  })(doc, 0);
  // A path that resolved somewhere should not also report "missing".
  const found = out.filter((v) => v !== undefined);
  return found.length ? found : [undefined];
}

// ---------------------------------------------------------------------------
// Query view for mingo, and mapping results back to typed values.

// Query-view object -> typed original (lets restore() recover exact types).
const origins = new WeakMap();

function bsonRegExpToRegExp(r) {
  const flags = (r.options || '').split('').filter((f) => 'imsu'.includes(f)).join('');
  return new RegExp(r.pattern, flags);
}

/**
 * Binary values in the query view.  mingo compares non-plain objects through
 * toString(), and Binary.toString() decodes UTF-8, which would make distinct
 * non-UTF-8 binaries look equal; this wrapper compares subtype + hex instead.
 */
class QBinary {
  constructor(bin) { this.bin = bin; }

  toString() { return `${this.bin.sub_type || 0}:${binBytes(this.bin).toString('hex')}`; }
}

/** Plain-number view of a typed value, for mingo. */
function toQ(v) {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) {
    const out = v.map(toQ);
    origins.set(out, v);
    return out;
  }
  if (isPlainDoc(v)) {
    const out = {};
    for (const k of Object.keys(v)) out[k] = toQ(v[k]);
    origins.set(out, v);
    return out;
  }
  switch (v._bsontype) {
    case 'Int32': case 'Double': case 'Long': case 'Decimal128': return numberOf(v);
    case 'BSONRegExp': return bsonRegExpToRegExp(v);
    case 'Binary': return new QBinary(v);
    default: return v;
  }
}

/**
 * Map a mingo result back to typed BSON values.  `hint` is the typed value
 * that (probably) sits at the same position in the source document; numbers
 * that still equal their hint keep the hint's exact type.  Numbers without a
 * usable hint become int32 / int64 / double depending on their value.
 */
function restore(v, hint) {
  if (typeof v === 'number') {
    if (hint !== undefined && isNumeric(hint) && Object.is(numberOf(hint), v)) return hint;
    return typedNumber(v);
  }
  if (v instanceof QBinary) return v.bin;
  if (Array.isArray(v)) {
    const h = Array.isArray(hint) ? hint : origins.get(v);
    return v.map((x, i) => restore(x, h ? h[i] : undefined));
  }
  if (isPlainDoc(v)) {
    const h = isPlainDoc(hint) ? hint : origins.get(v);
    const out = {};
    const keys = Object.keys(v).filter((k) => v[k] !== undefined);
    // Fields that come from the source keep its order; new ones follow.
    let order = keys;
    if (h) {
      const present = new Set(keys);
      const inH = keysOf(h).filter((k) => present.has(k));
      const seen = new Set(inH);
      order = inH.concat(keys.filter((k) => !seen.has(k)));
    }
    for (const k of order) setKey(out, k, restore(v[k], h && isPlainDoc(h) ? h[k] : undefined));
    return out;
  }
  if (v instanceof RegExp) {
    if (hint && hint._bsontype === 'BSONRegExp' && bsonRegExpToRegExp(hint).source === v.source) return hint;
    return new BSON.BSONRegExp(v.source, v.flags);
  }
  return v;
}

// ---------------------------------------------------------------------------
// Rendering values the way MongoDB prints them in error messages.

function formatValue(v) {
  switch (bsonType(v)) {
    case 'missing': case 'null': return 'null';
    case 'string': return JSON.stringify(v);
    case 'int': return String(numberOf(v));
    case 'long': return v.toString();
    case 'double': {
      const n = numberOf(v);
      return Number.isInteger(n) ? n.toFixed(1) : String(n);
    }
    case 'decimal': return `Decimal128("${v.toString()}")`;
    case 'bool': return String(v);
    case 'objectId': return `ObjectId('${v.toHexString()}')`;
    case 'date': return `new Date(${v.getTime()})`;
    case 'binData': return `BinData(${v.sub_type || 0}, ${binBytes(v).toString('hex').toUpperCase()})`;
    case 'array': return `[ ${v.map(formatValue).join(', ')} ]`;
    case 'object': {
      const ks = keysOf(v);
      return ks.length ? `{ ${ks.map((k) => `${k}: ${formatValue(v[k])}`).join(', ')} }` : '{}';
    }
    case 'timestamp': return `Timestamp(${v.t}, ${v.i})`;
    case 'regex': return `/${v.pattern ?? v.source}/${v.options ?? v.flags}`;
    case 'minKey': return 'MinKey';
    case 'maxKey': return 'MaxKey';
    default: return String(v);
  }
}

module.exports = {
  BSON, Int32, Double, Long, ObjectId, KEY_ORDER,
  isPlainDoc, keysOf, setKey, deleteKey, setKeyOrder, docFromPairs,
  decode, encode, toWire, bsonSize, elementSize,
  bsonType, isNumeric, numberOf, typedNumber, arith,
  compareValues, valuesEqual, clone, getPath, valuesAtPath,
  toQ, restore, originOf: (v) => origins.get(v), formatValue, binBytes,
};
