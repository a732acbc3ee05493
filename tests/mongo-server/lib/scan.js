'use strict';
// Index scans, as mongod walks a B-tree: an index kept sorted in its key order
// (built the first time a query walks it, kept up to date from then on) is
// read between the bounds a filter gives it — equalities on its leading
// fields, then a range ($gt/$gte/$lt/$lte on numbers or strings) on the next
// one — forwards or backwards, and the sort comes off the index when the sort
// fields follow the equalities in the index's directions (or all reversed).
// Every entry read counts as a key examined, every document fetched as a
// document examined (see Profiler in README.md).

const { Query } = require('mingo');
const V = require('./values');
const { CommandError } = require('./errors');
const { SortedList } = require('./sortedlist');

/** What the commands of the current request examined (reset per command). */
const stats = { keysExamined: 0, docsExamined: 0, planSummary: null, paused: 0 };

function resetStats() {
  stats.keysExamined = 0;
  stats.docsExamined = 0;
  stats.planSummary = null;
  stats.paused = 0;
}

/**
 * Runs fn without counting: the finds of a $lookup are not the aggregate's
 * own plan, which is what mongod 4.4's profiler reports for it.
 */
function uncounted(fn) {
  stats.paused++;
  try {
    return fn();
  } finally {
    stats.paused--;
  }
}

/** Adds to the counts; the first plan named is the command's plan summary. */
function note(keys, docs, plan) {
  if (stats.paused) return;
  stats.keysExamined += keys;
  stats.docsExamined += docs;
  if (!stats.planSummary) stats.planSummary = plan;
}

const sign = (x) => (x < 0 ? -1 : 1);
const MAX_STRING = Symbol('maxString'); // above every string, below every object
const rankOf = (v) => ({ int: 3, long: 3, double: 3, decimal: 3, string: 4, objectId: 8 }[V.bsonType(v)]);
const RANGE_OPS = ['$gt', '$gte', '$lt', '$lte'];
// the ends of a type's bracket, for a range open on one side
const OID_MIN = new V.ObjectId('000000000000000000000000');
const OID_MAX = new V.ObjectId('ffffffffffffffffffffffff');
const bracket = { 3: [-Infinity, Infinity], 4: ['', MAX_STRING], 8: [OID_MIN, OID_MAX] };

function cmpBound(v, b) {
  if (b === MAX_STRING) return rankOf(v) === 3 || rankOf(v) === 4 || V.compareValues(v, '') < 0 ? -1 : 1;
  return V.compareValues(v, b);
}

/**
 * The range a condition puts on a field, bracketed by type as mongod brackets
 * index bounds ({$lt: 5} covers the numbers below 5, nothing else): {lo, hi,
 * exact} with {v, incl}; exact false when the condition has other operators
 * besides ($nin, $ne, ...: mongod applies them to what the bounds read, so
 * does scan()); null when the condition is not a range of one type.
 */
function rangeOf(cond) {
  if (!V.isPlainDoc(cond)) return null;
  const ks = V.keysOf(cond);
  let lo = null;
  let hi = null;
  let rank = null;
  let exact = true;
  for (const k of ks) {
    if (!RANGE_OPS.includes(k)) {
      exact = false;
      continue;
    }
    const v = cond[k];
    const r = rankOf(v);
    if (!r || (rank && r !== rank) || (r === 3 && Number.isNaN(V.numberOf(v)))) return null;
    rank = r;
    if (k === '$gt' || k === '$gte') lo = { v, incl: k === '$gte' };
    else hi = { v, incl: k === '$lte' };
  }
  if (!rank) return null;
  if (!lo) lo = { v: bracket[rank][0], incl: true };
  if (!hi) hi = { v: bracket[rank][1], incl: true };
  return { lo, hi, exact };
}

class SortedIndex {
  constructor(ix, records) {
    this.ix = ix;
    this.dirs = ix.fields.map((f) => sign(V.numberOf(ix.keyDoc[f])));
    this.entries = new SortedList((a, b) => this.cmp(a, b));
    for (const rec of records) this.add(rec);
  }

  keysOf(doc) { return this.ix.keysFor(doc).map((k) => k.values); }

  cmp(a, b) {
    for (let i = 0; i < this.dirs.length; i++) {
      const c = V.compareValues(a.k[i], b.k[i]) * this.dirs[i];
      if (c) return c;
    }
    return a.rec.seq - b.rec.seq;
  }

  add(rec) {
    for (const k of this.keysOf(rec.doc)) this.entries.insert({ k, rec });
  }

  remove(rec) {
    for (const k of this.keysOf(rec.doc)) this.entries.remove({ k, rec }, (e) => e.rec === rec);
  }

  /** -1, 0 or 1: entry e is before, inside or after the plan's bounds, in index order. */
  where(e, plan) {
    for (let j = 0; j < plan.eq.length; j++) {
      const c = V.compareValues(e.k[j], plan.eq[j]) * this.dirs[j];
      if (c) return sign(c);
    }
    if (plan.range) {
      const v = e.k[plan.eq.length];
      const d = this.dirs[plan.eq.length];
      const { lo, hi } = plan.range;
      const below = cmpBound(v, lo.v) < 0 || (cmpBound(v, lo.v) === 0 && !lo.incl);
      const above = cmpBound(v, hi.v) > 0 || (cmpBound(v, hi.v) === 0 && !hi.incl);
      if (below) return -d;
      if (above) return d;
    }
    return 0;
  }

  /** The first position whose entry is at or after side (0: inside, 1: after). */
  edge(plan, side) {
    return this.entries.bound((e) => this.where(e, plan) < side);
  }
}

function hintMatches(ix, hint) {
  if (typeof hint === 'string') return ix.name === hint;
  if (!V.isPlainDoc(hint)) return false;
  const ks = V.keysOf(hint);
  return ks.length === ix.fields.length && ks.every((k, i) => k === ix.fields[i]
    && sign(V.numberOf(hint[k])) === sign(V.numberOf(ix.keyDoc[k])));
}

/** A hint mongod would take: an index name or key pattern ({$natural} is a collection scan). */
const isIndexHint = (hint) => typeof hint === 'string' || (V.isPlainDoc(hint) && !V.keysOf(hint).includes('$natural'));

/**
 * The plan for a filter and sort on coll: the hinted index, else the index
 * that bounds the scan most and gives the sort; null when none gives the sort
 * (the caller's other ways apply). bounded: also an index the filter bounds by
 * equalities and a range without a sort (a write's {g, s: {$gte: P}}, read
 * off {g, s} as mongod reads it, not every document of g; a delete's search
 * for leftovers, {g: {$gte: A, $lte: B, $nin: [...]}}, off {g, ...} between A
 * and B, not every document). equalityValue:
 * store.js's.
 */
function plan(coll, filter, sort, hint, equalityValue, bounded = false) {
  const sortKeys = sort ? V.keysOf(sort).filter((k) => V.isNumeric(sort[k])) : [];
  let best = null;
  const hinted = isIndexHint(hint);
  for (const ix of coll.indexes.values()) {
    if (hinted ? !hintMatches(ix, hint) : ix.partial || ix.sparse) continue;
    const f = ix.fields;
    const eq = [];
    while (eq.length < f.length) {
      const v = equalityValue(filter[f[eq.length]]);
      if (v === undefined) break;
      eq.push(v);
    }
    const range = eq.length < f.length ? rangeOf(filter[f[eq.length]]) : null;
    const dirs = f.map((x) => sign(V.numberOf(ix.keyDoc[x])));
    const rest = sortKeys.filter((k) => !f.slice(0, eq.length).includes(k));
    let dir = 1;
    let provided = true;
    rest.forEach((k, j) => {
      const i = eq.length + j;
      const s = sign(V.numberOf(sort[k])) * (dirs[i] || 1);
      if (f[i] !== k || (j > 0 && s !== dir)) provided = false;
      else if (j === 0) dir = s;
    });
    if (!hinted && !(provided && sortKeys.length) && !(bounded && range)) continue;
    const score = eq.length * 4 + (range ? 2 : 0) + (provided ? 1 : 0);
    if (!best || score > best.score) best = { ix, eq, range, provided, dir, score };
  }
  if (hinted && !best) {
    throw new CommandError(2, 'error processing query: planner returned error :: caused by :: hint provided does not correspond to an existing index', 'BadValue');
  }
  return best;
}

const describe = (ix) => `IXSCAN { ${ix.fields.map((f) => `${f}: ${V.numberOf(ix.keyDoc[f])}`).join(', ')} }`;

/**
 * The records a plan reads, in index order (or its reverse), each checked
 * against the whole filter; stops at limit (0: all) when the index gives the sort.
 */
function scan(coll, p, filter, limit, qview) {
  let sorted = coll.sortedIndexes.get(p.ix.name);
  if (!sorted) {
    sorted = new SortedIndex(p.ix, coll.records.values());
    coll.sortedIndexes.set(p.ix.name, sorted);
  }
  // a filter that is only the bounds (equalities, then one range) matches
  // every entry between them: no query to compile and run per document
  const bounds = p.ix.fields.slice(0, p.eq.length + (p.range ? 1 : 0));
  const fk = V.keysOf(filter);
  let query = null;
  if (fk.length !== bounds.length || !fk.every((k) => bounds.includes(k))
      || (p.range && !p.range.exact) || p.eq.some((v) => V.bsonType(v) === 'binData')) {
    try {
      query = new Query(V.toQ(filter));
    } catch (e) {
      throw new CommandError(2, e.message, 'BadValue');
    }
  }
  const from = sorted.edge(p, 0);
  const to = sorted.edge(p, 1);
  const out = [];
  const seen = new Set();
  let keys = 0;
  let docs = 0;
  for (const { rec } of sorted.entries.range(from, to, p.dir)) {
    keys++;
    if (seen.has(rec)) continue;
    seen.add(rec);
    docs++;
    if (query && !query.test(qview(rec))) continue;
    out.push(rec);
    if (limit > 0 && p.provided && out.length >= limit) break;
  }
  note(keys, docs, describe(p.ix));
  return out;
}

module.exports = { stats, resetStats, uncounted, note, plan, scan, SortedIndex };
