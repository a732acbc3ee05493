'use strict';
// Command handlers.  Each handler gets (cmd, ctx) where cmd is the typed
// command document and ctx = {store, db, cursors, conn}; it returns the reply
// document or throws a CommandError.

const { Aggregator, Query } = require('mingo');
const V = require('./values');
const { CommandError } = require('./errors');
const { Index, Collection, canon, equalityValue } = require('./store');
const { applyUpdate, upsertSeed, isOperatorDoc } = require('./update');
const Scan = require('./scan');
const Profile = require('./profile');

const { Long } = V;
const MAX_BSON = 16 * 1024 * 1024;
const MAX_BATCH_BYTES = MAX_BSON - 64 * 1024; // leave room for the reply envelope
const VERSION = '4.4.0-convo-standin'; // and maxWireVersion 9: it refuses what 4.4 refuses

// ---------------------------------------------------------------------------
// Small helpers.

const num = (v, dflt) => (v === undefined || v === null ? dflt : V.numberOf(v));
const truthy = (v) => (typeof v === 'boolean' ? v : V.isNumeric(v) ? V.numberOf(v) !== 0 : v !== undefined && v !== null);
const has = (o, k) => Object.prototype.hasOwnProperty.call(o, k);

function collName(cmd, field) {
  const n = cmd[field];
  if (typeof n !== 'string' || !n) {
    throw new CommandError(73, `collection name has invalid type ${V.bsonType(n)}`, 'InvalidNamespace');
  }
  return n;
}

/** Same bytes when serialised (used to decide whether an update modified a doc). */
function sameDoc(a, b) {
  return Buffer.compare(V.encode(a), V.encode(b)) === 0;
}

// ---------------------------------------------------------------------------
// Sorting and projection on typed documents.

function sortKey(doc, path, dir) {
  let best;
  let first = true;
  for (const v of V.valuesAtPath(doc, path)) {
    const vals = Array.isArray(v) ? (v.length ? v : [undefined]) : [v];
    for (const x of vals) {
      if (first || V.compareValues(x, best) * dir < 0) best = x;
      first = false;
    }
  }
  return best;
}

/** Stable sort of typed documents by a sort spec like {a: 1, b: -1}. */
function sortDocs(docs, spec) {
  if (spec && V.keysOf(spec)[0] === '$natural') return V.numberOf(spec.$natural) < 0 ? docs.slice().reverse() : docs;
  const keys = V.keysOf(spec || {}).filter((k) => V.isNumeric(spec[k]) && k !== '$natural');
  if (!keys.length) return docs;
  const dirs = keys.map((k) => (V.numberOf(spec[k]) < 0 ? -1 : 1));
  const decorated = docs.map((d) => ({ d, k: keys.map((p, i) => sortKey(d, p, dirs[i])) }));
  decorated.sort((a, b) => {
    for (let i = 0; i < keys.length; i++) {
      const c = V.compareValues(a.k[i], b.k[i]) * dirs[i];
      if (c) return c;
    }
    return 0;
  });
  return decorated.map((x) => x.d);
}

/**
 * The first `n` documents in `spec` order, without sorting them all: a find
 * with a sort and a small limit (the top batch of a thread) stays linear.
 * Ties keep natural order, as sortDocs does.
 */
function topDocs(docs, spec, n) {
  const keys = V.keysOf(spec).filter((k) => V.isNumeric(spec[k]) && k !== '$natural');
  if (!keys.length || keys.length !== V.keysOf(spec).length) return sortDocs(docs, spec).slice(0, n);
  const dirs = keys.map((k) => (V.numberOf(spec[k]) < 0 ? -1 : 1));
  const cmpKeys = (a, b) => {
    for (let i = 0; i < keys.length; i++) {
      const c = V.compareValues(a[i], b[i]) * dirs[i];
      if (c) return c;
    }
    return 0;
  };
  const best = []; // {d, k}, sorted
  for (const d of docs) {
    const k = keys.map((p, i) => sortKey(d, p, dirs[i]));
    if (best.length === n && cmpKeys(k, best[n - 1].k) >= 0) continue;
    let at = best.length;
    while (at > 0 && cmpKeys(k, best[at - 1].k) < 0) at--;
    best.splice(at, 0, { d, k });
    if (best.length > n) best.pop();
  }
  return best.map((x) => x.d);
}

const TOP_LIMIT = 64; // sort + limit up to this many: selection instead of a full sort

/** The typed documents a find with this filter, sort, skip and limit returns. */
function findDocs(coll, filter, sort, skip, limit, hint) {
  if (!coll) return [];
  const hasSort = sort && V.keysOf(sort).length > 0;
  const sorted = hasSort && limit > 0 && hint === undefined ? coll.sortedMatch(filter || {}, sort, skip + limit) : null;
  if (sorted) return sorted.slice(skip).map((r) => r.doc);
  const scanned = hint !== undefined || hasSort ? coll.indexScan(filter || {}, sort, limit > 0 ? skip + limit : 0, hint) : null;
  if (scanned) {
    let docs = scanned.recs.map((r) => r.doc);
    if (hasSort && !scanned.sorted) docs = sortDocs(docs, sort);
    return docs.slice(skip, limit > 0 ? skip + limit : undefined);
  }
  let docs = coll.match(filter, !hasSort && limit > 0 ? skip + limit : 0).map((r) => r.doc);
  if (hasSort && limit > 0 && skip + limit <= TOP_LIMIT && V.keysOf(sort)[0] !== '$natural') {
    docs = topDocs(docs, sort, skip + limit);
  } else if (hasSort) {
    docs = sortDocs(docs, sort);
  }
  return docs.slice(skip, limit > 0 ? skip + limit : undefined);
}

/** Build a projection function for a find-style projection document. */
function makeProjector(proj) {
  if (!V.isPlainDoc(proj) || V.keysOf(proj).length === 0) return null;
  const keys = V.keysOf(proj);
  const simple = keys.every((k) => typeof proj[k] === 'boolean' || V.isNumeric(proj[k]));
  if (!simple) {
    // $slice, $elemMatch, expressions: let mingo do it and restore the types.
    const qproj = V.toQ(proj);
    return (doc) => V.restore(new Query({}).find([V.toQ(doc)], qproj).all()[0], doc);
  }
  const others = keys.filter((k) => k !== '_id');
  const inclusion = others.length ? truthy(proj[others[0]]) : truthy(proj._id);
  for (const k of others) {
    if (truthy(proj[k]) !== inclusion) {
      throw inclusion
        ? new CommandError(31254, `Cannot do exclusion on field ${k} in inclusion projection`, 'Location31254')
        : new CommandError(31253, `Cannot do inclusion on field ${k} in exclusion projection`, 'Location31253');
    }
  }
  // Tree of paths: {a: {b: true}, c: true}
  const tree = {};
  const paths = others.slice();
  if (inclusion && (proj._id === undefined || truthy(proj._id))) paths.push('_id');
  if (!inclusion && proj._id !== undefined && !truthy(proj._id)) paths.push('_id');
  for (const p of paths) {
    const segs = p.split('.');
    let t = tree;
    segs.forEach((s, i) => {
      if (i === segs.length - 1) t[s] = true;
      else {
        if (t[s] === true) return;
        t[s] = t[s] || {};
        t = t[s];
      }
    });
  }
  if (inclusion) {
    const include = (src, t) => {
      const out = {};
      for (const k of V.keysOf(src)) {
        if (!has(t, k)) continue;
        const v = src[k];
        if (t[k] === true) V.setKey(out, k, V.clone(v));
        else if (V.isPlainDoc(v)) V.setKey(out, k, include(v, t[k]));
        else if (Array.isArray(v)) V.setKey(out, k, includeArr(v, t[k]));
      }
      return out;
    };
    const includeArr = (arr, t) => arr
      .filter((el) => V.isPlainDoc(el) || Array.isArray(el))
      .map((el) => (Array.isArray(el) ? includeArr(el, t) : include(el, t)));
    return (doc) => include(doc, tree);
  }
  const exclude = (obj, t) => {
    for (const k of Object.keys(t)) {
      if (!has(obj, k)) continue;
      if (t[k] === true) V.deleteKey(obj, k);
      else excludeIn(obj[k], t[k]);
    }
  };
  const excludeIn = (v, t) => {
    if (V.isPlainDoc(v)) exclude(v, t);
    else if (Array.isArray(v)) v.forEach((el) => excludeIn(el, t));
  };
  return (doc) => {
    const out = V.clone(doc);
    exclude(out, tree);
    return out;
  };
}

// ---------------------------------------------------------------------------
// Cursors.

class Cursors {
  constructor() {
    this.map = new Map();
    this.nextId = 1000;
  }

  register(cur) {
    const id = Long.fromNumber(this.nextId++);
    cur.id = id;
    cur.lastUsed = Date.now();
    this.map.set(id.toString(), cur);
    return id;
  }

  get(id) { return this.map.get(String(id)); }

  delete(id) { return this.map.delete(String(id)); }

  /** Drop cursors idle for more than 10 minutes (MongoDB's default timeout). */
  sweep(now) {
    for (const [k, c] of this.map) if (now - c.lastUsed > 10 * 60 * 1000) this.map.delete(k);
  }
}

/** Take up to `n` documents from a cursor, staying below the 16 MiB reply limit. */
function takeBatch(cur, n) {
  const out = [];
  let size = 0;
  while (cur.pos < cur.docs.length && out.length < n) {
    const d = cur.project ? cur.project(cur.docs[cur.pos]) : cur.docs[cur.pos];
    const s = V.BSON.calculateObjectSize(V.toWire(d), { ignoreUndefined: true });
    if (out.length && size + s > MAX_BATCH_BYTES) break;
    out.push(d);
    size += s;
    cur.pos++;
  }
  return out;
}

/** Standard {cursor: {firstBatch, id, ns}} reply; registers a cursor if docs remain. */
function cursorReply(ctx, ns, docs, opts = {}) {
  const cur = { ns, docs, pos: 0, project: opts.project || null };
  const batchSize = opts.batchSize === undefined ? 101 : opts.batchSize;
  const batch = takeBatch(cur, batchSize);
  let id = Long.ZERO;
  if (!opts.singleBatch && cur.pos < docs.length) id = ctx.cursors.register(cur);
  return { cursor: { firstBatch: batch, id, ns }, ok: 1 };
}

function batchSizeOf(cmd, field = 'batchSize') {
  const src = field === 'cursor' ? cmd.cursor || {} : cmd;
  const key = field === 'cursor' ? 'batchSize' : field;
  if (src[key] === undefined) return undefined;
  const n = num(src[key]);
  if (n < 0) throw new CommandError(2, `BatchSize value must be non-negative, but received: ${n}`, 'BadValue');
  return n;
}

// ---------------------------------------------------------------------------
// Handshake and server information.

function helloReply(cmd, ctx, legacy) {
  const r = {};
  if (truthy(cmd.helloOk)) r.helloOk = true;
  if (legacy) r.ismaster = true;
  else r.isWritablePrimary = true;
  Object.assign(r, {
    maxBsonObjectSize: MAX_BSON,
    maxMessageSizeBytes: 48000000,
    maxWriteBatchSize: 100000,
    localTime: new Date(),
    logicalSessionTimeoutMinutes: 30,
    connectionId: ctx.conn.id,
    minWireVersion: 0,
    maxWireVersion: 9,
    readOnly: false,
    ok: 1,
  });
  return r;
}

// ---------------------------------------------------------------------------
// Writes.

/** Build the document inserted by an upsert. */
function upsertDoc(query, update) {
  const seed = upsertSeed(query);
  if (Array.isArray(update) || isOperatorDoc(update)) return applyUpdate(seed, update, { isInsert: true });
  const doc = V.clone(update);
  if (doc._id === undefined && seed._id !== undefined) V.setKey(doc, '_id', seed._id);
  return doc;
}

/** Apply an update to one record; returns {modified, doc}. */
function updateRecord(coll, rec, u) {
  const newDoc = applyUpdate(rec.doc, u);
  if (newDoc._id === undefined || !V.valuesEqual(newDoc._id, rec.doc._id)) {
    throw new CommandError(66, "Performing an update on the path '_id' would modify the immutable field '_id'", 'ImmutableField');
  }
  if (sameDoc(newDoc, rec.doc)) return { modified: false, doc: rec.doc };
  coll.replace(rec, newDoc);
  return { modified: true, doc: newDoc };
}

function cmdInsert(cmd, ctx) {
  const coll = ctx.db.ensure(collName(cmd, 'insert'));
  const docs = cmd.documents || [];
  const ordered = cmd.ordered === undefined ? true : truthy(cmd.ordered);
  let n = 0;
  const writeErrors = [];
  for (let i = 0; i < docs.length; i++) {
    try {
      if (!V.isPlainDoc(docs[i])) throw new CommandError(2, 'document to insert must be an object', 'BadValue');
      coll.insert(docs[i]);
      n++;
    } catch (e) {
      if (!(e instanceof CommandError)) throw e;
      writeErrors.push(e.toWriteError(i));
      if (ordered) break;
    }
  }
  const r = { n, ok: 1 };
  if (writeErrors.length) r.writeErrors = writeErrors;
  return r;
}

function cmdUpdate(cmd, ctx) {
  const coll = ctx.db.ensure(collName(cmd, 'update'));
  const ordered = cmd.ordered === undefined ? true : truthy(cmd.ordered);
  let n = 0;
  let nModified = 0;
  const upserted = [];
  const writeErrors = [];
  (cmd.updates || []).forEach((spec, i) => {
    if (ordered && writeErrors.length) return;
    try {
      const q = spec.q || {};
      const u = spec.u;
      const multi = truthy(spec.multi);
      if (multi && !Array.isArray(u) && !isOperatorDoc(u)) {
        throw new CommandError(9, 'multi update is not supported for replacement-style update', 'FailedToParse');
      }
      const recs = coll.match(q, multi ? 0 : 1);
      if (!recs.length && truthy(spec.upsert)) {
        const rec = coll.insert(upsertDoc(q, u));
        n++;
        upserted.push({ index: i, _id: rec.doc._id });
        return;
      }
      for (const rec of recs) {
        const r = updateRecord(coll, rec, u);
        n++;
        if (r.modified) nModified++;
      }
    } catch (e) {
      if (!(e instanceof CommandError)) throw e;
      writeErrors.push(e.toWriteError(i));
    }
  });
  const r = { n, nModified, ok: 1 };
  if (upserted.length) r.upserted = upserted;
  if (writeErrors.length) r.writeErrors = writeErrors;
  return r;
}

function cmdDelete(cmd, ctx) {
  const coll = ctx.db.get(collName(cmd, 'delete'));
  const ordered = cmd.ordered === undefined ? true : truthy(cmd.ordered);
  let n = 0;
  const writeErrors = [];
  (cmd.deletes || []).forEach((spec, i) => {
    if (!coll || (ordered && writeErrors.length)) return;
    try {
      const limit = num(spec.limit, 0);
      for (const rec of coll.match(spec.q || {}, limit === 1 ? 1 : 0)) {
        coll.remove(rec);
        n++;
      }
    } catch (e) {
      if (!(e instanceof CommandError)) throw e;
      writeErrors.push(e.toWriteError(i));
    }
  });
  const r = { n, ok: 1 };
  if (writeErrors.length) r.writeErrors = writeErrors;
  return r;
}

function cmdFindAndModify(cmd, ctx) {
  const name = collName(cmd, Object.keys(cmd)[0]);
  const query = cmd.query || {};
  const remove = truthy(cmd.remove);
  const upsert = truthy(cmd.upsert);
  const returnNew = truthy(cmd.new);
  const update = cmd.update;
  if (!remove && update === undefined) throw new CommandError(9, 'Either an update or remove=true must be specified', 'FailedToParse');
  if (remove && (update !== undefined || upsert || returnNew)) {
    throw new CommandError(9, 'Cannot specify remove=true together with update, upsert or new', 'FailedToParse');
  }
  const project = makeProjector(cmd.fields);
  const out = (doc) => (doc ? (project ? project(doc) : doc) : null);
  const coll = upsert ? ctx.db.ensure(name) : ctx.db.get(name);
  let rec = null;
  if (coll) {
    const recs = cmd.sort ? coll.match(query) : coll.match(query, 1);
    if (recs.length) {
      rec = cmd.sort ? sortDocs(recs.map((r) => r.doc), cmd.sort).map((d) => recs.find((r) => r.doc === d))[0] : recs[0];
    }
  }
  if (remove) {
    if (!rec) return { lastErrorObject: { n: 0 }, value: null, ok: 1 };
    coll.remove(rec);
    return { lastErrorObject: { n: 1 }, value: out(rec.doc), ok: 1 };
  }
  if (rec) {
    const before = rec.doc;
    const r = updateRecord(coll, rec, update);
    return { lastErrorObject: { n: 1, updatedExisting: true }, value: out(returnNew ? r.doc : before), ok: 1 };
  }
  if (upsert) {
    const created = coll.insert(upsertDoc(query, update));
    return {
      lastErrorObject: { n: 1, updatedExisting: false, upserted: created.doc._id },
      value: returnNew ? out(created.doc) : null,
      ok: 1,
    };
  }
  return { lastErrorObject: { n: 0, updatedExisting: false }, value: null, ok: 1 };
}

// ---------------------------------------------------------------------------
// Reads.

function cmdFind(cmd, ctx) {
  const name = collName(cmd, 'find');
  const ns = `${ctx.db.name}.${name}`;
  const coll = ctx.db.get(name);
  let limit = num(cmd.limit, 0);
  let singleBatch = truthy(cmd.singleBatch);
  if (limit < 0) { limit = -limit; singleBatch = true; }
  const skip = num(cmd.skip, 0);
  if (skip < 0) throw new CommandError(2, `Skip value must be non-negative, but received: ${skip}`, 'BadValue');
  const project = makeProjector(cmd.projection);
  const docs = findDocs(coll, cmd.filter, cmd.sort, skip, limit, cmd.hint);
  // docs is already cut to skip/limit, so the cursor simply runs dry.
  return cursorReply(ctx, ns, docs, { batchSize: batchSizeOf(cmd), singleBatch, project });
}

function cmdGetMore(cmd, ctx) {
  const id = cmd.getMore;
  const cur = ctx.cursors.get(id);
  if (!cur) throw new CommandError(43, `cursor id ${String(id)} not found`, 'CursorNotFound');
  cur.lastUsed = Date.now();
  const batch = takeBatch(cur, cmd.batchSize !== undefined && num(cmd.batchSize) > 0 ? num(cmd.batchSize) : Infinity);
  let outId = cur.id;
  if (cur.pos >= cur.docs.length) {
    ctx.cursors.delete(id);
    outId = Long.ZERO;
  }
  return { cursor: { nextBatch: batch, id: outId, ns: cur.ns }, ok: 1 };
}

function cmdKillCursors(cmd, ctx) {
  const killed = [];
  const notFound = [];
  for (const id of cmd.cursors || []) (ctx.cursors.delete(id) ? killed : notFound).push(id);
  return { cursorsKilled: killed, cursorsNotFound: notFound, cursorsAlive: [], cursorsUnknown: [], ok: 1 };
}

function cmdCount(cmd, ctx) {
  const coll = ctx.db.get(collName(cmd, 'count'));
  let n = coll ? coll.match(cmd.query || {}).length : 0;
  n = Math.max(0, n - num(cmd.skip, 0));
  const limit = Math.abs(num(cmd.limit, 0));
  if (limit > 0) n = Math.min(n, limit);
  return { n, ok: 1 };
}

function cmdDistinct(cmd, ctx) {
  const coll = ctx.db.get(collName(cmd, 'distinct'));
  const values = [];
  if (coll) {
    for (const rec of coll.match(cmd.query || {})) {
      for (const v of V.valuesAtPath(rec.doc, cmd.key)) {
        for (const x of Array.isArray(v) ? v : [v]) {
          if (x !== undefined && !values.some((y) => V.valuesEqual(x, y))) values.push(x);
        }
      }
    }
  }
  values.sort(V.compareValues);
  return { values, ok: 1 };
}

/** The one document a leading $collStats stage produces. */
function collStatsDoc(spec, coll, ns) {
  const stats = { ns, host: 'convo-standin', localTime: new Date() };
  const missing = (what) => new CommandError(26, `Unable to retrieve ${what} in $collStats stage :: caused by :: Collection [${ns}] not found.`, 'NamespaceNotFound');
  if (spec.storageStats !== undefined) {
    if (!coll) throw missing('storageStats');
    stats.storageStats = storageStats(coll, scaleOf(V.isPlainDoc(spec.storageStats) ? spec.storageStats.scale : undefined));
  }
  if (spec.count !== undefined) {
    if (!coll) throw missing('count');
    stats.count = coll.records.size;
  }
  return stats;
}

/**
 * Type hints for an aggregation result: its source object, or for a new object
 * (after $addFields, $project, $lookup) the stored document with the same _id.
 */
function hintIn(coll, d) {
  const origin = V.originOf(d);
  if (origin || !coll || !V.isPlainDoc(d) || d._id === undefined) return origin;
  const rec = coll.indexes.get('_id_').entries.get(canon(d._id));
  return rec ? rec.doc : undefined;
}

/**
 * A $project of top-level fields only, all excluded or all included (_id
 * included unless excluded): a shallow copy that keeps the other values as
 * they are (typed, or query views with their origins).  null for anything
 * else, which mingo runs.  (Each mingo Aggregator costs a copy of its operator
 * tables; an append's aggregate would pay it twice.)
 */
function simpleProjection(spec) {
  if (!V.isPlainDoc(spec)) return null;
  const keys = V.keysOf(spec);
  if (!keys.length || keys.some((k) => k.includes('.') || k.startsWith('$') || !(typeof spec[k] === 'boolean' || V.isNumeric(spec[k])))) return null;
  const others = keys.filter((k) => k !== '_id');
  const on = (k) => truthy(spec[k]);
  if (others.length && others.some((k) => on(k) !== on(others[0]))) return null;
  const inclusion = others.length ? on(others[0]) : on('_id');
  const named = new Set(others);
  const keepId = spec._id === undefined ? true : on('_id');
  return (doc) => {
    const out = {};
    for (const k of V.keysOf(doc)) {
      const keep = k === '_id' ? keepId : inclusion === named.has(k);
      if (keep && doc[k] !== undefined) V.setKey(out, k, doc[k]);
    }
    return out;
  };
}

// ---------------------------------------------------------------------------
// What a MongoDB 4.4 server refuses in a pipeline.

/** Stages MongoDB added after 4.4 (5.0 and later). */
const NEWER_STAGES = new Set(['$setWindowFields', '$densify', '$fill', '$documents',
  '$changeStreamSplitLargeEvent', '$shardedDataDistribution', '$querySettings']);
/** Expression, accumulator and window operators MongoDB added after 4.4. */
const NEWER_OPERATORS = new Set(['$getField', '$setField', '$unsetField', '$dateAdd', '$dateSubtract',
  '$dateDiff', '$dateTrunc', '$sampleRate', '$tsSecond', '$tsIncrement', '$top', '$topN', '$bottom',
  '$bottomN', '$firstN', '$lastN', '$maxN', '$minN', '$sortArray', '$bitAnd', '$bitOr', '$bitXor',
  '$bitNot', '$median', '$percentile', '$locf', '$linearFill', '$shift', '$covariancePop',
  '$covarianceSamp', '$derivative', '$integral', '$expMovingAvg', '$denseRank', '$rank',
  '$documentNumber', '$toHashedIndexKey', '$toUUID']);

/** A $lookup's arguments as mongod 4.4 checks them (document_source_lookup.cpp). */
function checkLookup(l) {
  if (!V.isPlainDoc(l)) throw new CommandError(9, "the $lookup specification must be an Object, but found type " + V.bsonType(l), 'FailedToParse');
  if (typeof l.from !== 'string' || !l.from) throw new CommandError(9, "must specify 'from' field for a $lookup", 'FailedToParse');
  if (typeof l.as !== 'string' || !l.as) throw new CommandError(9, "must specify 'as' field for a $lookup", 'FailedToParse');
  if (l.pipeline !== undefined) {
    // MongoDB 5.0 joins on fields and then runs the pipeline; 4.4 refuses it.
    if (l.localField !== undefined || l.foreignField !== undefined) {
      throw new CommandError(9, "$lookup with 'pipeline' may not specify 'localField' or 'foreignField'", 'FailedToParse');
    }
  } else if (l.localField === undefined || l.foreignField === undefined) {
    throw new CommandError(9, "$lookup requires either 'pipeline' or both 'localField' and 'foreignField' to be specified", 'FailedToParse');
  }
}

/** Throws what mongod 4.4 answers to a stage or operator it does not know. */
function checkOperators(v) {
  if (Array.isArray(v)) {
    for (const x of v) checkOperators(x);
  } else if (V.isPlainDoc(v)) {
    for (const k of V.keysOf(v)) {
      if (NEWER_OPERATORS.has(k)) throw new CommandError(168, `Unrecognized expression '${k}'`, 'InvalidPipelineOperator');
      checkOperators(v[k]);
    }
  }
}

/** Refuses a pipeline (and its $lookup, $facet and $unionWith sub-pipelines) as mongod 4.4 does. */
function checkPipeline(pipeline) {
  for (const st of pipeline) {
    if (!V.isPlainDoc(st)) continue;
    const [name] = V.keysOf(st);
    if (NEWER_STAGES.has(name)) throw new CommandError(40324, `Unrecognized pipeline stage name: '${name}'`, 'Location40324');
    const arg = st[name];
    if (name === '$lookup') {
      checkLookup(arg);
      if (Array.isArray(arg.pipeline)) checkPipeline(arg.pipeline);
      checkOperators(arg.let);
    } else if (name === '$facet' && V.isPlainDoc(arg)) {
      for (const k of V.keysOf(arg)) if (Array.isArray(arg[k])) checkPipeline(arg[k]);
    } else if (name === '$unionWith' && V.isPlainDoc(arg) && Array.isArray(arg.pipeline)) {
      checkPipeline(arg.pipeline);
    } else {
      checkOperators(arg);
    }
  }
}

// ---------------------------------------------------------------------------
// $lookup through the indexes.

/** A $lookup this file runs itself: joined on fields, or by `let` and a leading $expr equality. */
function isFieldLookup(stage) {
  if (!V.isPlainDoc(stage) || !has(stage, '$lookup')) return false;
  const l = stage.$lookup;
  if (l.localField !== undefined && l.let !== undefined) throw new CommandError(2, '$lookup with localField, foreignField and let is not supported by the convo stand-in', 'BadValue');
  return l.localField !== undefined || exprJoin(l) !== null;
}

const plainPath = (p) => typeof p === 'string' && /^\$[^$.]+$/.test(p);

/**
 * The join of a {let, pipeline} $lookup whose pipeline starts with
 * {$match: {$expr: {$eq: ['$field', '$$v']}, ...}} where v is let to '$local'
 * (top-level fields): {field, local, match (the other conditions)}; else null.
 */
function exprJoin(l) {
  if (!V.isPlainDoc(l.let) || !Array.isArray(l.pipeline)) return null;
  const first = l.pipeline[0];
  if (!V.isPlainDoc(first) || !has(first, '$match') || !V.isPlainDoc(first.$match)) return null;
  const e = first.$match.$expr;
  if (!V.isPlainDoc(e) || V.keysOf(e).length !== 1 || !Array.isArray(e.$eq) || e.$eq.length !== 2) return null;
  const [x, y] = e.$eq;
  const varOf = (v) => (typeof v === 'string' && /^\$\$[a-z][A-Za-z0-9_]*$/.test(v) ? v.slice(2) : null);
  const [fieldRef, name] = plainPath(x) && varOf(y) ? [x, varOf(y)] : plainPath(y) && varOf(x) ? [y, varOf(x)] : [null, null];
  if (!fieldRef || V.keysOf(l.let).length !== 1 || !plainPath(l.let[name])) return null;
  const match = {};
  for (const k of V.keysOf(first.$match)) if (k !== '$expr') match[k] = first.$match[k];
  return { field: fieldRef.slice(1), local: l.let[name].slice(1), match };
}

/** $eq of aggregation expressions on two top-level values (undefined: missing). */
function aggEqual(a, b) {
  if (a === undefined || b === undefined) return a === b;
  return V.valuesEqual(a, b);
}

/**
 * $lookup {from, localField, foreignField, as} or {from, let, pipeline, as}
 * with the join as a leading $expr equality: for each input document, the
 * foreign documents that join it, found like a find: the join condition and a
 * leading $match, $sort and $limit of the pipeline go through the collection's
 * indexes; the rest of the pipeline runs in mingo.  (mingo's own $lookup scans
 * the whole foreign collection, and its $expr $eq also matches array elements
 * and null against missing.)  An $expr join on a value no index holds (missing,
 * null, an array, a document) scans the collection and compares in JS.
 */
function fieldLookup(spec, docs, options, ctx) {
  const coll = ctx.db.get(spec.from);
  const join = spec.localField === undefined ? exprJoin(spec) : null;
  const sub = Array.isArray(spec.pipeline) ? spec.pipeline : [];
  const stage = (i, op) => sub[i] && V.isPlainDoc(sub[i]) && has(sub[i], op);
  let i = 0;
  let match = {};
  let sort = null;
  let limit = 0;
  if (join) {
    match = join.match;
    i = 1;
  } else if (stage(i, '$match')) {
    match = sub[i++].$match;
  }
  if (stage(i, '$sort')) sort = sub[i++].$sort;
  if (stage(i, '$limit')) limit = num(sub[i++].$limit);
  const projections = [];
  for (let p; stage(i, '$project') && (p = simpleProjection(sub[i].$project)); i++) projections.push(p);
  const rest = sub.slice(i);
  const both = (cond, f) => (has(match, f) || has(match, '$nor') ? { $and: [cond, match] } : { ...cond, ...match });
  const joinedBy = (d) => {
    if (!join) {
      const local = [];
      for (const v of V.valuesAtPath(d, spec.localField)) {
        for (const x of Array.isArray(v) ? v : [v]) local.push(x === undefined ? null : V.restore(x));
      }
      const cond = local.length === 1 ? { $eq: local[0] } : { $in: local };
      return findDocs(coll, both({ [spec.foreignField]: cond }, spec.foreignField), sort, 0, limit);
    }
    const f = join.field;
    const v = d[join.local] === undefined ? undefined : V.restore(d[join.local]);
    if (v !== undefined && equalityValue(v) !== undefined) {
      // A query equality also matches arrays holding v, an $expr $eq does not:
      // when one came back, ask again without them (mingo then checks each).
      const found = findDocs(coll, both({ [f]: { $eq: v } }, f), sort, 0, limit);
      if (!found.some((doc) => Array.isArray(doc[f]))) return found;
      return findDocs(coll, both({ [f]: { $eq: v }, $nor: [{ [f]: { $type: 'array' } }] }, f), sort, 0, limit);
    }
    const all = findDocs(coll, match, null, 0, 0).filter((doc) => aggEqual(doc[f], v));
    const sorted = sort && V.keysOf(sort).length ? sortDocs(all, sort) : all;
    return limit > 0 ? sorted.slice(0, limit) : sorted;
  };
  return docs.map((d) => {
    let joined = joinedBy(d).map((doc) => V.toQ(projections.reduce((x, p) => p(x), doc)));
    if (rest.length) {
      joined = new Aggregator(rest.map(V.toQ), options).run(joined).map((r) => V.toQ(V.restore(r, hintIn(coll, r))));
    }
    const out = { ...d };
    out[spec.as] = joined;
    return out;
  });
}

/** Runs pipeline stages over query-view documents: mingo, but for field lookups. */
function runStages(pipeline, docs, options, ctx) {
  let seg = [];
  const flush = () => {
    if (seg.length) docs = new Aggregator(seg.map(V.toQ), options).run(docs);
    seg = [];
  };
  for (const st of pipeline) {
    const project = V.isPlainDoc(st) && has(st, '$project') ? simpleProjection(st.$project) : null;
    if (isFieldLookup(st)) {
      flush();
      const input = docs;
      docs = Scan.uncounted(() => fieldLookup(st.$lookup, input, options, ctx));
    } else if (project) {
      flush();
      docs = docs.map(project);
    } else {
      seg.push(st);
    }
  }
  flush();
  return docs;
}

function cmdAggregate(cmd, ctx) {
  if (!Array.isArray(cmd.pipeline)) throw new CommandError(14, "'pipeline' option must be specified as an array", 'TypeMismatch');
  if (truthy(cmd.explain)) throw new CommandError(2, 'explain is not supported by the convo stand-in', 'BadValue');
  const dbLevel = typeof cmd.aggregate !== 'string';
  const name = dbLevel ? null : cmd.aggregate;
  const ns = dbLevel ? `${ctx.db.name}.$cmd.aggregate` : `${ctx.db.name}.${name}`;
  let pipeline = cmd.pipeline;
  let outTarget = null;
  const last = pipeline[pipeline.length - 1];
  if (last && V.isPlainDoc(last) && has(last, '$out')) {
    outTarget = typeof last.$out === 'string' ? { db: ctx.db.name, coll: last.$out } : last.$out;
    pipeline = pipeline.slice(0, -1);
  }
  checkPipeline(pipeline);
  if (pipeline.some((s) => V.isPlainDoc(s) && has(s, '$merge'))) {
    throw new CommandError(2, '$merge is not supported by the convo stand-in', 'BadValue');
  }
  const view = (c) => (c ? [...c.records.values()].map((r) => V.toQ(r.doc)) : []);
  const coll = dbLevel ? null : ctx.db.get(name);
  let source = null;
  const first = pipeline[0];
  if (first && V.isPlainDoc(first) && has(first, '$collStats')) {
    source = [V.toQ(collStatsDoc(first.$collStats, coll, ns))];
    pipeline = pipeline.slice(1);
  } else if (coll && first && V.isPlainDoc(first) && has(first, '$match')) {
    // A leading $match is a find: it uses the collection's indexes; a $sort and
    // a $limit right after it go with it (mongod pushes them down too), and so
    // does the hint.
    const at = (i, op) => V.isPlainDoc(pipeline[i]) && has(pipeline[i], op);
    const sort = at(1, '$sort') ? pipeline[1].$sort : null;
    const limit = sort && at(2, '$limit') ? num(pipeline[2].$limit) : 0;
    if (sort || cmd.hint !== undefined) {
      source = findDocs(coll, first.$match, sort, 0, limit, cmd.hint).map((d) => V.toQ(d));
      pipeline = pipeline.slice(1 + (sort ? 1 : 0) + (limit ? 1 : 0));
    } else {
      source = coll.match(first.$match).map((r) => V.toQ(r.doc));
      pipeline = pipeline.slice(1);
    }
  }
  if (!source) source = view(coll);
  let results;
  try {
    const options = { collectionResolver: (n) => view(ctx.db.get(n)) };
    results = runStages(pipeline, source, options, ctx).map((d) => V.restore(d, hintIn(coll, d)));
  } catch (e) {
    if (e instanceof CommandError) throw e;
    throw new CommandError(2, e.message, 'BadValue');
  }
  if (outTarget) {
    const target = ctx.store.db(outTarget.db || ctx.db.name).ensure(outTarget.coll);
    for (const rec of [...target.records.values()]) target.remove(rec);
    for (const d of results) target.insert(d);
    results = [];
  }
  return cursorReply(ctx, ns, results, { batchSize: batchSizeOf(cmd, 'cursor') });
}

// ---------------------------------------------------------------------------
// Databases, collections and indexes.

/** storageSize + totalIndexSize of every collection of a database. */
function dbBytes(db) {
  let n = 0;
  for (const c of db.collections.values()) {
    const st = c.stats();
    n += st.storageSize + st.totalIndexSize;
  }
  return n;
}

function cmdListDatabases(cmd, ctx) {
  const sizes = !truthy(cmd.nameOnly) || cmd.filter !== undefined; // measuring walks every document
  let dbs = [...ctx.store.dbs.values()]
    .filter((d) => d.collections.size > 0)
    .map((d) => ({ name: d.name, sizeOnDisk: Long.fromNumber(sizes ? dbBytes(d) : 0), empty: false }));
  if (cmd.filter) {
    const q = new Query(V.toQ(cmd.filter));
    dbs = dbs.filter((d) => q.test(V.toQ(d)));
  }
  if (truthy(cmd.nameOnly)) return { databases: dbs.map((d) => ({ name: d.name })), ok: 1 };
  const total = dbs.reduce((s, d) => s + d.sizeOnDisk.toNumber(), 0);
  return { databases: dbs, totalSize: Long.fromNumber(total), totalSizeMb: Long.fromNumber(Math.floor(total / 1048576)), ok: 1 };
}

function cmdListCollections(cmd, ctx) {
  let entries = [...ctx.db.collections.values()].map((c) => ({
    name: c.name,
    type: 'collection',
    options: c.options,
    info: { readOnly: false, uuid: c.uuid },
    idIndex: { v: 2, key: { _id: 1 }, name: '_id_' },
  }));
  if (cmd.filter) {
    const q = new Query(V.toQ(cmd.filter));
    entries = entries.filter((e) => q.test(V.toQ(e)));
  }
  if (truthy(cmd.nameOnly)) entries = entries.map((e) => ({ name: e.name, type: e.type }));
  return cursorReply(ctx, `${ctx.db.name}.$cmd.listCollections`, entries, { batchSize: batchSizeOf(cmd, 'cursor') });
}

function cmdCreate(cmd, ctx) {
  const name = collName(cmd, 'create');
  if (ctx.db.get(name)) throw new CommandError(48, `Collection already exists. NS: ${ctx.db.name}.${name}`, 'NamespaceExists');
  const c = ctx.db.ensure(name);
  const opts = {};
  for (const k of V.keysOf(cmd)) {
    if (k === 'create' || k.startsWith('$') || ['lsid', 'txnNumber', 'writeConcern', 'comment'].includes(k)) continue;
    V.setKey(opts, k, cmd[k]);
  }
  c.options = opts;
  return { ok: 1 };
}

function cmdDrop(cmd, ctx) {
  const name = collName(cmd, 'drop');
  const c = ctx.db.get(name);
  if (!c) throw new CommandError(26, 'ns not found', 'NamespaceNotFound');
  ctx.db.collections.delete(name);
  return { nIndexesWas: c.indexes.size, ns: c.ns, ok: 1 };
}

function cmdDropDatabase(cmd, ctx) {
  ctx.store.dbs.delete(ctx.db.name);
  return { dropped: ctx.db.name, ok: 1 };
}

function cmdRenameCollection(cmd, ctx) {
  const [fromDb, ...fromRest] = String(cmd.renameCollection).split('.');
  const [toDb, ...toRest] = String(cmd.to).split('.');
  const src = ctx.store.db(fromDb).get(fromRest.join('.'));
  if (!src) throw new CommandError(26, 'source namespace does not exist', 'NamespaceNotFound');
  const dst = ctx.store.db(toDb);
  const toName = toRest.join('.');
  if (dst.get(toName)) {
    if (!truthy(cmd.dropTarget)) throw new CommandError(48, 'target namespace exists', 'NamespaceExists');
    dst.collections.delete(toName);
  }
  ctx.store.db(fromDb).collections.delete(src.name);
  src.db = dst;
  src.name = toName;
  dst.collections.set(toName, src);
  return { ok: 1 };
}

function defaultIndexName(key) {
  return V.keysOf(key).map((k) => `${k}_${V.isNumeric(key[k]) ? V.numberOf(key[k]) : String(key[k])}`).join('_');
}

function cmdCreateIndexes(cmd, ctx) {
  const name = collName(cmd, 'createIndexes');
  const existed = !!ctx.db.get(name);
  if (!Array.isArray(cmd.indexes) || !cmd.indexes.length) {
    throw new CommandError(2, 'Must specify at least one index to create', 'BadValue');
  }
  const coll = ctx.db.ensure(name);
  const before = coll.indexes.size;
  for (const raw of cmd.indexes) {
    if (!V.isPlainDoc(raw.key) || !V.keysOf(raw.key).length) {
      throw new CommandError(67, 'The index spec must contain a non-empty key document', 'CannotCreateIndex');
    }
    const spec = { v: 2, key: raw.key, name: raw.name || defaultIndexName(raw.key) };
    const modes = ctx.store.indexModes;
    if (truthy(raw.unique)) spec.unique = true;
    // --sparse-indexes=ignore / --partial-indexes=ignore: like servers that accept the
    // option and build the index over every document anyway
    if (truthy(raw.sparse) && modes.sparse !== 'ignore') spec.sparse = true;
    if (raw.expireAfterSeconds !== undefined) spec.expireAfterSeconds = raw.expireAfterSeconds;
    if (raw.partialFilterExpression !== undefined && modes.partial === 'refuse') {
      throw new CommandError(67, 'partialFilterExpression is not supported by this server', 'CannotCreateIndex');
    }
    if (raw.partialFilterExpression !== undefined && modes.partial !== 'ignore') spec.partialFilterExpression = raw.partialFilterExpression;
    const sameKey = (ix) => V.valuesEqual(ix.keyDoc, spec.key) && V.keysOf(ix.keyDoc).join('\0') === V.keysOf(spec.key).join('\0');
    const byName = coll.indexes.get(spec.name);
    if (byName) {
      if (!sameKey(byName)) {
        throw new CommandError(86, `An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: ${V.formatValue(spec)}, existing index: ${V.formatValue(byName.spec)}`, 'IndexKeySpecsConflict');
      }
      const opts = (s) => V.formatValue({ u: !!s.unique, sp: !!s.sparse, e: s.expireAfterSeconds ?? null, p: s.partialFilterExpression ?? null });
      if (spec.name !== '_id_' && opts(byName.spec) !== opts(spec)) {
        throw new CommandError(85, `An equivalent index already exists with the same name but different options. Requested index: ${V.formatValue(spec)}, existing index: ${V.formatValue(byName.spec)}`, 'IndexOptionsConflict');
      }
      continue; // identical index: idempotent no-op
    }
    const byKey = [...coll.indexes.values()].find(sameKey);
    if (byKey && !spec.partialFilterExpression && !byKey.spec.partialFilterExpression) {
      throw new CommandError(85, `Index already exists with a different name: ${byKey.name}`, 'IndexOptionsConflict');
    }
    coll.addIndex(new Index(spec));
  }
  const r = { numIndexesBefore: before, numIndexesAfter: coll.indexes.size };
  r.createdCollectionAutomatically = !existed;
  if (coll.indexes.size === before) r.note = 'all indexes already exist';
  r.ok = 1;
  return r;
}

function cmdListIndexes(cmd, ctx) {
  const name = collName(cmd, 'listIndexes');
  const coll = ctx.db.get(name);
  if (!coll) throw new CommandError(26, `ns does not exist: ${ctx.db.name}.${name}`, 'NamespaceNotFound');
  const specs = [...coll.indexes.values()].map((ix) => ix.spec);
  return cursorReply(ctx, `${ctx.db.name}.${name}`, specs, { batchSize: batchSizeOf(cmd, 'cursor') });
}

function cmdDropIndexes(cmd, ctx) {
  const name = collName(cmd, Object.keys(cmd)[0]);
  const coll = ctx.db.get(name);
  if (!coll) throw new CommandError(26, `ns not found ${ctx.db.name}.${name}`, 'NamespaceNotFound');
  const was = coll.indexes.size;
  const idx = cmd.index;
  let names;
  if (idx === '*') names = [...coll.indexes.keys()].filter((n) => n !== '_id_');
  else if (typeof idx === 'string') names = [idx];
  else if (Array.isArray(idx)) names = idx;
  else if (V.isPlainDoc(idx)) {
    const found = [...coll.indexes.values()].find((ix) => V.valuesEqual(ix.keyDoc, idx));
    if (!found) throw new CommandError(27, `can't find index with key: ${V.formatValue(idx)}`, 'IndexNotFound');
    names = [found.name];
  } else {
    throw new CommandError(14, 'invalid index name spec', 'TypeMismatch');
  }
  for (const n of names) {
    if (n === '_id_') throw new CommandError(72, 'cannot drop _id index', 'InvalidOptions');
    if (!coll.indexes.has(n)) throw new CommandError(27, `index not found with name [${n}]`, 'IndexNotFound');
  }
  names.forEach((n) => coll.dropIndex(n));
  return { nIndexesWas: was, ok: 1 };
}

/** The `scale` option of collStats, dbStats and $collStats storageStats (default 1). */
function scaleOf(v) {
  if (v === undefined || v === null) return 1;
  const n = Math.trunc(V.numberOf(v));
  if (!(n >= 1)) throw new CommandError(2, 'scale has to be > 0', 'BadValue');
  return n;
}

const sized = (bytes, scale) => V.typedNumber(Math.floor(bytes / scale));

/** The storage part of collStats, in mongod's field order (sizes divided by scale). */
function storageStats(coll, scale) {
  const st = coll.stats();
  const r = { size: sized(st.size, scale), count: V.typedNumber(st.count) };
  if (st.count) r.avgObjSize = V.typedNumber(Math.floor(st.size / st.count));
  const indexSizes = {};
  for (const [name, bytes] of st.indexSizes) V.setKey(indexSizes, name, sized(bytes, scale));
  Object.assign(r, {
    storageSize: sized(st.storageSize, scale),
    freeStorageSize: new V.Int32(0),
    capped: false,
    nindexes: new V.Int32(st.nindexes),
    indexBuilds: [],
    totalIndexSize: sized(st.totalIndexSize, scale),
    totalSize: sized(st.storageSize + st.totalIndexSize, scale),
    indexSizes,
    scaleFactor: new V.Int32(scale),
  });
  return r;
}

function cmdDbStats(cmd, ctx) {
  const scale = scaleOf(cmd.scale);
  let objects = 0;
  let indexes = 0;
  let dataSize = 0;
  let storageSize = 0;
  let indexSize = 0;
  for (const c of ctx.db.collections.values()) {
    const st = c.stats();
    objects += st.count;
    indexes += st.nindexes;
    dataSize += st.size;
    storageSize += st.storageSize;
    indexSize += st.totalIndexSize;
  }
  return {
    db: ctx.db.name,
    collections: new V.Int32(ctx.db.collections.size),
    views: new V.Int32(0),
    objects: V.typedNumber(objects),
    avgObjSize: new V.Double(objects ? dataSize / objects : 0),
    dataSize: new V.Double(Math.floor(dataSize / scale)),
    storageSize: new V.Double(Math.floor(storageSize / scale)),
    indexes: V.typedNumber(indexes),
    indexSize: new V.Double(Math.floor(indexSize / scale)),
    totalSize: new V.Double(Math.floor((storageSize + indexSize) / scale)),
    scaleFactor: new V.Double(scale),
    ok: 1,
  };
}

function cmdCollStats(cmd, ctx) {
  const name = collName(cmd, 'collStats');
  const scale = scaleOf(cmd.scale);
  const c = ctx.db.get(name);
  if (!c) throw new CommandError(26, `ns not found ${ctx.db.name}.${name}`, 'NamespaceNotFound');
  return { ns: c.ns, ...storageStats(c, scale), ok: 1 };
}

// ---------------------------------------------------------------------------
// Dispatch table (command names are matched case-insensitively).

const startedAt = Date.now();
const HANDLERS = {
  hello: (cmd, ctx) => helloReply(cmd, ctx, false),
  ismaster: (cmd, ctx) => helloReply(cmd, ctx, true),
  ping: () => ({ ok: 1 }),
  buildinfo: () => ({
    version: VERSION, gitVersion: 'convo-standin', versionArray: [5, 0, 0, 0], bits: 64,
    debug: false, maxBsonObjectSize: MAX_BSON, storageEngines: ['memory'], javascriptEngine: 'none', ok: 1,
  }),
  serverstatus: (cmd, ctx) => ({
    host: 'convo-standin', version: VERSION, process: 'mongod', pid: Long.fromNumber(process.pid),
    uptime: (Date.now() - startedAt) / 1000, localTime: new Date(), ok: 1,
  }),
  connectionstatus: () => ({ authInfo: { authenticatedUsers: [], authenticatedUserRoles: [] }, ok: 1 }),
  whatsmyuri: (cmd, ctx) => ({ you: ctx.conn.remote || '127.0.0.1:0', ok: 1 }),
  endsessions: () => ({ ok: 1 }),
  refreshsessions: () => ({ ok: 1 }),
  killallsessions: () => ({ ok: 1 }),
  listdatabases: cmdListDatabases,
  listcollections: cmdListCollections,
  create: cmdCreate,
  drop: cmdDrop,
  dropdatabase: cmdDropDatabase,
  renamecollection: cmdRenameCollection,
  insert: cmdInsert,
  update: cmdUpdate,
  delete: cmdDelete,
  find: cmdFind,
  getmore: cmdGetMore,
  killcursors: cmdKillCursors,
  findandmodify: cmdFindAndModify,
  count: cmdCount,
  distinct: cmdDistinct,
  aggregate: cmdAggregate,
  createindexes: cmdCreateIndexes,
  listindexes: cmdListIndexes,
  dropindexes: cmdDropIndexes,
  deleteindexes: cmdDropIndexes,
  dbstats: cmdDbStats,
  collstats: cmdCollStats,
  profile: Profile.cmdProfile,
};

/** A standalone mongod (which the stand-in is: hello has no setName) refuses a
 * write concern only a replica set can give, before running the command
 * (mongod's validateWriteConcern, BadValue): w above 1 and a w mode other than
 * "majority" (a tag set). */
function checkWriteConcern(wc) {
  if (!wc || typeof wc !== 'object' || wc.w === undefined) return;
  if (typeof wc.w === 'string') {
    if (wc.w !== 'majority') throw new CommandError(2, `cannot use non-majority 'w' mode ${wc.w} when a host is not a member of a replica set`, 'BadValue');
  } else if (V.numberOf(wc.w) > 1) {
    throw new CommandError(2, "cannot use 'w' > 1 when a host is not replicated", 'BadValue');
  }
}

/** An unknown readConcern level is refused before the command runs (mongod's
 * ReadConcernArgs::parse, 9 FailedToParse). */
const READ_CONCERN_LEVELS = ['local', 'majority', 'linearizable', 'available', 'snapshot'];
function checkReadConcern(rc) {
  if (!rc || typeof rc !== 'object' || rc.level === undefined) return;
  if (typeof rc.level !== 'string' || !READ_CONCERN_LEVELS.includes(rc.level)) {
    throw new CommandError(9, "readConcern.level must be either 'local' (default), 'available', 'majority', 'snapshot' or 'linearizable'", 'FailedToParse');
  }
}

/** Run one command document against database `dbName`; always returns a reply. */
function runCommand(cmd, dbName, ctx) {
  const name = V.keysOf(cmd)[0];
  if (name === undefined) return new CommandError(59, 'no such command: \'\'', 'CommandNotFound').toReply();
  const handler = HANDLERS[name.toLowerCase()];
  if (!handler) return new CommandError(59, `no such command: '${name}'`, 'CommandNotFound').toReply();
  try {
    checkWriteConcern(cmd.writeConcern);
    checkReadConcern(cmd.readConcern);
    const cctx = { ...ctx, db: ctx.store.db(dbName) };
    Scan.resetStats();
    const started = Date.now();
    const reply = handler(cmd, cctx);
    if (cctx.db.profileLevel) Profile.record(cctx, cmd, reply, Date.now() - started, Collection);
    return reply;
  } catch (e) {
    if (e instanceof CommandError) return e.toReply();
    if (e && e.constructor && e.constructor.name === 'MingoError') return new CommandError(2, e.message, 'BadValue').toReply();
    if (ctx.log) ctx.log(`internal error in ${name}: ${e && e.stack}`);
    return { ok: 0, errmsg: String(e && e.message), code: 1, codeName: 'InternalError' };
  }
}

module.exports = { runCommand, Cursors, sortDocs, makeProjector };
