'use strict';
// In-memory databases, collections and indexes.
//
// A collection keeps its documents as records {seq, doc, keys, q} in a Map in
// insertion order (natural order).  Updates swap record.doc for a new object,
// so documents already handed to a cursor batch are never mutated.
// Unique indexes keep a Map from an index-key string to the owning record,
// which makes duplicate-key checks exact and O(1) per key.

const { Query } = require('mingo');
const V = require('./values');
const { CommandError } = require('./errors');

/** Canonical string of an index-key value (1, 1.0 and NumberLong(1) are equal). */
function canon(v) {
  switch (V.bsonType(v)) {
    case 'missing': case 'null': return 'z';
    case 'int': case 'double': case 'decimal': {
      const n = V.numberOf(v);
      return `n:${Object.is(n, -0) ? 0 : n}`;
    }
    case 'long': return `n:${v.toString()}`;
    case 'string': return `s:${JSON.stringify(v)}`;
    case 'symbol': return `s:${JSON.stringify(v.value)}`;
    case 'bool': return v ? 'b:1' : 'b:0';
    case 'objectId': return `o:${v.toHexString()}`;
    case 'date': return `d:${v.getTime()}`;
    case 'binData': return `x:${v.sub_type || 0}:${V.binBytes(v).toString('hex')}`;
    case 'timestamp': return `t:${v.t}:${v.i}`;
    case 'regex': return `r:${v.pattern ?? v.source}/${v.options ?? v.flags}`;
    case 'array': return `A[${v.map(canon).join(',')}]`;
    case 'object': return `O{${V.keysOf(v).map((k) => `${JSON.stringify(k)}:${canon(v[k])}`).join(',')}}`;
    case 'minKey': return 'min';
    case 'maxKey': return 'max';
    default: return `?:${String(v)}`;
  }
}

class Index {
  constructor(spec) {
    this.name = spec.name;
    this.keyDoc = spec.key;
    this.fields = V.keysOf(spec.key);
    this.unique = spec.name === '_id_' || !!spec.unique;
    this.sparse = !!spec.sparse;
    this.expireAfterSeconds = spec.expireAfterSeconds !== undefined ? V.numberOf(spec.expireAfterSeconds) : undefined;
    this.partial = spec.partialFilterExpression ? new Query(V.toQ(spec.partialFilterExpression)) : null;
    this.spec = spec; // as listed by listIndexes
    this.entries = new Map(); // unique indexes only: key string -> record
  }

  /** Index-key strings for a document ([] if the document is not indexed). */
  keysFor(doc) {
    if (this.partial && !this.partial.test(V.toQ(doc))) return [];
    const perField = this.fields.map((f) => {
      const vals = [];
      for (const v of V.valuesAtPath(doc, f)) {
        if (Array.isArray(v)) {
          // multikey: one entry per element; an empty array indexes as undefined
          if (v.length === 0) vals.push({ c: 'u', v: undefined });
          for (const el of v) vals.push({ c: canon(el), v: el });
        } else {
          vals.push({ c: canon(v), v });
        }
      }
      return vals;
    });
    if (this.sparse && perField.every((vals) => vals.every((x) => x.v === undefined))) return [];
    // Cartesian product over the fields (MongoDB forbids parallel arrays).
    let combos = [[]];
    for (const vals of perField) {
      const next = [];
      for (const c of combos) for (const x of vals) next.push(c.concat([x]));
      combos = next;
    }
    return combos.map((c) => ({ key: c.map((x) => x.c).join('\u0000'), values: c.map((x) => x.v) }));
  }

  duplicateError(ns, values) {
    const keyValue = V.docFromPairs(this.fields.map((f, i) => [f, values[i] === undefined ? null : values[i]]));
    const shown = this.fields.map((f, i) => `${f}: ${V.formatValue(values[i])}`).join(', ');
    return new CommandError(11000,
      `E11000 duplicate key error collection: ${ns} index: ${this.name} dup key: { ${shown} }`,
      'DuplicateKey', { keyPattern: this.keyDoc, keyValue });
  }
}

class Collection {
  constructor(db, name) {
    this.db = db;
    this.name = name;
    this.records = new Map();
    this.nextSeq = 1;
    this.indexes = new Map();
    this.uuid = new V.BSON.UUID();
    this.options = {};
    // First field of every index -> Map<canon(value), Set<record>>: lets
    // equality / $in filters on indexed fields skip the full scan.
    this.fieldIndex = new Map();
    this.addIndex(new Index({ v: 2, key: { _id: new V.Int32(1) }, name: '_id_' }));
  }

  get ns() { return `${this.db.name}.${this.name}`; }

  uniqueIndexes() { return [...this.indexes.values()].filter((ix) => ix.unique); }

  addIndex(ix) {
    if (ix.unique) {
      // Build the entries first; only commit per-record keys if no duplicate.
      const perRec = [];
      for (const rec of this.records.values()) {
        const keys = ix.keysFor(rec.doc);
        for (const k of keys) {
          const owner = ix.entries.get(k.key);
          if (owner && owner !== rec) {
            ix.entries = new Map();
            throw ix.duplicateError(this.ns, k.values);
          }
          ix.entries.set(k.key, rec);
        }
        perRec.push([rec, keys.map((k) => k.key)]);
      }
      for (const [rec, keys] of perRec) rec.keys.set(ix.name, keys);
    }
    this.indexes.set(ix.name, ix);
    this.rebuildFieldIndex();
  }

  dropIndex(name) {
    this.indexes.delete(name);
    for (const rec of this.records.values()) rec.keys.delete(name);
    this.rebuildFieldIndex();
  }

  /** Lookup keys of `doc` for a field-index field (arrays are expanded). */
  static fieldKeys(doc, field) {
    const out = [];
    for (const v of V.valuesAtPath(doc, field)) {
      if (Array.isArray(v)) v.forEach((el) => out.push(canon(el)));
      else out.push(canon(v));
    }
    return out;
  }

  rebuildFieldIndex() {
    const fields = new Set([...this.indexes.values()].map((ix) => ix.fields[0]).filter((f) => !/(^|\.)\d+(\.|$)/.test(f)));
    this.fieldIndex = new Map();
    for (const f of fields) this.fieldIndex.set(f, new Map());
    for (const rec of this.records.values()) this.fieldIndexAdd(rec);
  }

  fieldIndexAdd(rec) {
    for (const [f, m] of this.fieldIndex) {
      for (const k of Collection.fieldKeys(rec.doc, f)) {
        let set = m.get(k);
        if (!set) { set = new Set(); m.set(k, set); }
        set.add(rec);
      }
    }
  }

  fieldIndexRemove(rec) {
    for (const [f, m] of this.fieldIndex) {
      for (const k of Collection.fieldKeys(rec.doc, f)) {
        const set = m.get(k);
        if (set) { set.delete(rec); if (!set.size) m.delete(k); }
      }
    }
  }

  /**
   * Candidate records for a filter, using an equality or $in condition on an
   * indexed field; null when the whole collection has to be scanned.  The
   * full filter is still applied to every candidate.
   */
  candidates(filter) {
    const usable = (v) => ['string', 'int', 'long', 'double', 'bool', 'objectId', 'date', 'binData', 'timestamp'].includes(V.bsonType(v));
    for (const k of V.keysOf(filter)) {
      const m = this.fieldIndex.get(k);
      if (!m) continue;
      const v = filter[k];
      let vals = null;
      if (V.isPlainDoc(v)) {
        const ks = V.keysOf(v);
        if (ks.length === 1 && ks[0] === '$eq' && usable(v.$eq)) vals = [v.$eq];
        else if (ks.length === 1 && ks[0] === '$in' && Array.isArray(v.$in) && v.$in.every(usable)) vals = v.$in;
      } else if (usable(v)) {
        vals = [v];
      }
      if (!vals) continue;
      const found = new Set();
      for (const x of vals) for (const rec of m.get(canon(x)) || []) found.add(rec);
      return [...found].sort((a, b) => a.seq - b.seq); // natural order
    }
    return null;
  }

  /** Compute unique-index keys for `doc`, throwing E11000 if another record owns one. */
  checkUnique(doc, self) {
    const result = new Map();
    for (const ix of this.uniqueIndexes()) {
      const keys = ix.keysFor(doc);
      for (const k of keys) {
        const owner = ix.entries.get(k.key);
        if (owner && owner !== self) throw ix.duplicateError(this.ns, k.values);
      }
      result.set(ix.name, keys.map((k) => k.key));
    }
    return result;
  }

  setKeys(rec, keys) {
    for (const [name, list] of rec.keys) {
      const ix = this.indexes.get(name);
      if (ix) for (const k of list) if (ix.entries.get(k) === rec) ix.entries.delete(k);
    }
    rec.keys = keys;
    for (const [name, list] of keys) {
      const ix = this.indexes.get(name);
      for (const k of list) ix.entries.set(k, rec);
    }
  }

  /** Insert a document (gets an ObjectId _id first if it has none). */
  insert(doc) {
    if (doc._id === undefined) {
      const withId = V.docFromPairs([['_id', new V.ObjectId()], ...V.keysOf(doc).map((k) => [k, doc[k]])]);
      doc = withId;
    } else if (V.keysOf(doc)[0] !== '_id') {
      doc = V.docFromPairs([['_id', doc._id], ...V.keysOf(doc).filter((k) => k !== '_id').map((k) => [k, doc[k]])]);
    }
    if (Array.isArray(doc._id)) throw new CommandError(2, "can't use an array for _id", 'BadValue');
    const keys = this.checkUnique(doc, null);
    const rec = { seq: this.nextSeq++, doc, keys: new Map(), q: null };
    this.setKeys(rec, keys);
    this.records.set(rec.seq, rec);
    this.fieldIndexAdd(rec);
    return rec;
  }

  /** Replace a record's document, enforcing unique indexes. */
  replace(rec, doc) {
    const keys = this.checkUnique(doc, rec);
    this.setKeys(rec, keys);
    this.fieldIndexRemove(rec);
    rec.doc = doc;
    rec.q = null;
    this.fieldIndexAdd(rec);
  }

  remove(rec) {
    this.setKeys(rec, new Map());
    this.fieldIndexRemove(rec);
    this.records.delete(rec.seq);
  }

  /** Cached query view of a record, for mingo. */
  static qview(rec) {
    if (!rec.q) rec.q = V.toQ(rec.doc);
    return rec.q;
  }

  /** Records matching a filter, in natural order (stops after `limit` if > 0). */
  match(filter, limit = 0) {
    filter = filter || {};
    const keys = V.keysOf(filter);
    // Fast path: {_id: <plain value>} uses the _id index.
    if (keys.length === 1 && keys[0] === '_id' && !V.isPlainDoc(filter._id) && !Array.isArray(filter._id)
        && V.bsonType(filter._id) !== 'regex') {
      const rec = this.indexes.get('_id_').entries.get(canon(filter._id));
      return rec ? [rec] : [];
    }
    const source = keys.length ? this.candidates(filter) || this.records.values() : this.records.values();
    if (!keys.length) {
      const all = [...source];
      return limit > 0 ? all.slice(0, limit) : all;
    }
    let query;
    try {
      query = new Query(V.toQ(filter));
    } catch (e) {
      throw new CommandError(2, e.message, 'BadValue');
    }
    const out = [];
    for (const rec of source) {
      if (query.test(Collection.qview(rec))) {
        out.push(rec);
        if (limit > 0 && out.length >= limit) break;
      }
    }
    return out;
  }

  /** Remove documents whose TTL-indexed date is older than now - expireAfterSeconds. */
  sweepTTL(now) {
    let removed = 0;
    for (const ix of this.indexes.values()) {
      if (ix.expireAfterSeconds === undefined || ix.fields.length !== 1) continue;
      for (const rec of [...this.records.values()]) {
        const dates = [];
        for (const v of V.valuesAtPath(rec.doc, ix.fields[0])) {
          for (const x of Array.isArray(v) ? v : [v]) if (x instanceof Date) dates.push(x.getTime());
        }
        if (dates.length && Math.min(...dates) + ix.expireAfterSeconds * 1000 <= now) {
          this.remove(rec);
          removed++;
        }
      }
    }
    return removed;
  }
}

class Database {
  constructor(name) {
    this.name = name;
    this.collections = new Map();
  }

  get(name) { return this.collections.get(name); }

  /** Get a collection, creating it implicitly (like MongoDB on first write). */
  ensure(name) {
    let c = this.collections.get(name);
    if (!c) {
      if (!name || name.startsWith('system.') || name.includes('$')) {
        throw new CommandError(73, `Invalid collection name: ${this.name}.${name}`, 'InvalidNamespace');
      }
      c = new Collection(this, name);
      this.collections.set(name, c);
    }
    return c;
  }
}

class Store {
  constructor() {
    this.dbs = new Map();
  }

  db(name) {
    let d = this.dbs.get(name);
    if (!d) {
      d = new Database(name);
      this.dbs.set(name, d);
    }
    return d;
  }

  sweepTTL() {
    const now = Date.now();
    let n = 0;
    for (const d of this.dbs.values()) for (const c of d.collections.values()) n += c.sweepTTL(now);
    return n;
  }
}

module.exports = { Store, Database, Collection, Index, canon };
