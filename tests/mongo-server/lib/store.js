'use strict';
// In-memory databases, collections and indexes.
//
// A collection keeps its documents as records {seq, doc, keys} in a Map in
// insertion order (natural order).  Updates swap record.doc for a new object,
// so documents already handed to a cursor batch are never mutated.
// Unique indexes keep a Map from an index-key string to the owning record,
// which makes duplicate-key checks exact and O(1) per key.
// Sizes (collStats, dbStats) are measured, not made up: see Collection.stats().

const { Query } = require('mingo');
const V = require('./values');
const { CommandError } = require('./errors');
const Scan = require('./scan');

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

// Bytes an index entry costs beyond its key: where the entry points (a record
// id, 8 bytes) plus 8 bytes of bookkeeping.  An estimate, documented in README.md.
const INDEX_ENTRY_OVERHEAD = 16;

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

  /**
   * Bytes of this index's entries for `doc`: per entry, the BSON size of its key
   * as a document of the key's values under empty names (how mongod used to
   * store index keys) plus INDEX_ENTRY_OVERHEAD.  0 when `doc` is not indexed.
   */
  sizeFor(doc) {
    let bytes = 0;
    for (const k of this.keysFor(doc)) {
      bytes += 5 + INDEX_ENTRY_OVERHEAD;
      for (const v of k.values) bytes += V.elementSize(v);
    }
    return bytes;
  }

  duplicateError(ns, values) {
    const keyValue = V.docFromPairs(this.fields.map((f, i) => [f, values[i] === undefined ? null : values[i]]));
    const shown = this.fields.map((f, i) => `${f}: ${V.formatValue(values[i])}`).join(', ');
    return new CommandError(11000,
      `E11000 duplicate key error collection: ${ns} index: ${this.name} dup key: { ${shown} }`,
      'DuplicateKey', { keyPattern: this.keyDoc, keyValue });
  }
}

/** Values an equality lookup can use: scalars with a canonical key. */
const usable = (v) => ['string', 'int', 'long', 'double', 'bool', 'objectId', 'date', 'binData', 'timestamp'].includes(V.bsonType(v));

/** The value of a plain or {$eq: v} equality condition, or undefined. */
function equalityValue(cond) {
  if (V.isPlainDoc(cond)) {
    const ks = V.keysOf(cond);
    return ks.length === 1 && ks[0] === '$eq' && usable(cond.$eq) ? cond.$eq : undefined;
  }
  return usable(cond) ? cond : undefined;
}

/**
 * The records of a compound index grouped by the values of its first fields
 * (`prefix`), each group kept sorted by the next field `f1` (then natural
 * order): a find fixing the prefix by equality, sorted on f1, with a limit,
 * reads the first few of one group instead of sorting every match.  A group
 * holding an array under f1 (whose sort key depends on the direction) is
 * marked unordered and not used.  The groups are made the first time a find
 * can use them (most compound indexes' prefixes, a thread's times, never are)
 * and kept up to date from then on.
 */
class OrderedGroups {
  constructor(prefix, f1) {
    this.prefix = prefix;
    this.f1 = f1;
    this.groups = null; // canon of the prefix values -> {recs, unordered}; null until built
  }

  build(records) {
    this.groups = new Map();
    for (const rec of records) this.add(rec);
  }

  /** Group keys of a document (several when a prefix field holds an array). */
  groupKeys(doc) {
    let keys = [''];
    for (const f of this.prefix) {
      const next = [];
      for (const k of keys) for (const c of new Set(Collection.fieldKeys(doc, f))) next.push(`${k}\u0000${c}`);
      keys = next;
    }
    return keys;
  }

  /** The group key of equality values, one per prefix field. */
  static keyOf(values) {
    return values.map((v) => `\u0000${canon(v)}`).join('');
  }

  cmp(a, b) {
    return V.compareValues(a.doc[this.f1], b.doc[this.f1]) || a.seq - b.seq;
  }

  /** Where rec goes (or is) in recs: the first position not before it. */
  position(recs, rec) {
    let lo = 0;
    let hi = recs.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (this.cmp(recs[mid], rec) < 0) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  add(rec) {
    if (!this.groups) return;
    for (const k of this.groupKeys(rec.doc)) {
      let g = this.groups.get(k);
      if (!g) { g = { recs: [], unordered: false }; this.groups.set(k, g); }
      if (Array.isArray(rec.doc[this.f1])) g.unordered = true;
      g.recs.splice(this.position(g.recs, rec), 0, rec);
    }
  }

  remove(rec) {
    if (!this.groups) return;
    for (const k of this.groupKeys(rec.doc)) {
      const g = this.groups.get(k);
      if (!g) continue;
      let at = this.position(g.recs, rec);
      if (g.recs[at] !== rec) at = g.recs.indexOf(rec);
      if (at >= 0) g.recs.splice(at, 1);
      if (!g.recs.length) this.groups.delete(k);
    }
  }

  /** Records of group `key` in f1 order (dir -1: descending; ties in natural order). */
  * scan(key, dir) {
    const g = this.groups.get(key);
    if (!g) return;
    const recs = g.recs;
    if (dir > 0) { yield* recs; return; }
    for (let i = recs.length - 1; i >= 0;) {
      let j = i;
      while (j > 0 && V.compareValues(recs[j - 1].doc[this.f1], recs[i].doc[this.f1]) === 0) j--;
      for (let x = j; x <= i; x++) yield recs[x];
      i = j - 1;
    }
  }

  usableFor(key) {
    const g = this.groups.get(key);
    return !g || !g.unordered;
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
    // First field of every index -> Map<canon(value), record | Set<record>>:
    // lets equality / $in filters on indexed fields skip the full scan.  A
    // field's map is made the first time a filter can use it (null till then).
    this.fieldIndex = new Map();
    this.ordered = new Map(); // index name -> OrderedGroups, for compound indexes
    this.sortedIndexes = new Map(); // index name -> Scan.SortedIndex, made when first walked
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
    for (const f of fields) this.fieldIndex.set(f, null);
    this.ordered = new Map();
    this.sortedIndexes = new Map();
    for (const ix of this.indexes.values()) {
      for (let p = 1; p < ix.fields.length; p++) {
        const fields = ix.fields.slice(0, p + 1);
        if (fields.some((f) => f.includes('.')) || new Set(fields).size !== fields.length) break;
        this.ordered.set(`${ix.name}/${p}`, new OrderedGroups(fields.slice(0, p), fields[p]));
      }
    }
    for (const rec of this.records.values()) this.fieldIndexAdd(rec);
  }

  fieldIndexAdd(rec) {
    for (const o of this.ordered.values()) o.add(rec);
    for (const o of this.sortedIndexes.values()) o.add(rec);
    for (const [f, m] of this.fieldIndex) {
      if (m) this.fieldMapAdd(m, f, rec);
    }
  }

  fieldMapAdd(m, f, rec) {
    for (const k of Collection.fieldKeys(rec.doc, f)) {
      // one record under a key is kept bare, two or more in a Set: most
      // keys (_id's, a thread's id) have one, and a Set costs ~200 bytes
      const held = m.get(k);
      if (held === undefined) m.set(k, rec);
      else if (held instanceof Set) held.add(rec);
      else if (held !== rec) m.set(k, new Set([held, rec]));
    }
  }

  fieldIndexRemove(rec) {
    for (const o of this.ordered.values()) o.remove(rec);
    for (const o of this.sortedIndexes.values()) o.remove(rec);
    for (const [f, m] of this.fieldIndex) {
      if (!m) continue;
      for (const k of Collection.fieldKeys(rec.doc, f)) {
        const held = m.get(k);
        if (held === rec) {
          m.delete(k);
        } else if (held instanceof Set) {
          held.delete(rec);
          if (held.size === 1) m.set(k, held.values().next().value);
        }
      }
    }
  }

  /**
   * Candidate records for a filter, using equality on all fields of a unique
   * index, or an equality or $in condition on an indexed field; null when the
   * whole collection has to be scanned.  The
   * full filter is still applied to every candidate, unless `exact` comes
   * back true: the filter was that one plain equality on a top-level field,
   * so every candidate matches it.
   */
  candidates(filter) {
    return this.uniqueCandidate(filter) || this.fieldCandidates(filter);
  }

  /**
   * Equality on every field of a unique index (not a partial one): at most
   * one record, read off that index as a server reads it; null when no
   * unique index is fixed so.
   */
  uniqueCandidate(filter) {
    const keys = V.keysOf(filter);
    for (const ix of this.indexes.values()) {
      if (!ix.unique || ix.partial || !ix.fields.every((f) => keys.includes(f))) continue;
      const vals = ix.fields.map((f) => equalityValue(filter[f]));
      if (vals.includes(undefined)) continue;
      const rec = ix.entries.get(vals.map(canon).join('\u0000'));
      return { recs: rec ? [rec] : [], exact: false };
    }
    return null;
  }

  /** An equality or $in condition on the first field of an index: its records. */
  fieldCandidates(filter) {
    const keys = V.keysOf(filter);
    for (const k of keys) {
      let m = this.fieldIndex.get(k);
      if (m === undefined) continue;
      if (m === null) {
        m = new Map();
        for (const rec of this.records.values()) this.fieldMapAdd(m, k, rec);
        this.fieldIndex.set(k, m);
      }
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
      for (const x of vals) {
        const held = m.get(canon(x));
        if (held instanceof Set) for (const rec of held) found.add(rec);
        else if (held) found.add(held);
      }
      const exact = keys.length === 1 && vals.length === 1 && !k.includes('.') && V.bsonType(vals[0]) !== 'binData';
      return { recs: [...found].sort((a, b) => a.seq - b.seq), exact }; // natural order
    }
    return null;
  }

  /**
   * The first `limit` records matching filter in the order of a one-field sort,
   * read off a compound index whose first fields the filter fixes by equality
   * and whose next field is the sort field; null when no index fits.
   */
  sortedMatch(filter, sort, limit) {
    const sk = V.keysOf(sort);
    if (sk.length !== 1 || !V.isNumeric(sort[sk[0]]) || limit <= 0) return null;
    const dir = V.numberOf(sort[sk[0]]) < 0 ? -1 : 1;
    const keys = V.keysOf(filter);
    for (const o of this.ordered.values()) {
      if (o.f1 !== sk[0] || !o.prefix.every((f) => keys.includes(f))) continue;
      const values = o.prefix.map((f) => equalityValue(filter[f]));
      if (values.includes(undefined)) continue;
      if (!o.groups) o.build(this.records.values());
      const group = OrderedGroups.keyOf(values);
      if (!o.usableFor(group)) continue;
      let query = null;
      if (keys.length > o.prefix.length || values.some((v) => V.bsonType(v) === 'binData')) {
        try {
          query = new Query(V.toQ(filter));
        } catch (e) {
          throw new CommandError(2, e.message, 'BadValue');
        }
      }
      const out = [];
      let examined = 0;
      for (const rec of o.scan(group, dir)) {
        examined++;
        if (query && !query.test(Collection.qview(rec))) continue;
        out.push(rec);
        if (out.length >= limit) break;
      }
      Scan.note(examined, examined, 'IXSCAN');
      return out;
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
    const rec = { seq: this.nextSeq++, doc, keys: new Map() };
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
    this.fieldIndexAdd(rec);
  }

  remove(rec) {
    this.setKeys(rec, new Map());
    this.fieldIndexRemove(rec);
    this.records.delete(rec.seq);
  }

  /**
   * The query view of a record, for mingo: made afresh for every test, not
   * kept (kept, every document tested once was held twice, and at 100,000
   * threads the garbage collector's marking of that heap took most of the time).
   */
  static qview(rec) {
    return V.toQ(rec.doc);
  }

  /** Records matching a filter, in natural order (stops after `limit` if > 0). */
  match(filter, limit = 0) {
    filter = filter || {};
    const keys = V.keysOf(filter);
    // Fast path: {_id: <plain value>} uses the _id index.
    if (keys.length === 1 && keys[0] === '_id' && !V.isPlainDoc(filter._id) && !Array.isArray(filter._id)
        && V.bsonType(filter._id) !== 'regex') {
      const rec = this.indexes.get('_id_').entries.get(canon(filter._id));
      Scan.note(1, rec ? 1 : 0, 'IDHACK');
      return rec ? [rec] : [];
    }
    let cand = keys.length ? this.uniqueCandidate(filter) : null;
    if (keys.length && !cand) {
      // a range (after equalities, if any) bounding an index: read between the bounds
      const p = Scan.plan(this, filter, null, undefined, equalityValue, true);
      if (p && p.range) return Scan.scan(this, p, filter, limit, Collection.qview);
      cand = this.fieldCandidates(filter);
    }
    if (!keys.length || (cand && cand.exact)) {
      const all = cand ? cand.recs : [...this.records.values()];
      const out = limit > 0 ? all.slice(0, limit) : all;
      Scan.note(cand ? out.length : 0, out.length, cand ? 'IXSCAN' : 'COLLSCAN');
      return out;
    }
    const source = cand ? cand.recs : this.records.values();
    let query;
    try {
      query = new Query(V.toQ(filter));
    } catch (e) {
      throw new CommandError(2, e.message, 'BadValue');
    }
    const out = [];
    let examined = 0;
    for (const rec of source) {
      examined++;
      if (query.test(Collection.qview(rec))) {
        out.push(rec);
        if (limit > 0 && out.length >= limit) break;
      }
    }
    Scan.note(cand ? examined : 0, examined, cand ? 'IXSCAN' : 'COLLSCAN');
    return out;
  }

  /**
   * The records of a find with this filter, sort and hint read off an index
   * (scan.js), in the sort's order when the index gives it: {recs, sorted};
   * null when no index was hinted and none gives the sort.
   */
  indexScan(filter, sort, limit, hint) {
    const p = Scan.plan(this, filter, sort, hint, equalityValue);
    if (!p) return null;
    return { recs: Scan.scan(this, p, filter, limit, Collection.qview), sorted: p.provided };
  }

  /**
   * What mongod's collStats reports, measured on the documents held: size is
   * the sum of their BSON sizes; storageSize is the same figure (nothing is
   * compressed here, so it is an upper bound of WiredTiger's); each index's
   * size is Index.sizeFor summed over the documents.
   */
  stats() {
    let size = 0;
    const indexSizes = new Map([...this.indexes.keys()].map((n) => [n, 0]));
    for (const rec of this.records.values()) {
      size += V.bsonSize(rec.doc);
      for (const [name, ix] of this.indexes) indexSizes.set(name, indexSizes.get(name) + ix.sizeFor(rec.doc));
    }
    let totalIndexSize = 0;
    for (const n of indexSizes.values()) totalIndexSize += n;
    return { count: this.records.size, size, storageSize: size, nindexes: this.indexes.size, totalIndexSize, indexSizes };
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
  /**
   * indexModes: {partial: 'keep' | 'ignore' | 'refuse', sparse: 'keep' | 'ignore'},
   * what createIndexes does with those options (server.js --partial-indexes).
   */
  constructor(indexModes = {}) {
    this.dbs = new Map();
    this.indexModes = { partial: indexModes.partial || 'keep', sparse: indexModes.sparse || 'keep' };
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

module.exports = { Store, Database, Collection, Index, canon, equalityValue, INDEX_ENTRY_OVERHEAD };
