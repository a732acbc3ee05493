'use strict';
// Update operators applied to typed (BSON-faithful) documents.
//
// mingo 7 ships update operators too, but they work on plain JS numbers, so
// an $inc on an int64 or a $set of an int64 value would come back as int32 or
// double.  These few operators are therefore implemented here on the typed
// representation, following MongoDB's numeric type rules.

const { Aggregator, Query } = require('mingo');
const V = require('./values');
const { CommandError } = require('./errors');

const isOperatorDoc = (u) => V.isPlainDoc(u) && V.keysOf(u).length > 0 && V.keysOf(u)[0].startsWith('$');

function typeName(v) {
  const t = V.bsonType(v);
  return t === 'missing' ? 'missing' : t;
}

/** Walk to the parent container of `path`, optionally creating sub-documents. */
function resolveParent(doc, path, create) {
  const segs = path.split('.');
  let cur = doc;
  for (let i = 0; i < segs.length - 1; i++) {
    const seg = segs[i];
    let next;
    if (Array.isArray(cur)) {
      if (!/^\d+$/.test(seg)) {
        if (!create) return null;
        throw new CommandError(28, `Cannot create field '${seg}' in element {${segs[i - 1]}: ${V.formatValue(cur)}}`, 'PathNotViable');
      }
      const idx = Number(seg);
      next = cur[idx];
      if (next === undefined || next === null) {
        if (!create) return null;
        while (cur.length < idx) cur.push(null);
        next = {};
        cur[idx] = next;
      }
    } else {
      next = Object.prototype.hasOwnProperty.call(cur, seg) ? cur[seg] : undefined;
      if (next === undefined) {
        if (!create) return null;
        next = {};
        V.setKey(cur, seg, next);
      }
    }
    if (!V.isPlainDoc(next) && !Array.isArray(next)) {
      if (!create) return null;
      throw new CommandError(28, `Cannot create field '${segs[i + 1]}' in element {${seg}: ${V.formatValue(next)}}`, 'PathNotViable');
    }
    cur = next;
  }
  return { parent: cur, key: segs[segs.length - 1] };
}

function getAt(parent, key) {
  if (Array.isArray(parent)) return /^\d+$/.test(key) ? parent[Number(key)] : undefined;
  return Object.prototype.hasOwnProperty.call(parent, key) ? parent[key] : undefined;
}

function setAt(parent, key, val) {
  if (Array.isArray(parent)) {
    if (!/^\d+$/.test(key)) throw new CommandError(28, `Cannot create field '${key}' in element {${V.formatValue(parent)}}`, 'PathNotViable');
    const idx = Number(key);
    while (parent.length < idx) parent.push(null);
    parent[idx] = val;
  } else {
    V.setKey(parent, key, val);
  }
}

function getField(doc, path) {
  const r = resolveParent(doc, path, false);
  return r ? getAt(r.parent, r.key) : undefined;
}

function setField(doc, path, val) {
  const r = resolveParent(doc, path, true);
  setAt(r.parent, r.key, val);
}

function unsetField(doc, path) {
  const r = resolveParent(doc, path, false);
  if (!r) return;
  if (Array.isArray(r.parent)) {
    if (/^\d+$/.test(r.key) && Number(r.key) < r.parent.length) r.parent[Number(r.key)] = null;
  } else {
    V.deleteKey(r.parent, r.key);
  }
}

/** Does array element `el` match a $pull condition? */
function pullMatches(cond, el) {
  if (V.isPlainDoc(cond)) {
    const keys = V.keysOf(cond);
    if (keys.length && keys.every((k) => k.startsWith('$'))) {
      // operator condition on the element itself, e.g. {$gte: 5}
      return new Query({ v: V.toQ(cond) }).test({ v: V.toQ(el) });
    }
    if (V.isPlainDoc(el)) return new Query(V.toQ(cond)).test(V.toQ(el));
    return false;
  }
  return V.valuesEqual(cond, el);
}

function sortArray(arr, spec) {
  if (V.isPlainDoc(spec)) {
    const keys = V.keysOf(spec);
    arr.sort((a, b) => {
      for (const k of keys) {
        const c = V.compareValues(V.getPath(a, k), V.getPath(b, k)) * (V.numberOf(spec[k]) < 0 ? -1 : 1);
        if (c) return c;
      }
      return 0;
    });
  } else {
    const dir = V.numberOf(spec) < 0 ? -1 : 1;
    arr.sort((a, b) => V.compareValues(a, b) * dir);
  }
}

function arrayAt(doc, path) {
  const cur = getField(doc, path);
  if (cur === undefined) return undefined;
  if (!Array.isArray(cur)) {
    throw new CommandError(2, `The field '${path}' must be an array but is of type ${typeName(cur)} in document {_id: ${V.formatValue(doc._id)}}`, 'BadValue');
  }
  return cur;
}

// Each operator: (doc, path, arg, ctx) mutates doc in place.
const OPERATORS = {
  $set(doc, path, arg) { setField(doc, path, V.clone(arg)); },
  $setOnInsert(doc, path, arg, ctx) { if (ctx.isInsert) setField(doc, path, V.clone(arg)); },
  $unset(doc, path) { unsetField(doc, path); },
  $inc(doc, path, arg) { numericOp(doc, path, arg, 'add', '$inc'); },
  $mul(doc, path, arg) { numericOp(doc, path, arg, 'mul', '$mul'); },
  $min(doc, path, arg) {
    const cur = getField(doc, path);
    if (cur === undefined || V.compareValues(arg, cur) < 0) setField(doc, path, V.clone(arg));
  },
  $max(doc, path, arg) {
    const cur = getField(doc, path);
    if (cur === undefined || V.compareValues(arg, cur) > 0) setField(doc, path, V.clone(arg));
  },
  $currentDate(doc, path, arg) {
    const wantTs = V.isPlainDoc(arg) && arg.$type === 'timestamp';
    const now = Date.now();
    setField(doc, path, wantTs ? new V.BSON.Timestamp({ t: Math.floor(now / 1000), i: 1 }) : new Date(now));
  },
  $rename(doc, path, arg) {
    if (typeof arg !== 'string') throw new CommandError(2, `The 'to' field for $rename must be a string: ${path}: ${V.formatValue(arg)}`, 'BadValue');
    const cur = getField(doc, path);
    if (cur === undefined) return;
    unsetField(doc, path);
    setField(doc, arg, cur);
  },
  $push(doc, path, arg) {
    let items = [arg];
    let mods = null;
    if (V.isPlainDoc(arg) && Object.prototype.hasOwnProperty.call(arg, '$each')) {
      if (!Array.isArray(arg.$each)) throw new CommandError(2, `The argument to $each in $push must be an array but it was of type: ${typeName(arg.$each)}`, 'BadValue');
      items = arg.$each;
      mods = arg;
    }
    let arr = arrayAt(doc, path);
    if (arr === undefined) { arr = []; setField(doc, path, arr); }
    items = items.map(V.clone);
    if (mods && mods.$position !== undefined) {
      let pos = V.numberOf(mods.$position);
      if (pos < 0) pos = Math.max(0, arr.length + pos);
      arr.splice(Math.min(pos, arr.length), 0, ...items);
    } else {
      arr.push(...items);
    }
    if (mods && mods.$sort !== undefined) sortArray(arr, mods.$sort);
    if (mods && mods.$slice !== undefined) {
      const n = V.numberOf(mods.$slice);
      const kept = n >= 0 ? arr.slice(0, n) : arr.slice(Math.max(0, arr.length + n));
      arr.splice(0, arr.length, ...kept);
    }
  },
  $addToSet(doc, path, arg) {
    const items = V.isPlainDoc(arg) && Object.prototype.hasOwnProperty.call(arg, '$each') ? arg.$each : [arg];
    let arr = arrayAt(doc, path);
    if (arr === undefined) { arr = []; setField(doc, path, arr); }
    for (const it of items) if (!arr.some((x) => V.valuesEqual(x, it))) arr.push(V.clone(it));
  },
  $pull(doc, path, arg) {
    const arr = arrayAt(doc, path);
    if (!arr) return;
    const kept = arr.filter((el) => !pullMatches(arg, el));
    arr.splice(0, arr.length, ...kept);
  },
  $pullAll(doc, path, arg) {
    const arr = arrayAt(doc, path);
    if (!arr) return;
    const kept = arr.filter((el) => !arg.some((x) => V.valuesEqual(x, el)));
    arr.splice(0, arr.length, ...kept);
  },
  $pop(doc, path, arg) {
    const arr = arrayAt(doc, path);
    if (!arr || !arr.length) return;
    if (V.numberOf(arg) < 0) arr.shift(); else arr.pop();
  },
};

function numericOp(doc, path, arg, op, name) {
  if (!V.isNumeric(arg)) {
    const verb = op === 'add' ? 'increment' : 'multiply';
    throw new CommandError(14, `Cannot ${verb} with non-numeric argument: {${path}: ${V.formatValue(arg)}}`, 'TypeMismatch');
  }
  const cur = getField(doc, path);
  if (cur === undefined) {
    // $inc on a missing field sets it; $mul sets 0 of the argument's type.
    setField(doc, path, op === 'add' ? arg : V.arith(arg, new V.Int32(0), 'mul'));
    return;
  }
  if (!V.isNumeric(cur)) {
    throw new CommandError(14, `Cannot apply ${name} to a value of non-numeric type. {_id: ${V.formatValue(doc._id)}} has the field '${path}' of non-numeric type ${typeName(cur)}`, 'TypeMismatch');
  }
  setField(doc, path, V.arith(cur, arg, op));
}

/** Reject paths that overlap across (or within) operators, like MongoDB. */
function checkConflicts(paths) {
  const sorted = paths.slice().sort();
  for (let i = 1; i < sorted.length; i++) {
    const a = sorted[i - 1];
    const b = sorted[i];
    if (a === b || b.startsWith(`${a}.`)) {
      throw new CommandError(40, `Updating the path '${b}' would create a conflict at '${a}'`, 'ConflictingUpdateOperators');
    }
  }
}

/** Move _id to the front of a document (MongoDB always stores it first). */
function idFirst(doc) {
  if (!Object.prototype.hasOwnProperty.call(doc, '_id')) return doc;
  const keys = V.keysOf(doc);
  if (keys[0] === '_id') return doc;
  return V.docFromPairs([['_id', doc._id], ...keys.filter((k) => k !== '_id').map((k) => [k, doc[k]])]);
}

/**
 * Apply update `u` (operator document, replacement document or pipeline) to
 * `doc` and return the new document; `doc` itself is never modified.
 * ctx.isInsert: true when building an upserted document.
 */
function applyUpdate(doc, u, ctx = {}) {
  if (Array.isArray(u)) {
    const out = new Aggregator(u.map(V.toQ)).run([V.toQ(doc)]);
    if (out.length !== 1) throw new CommandError(2, 'update pipeline must produce exactly one document', 'BadValue');
    const res = V.restore(out[0], doc);
    if (doc._id !== undefined && res._id === undefined) V.setKey(res, '_id', doc._id);
    return idFirst(res);
  }
  if (!V.isPlainDoc(u)) throw new CommandError(9, 'Update argument must be either an object or an array', 'FailedToParse');
  const keys = V.keysOf(u);
  if (keys.length && keys[0].startsWith('$')) {
    const out = V.clone(doc);
    const paths = [];
    for (const op of keys) {
      const fn = OPERATORS[op];
      if (!fn) {
        throw new CommandError(9, `Unknown modifier: ${op}. Expected a valid update modifier or pipeline-style update specified as an array`, 'FailedToParse');
      }
      if (!V.isPlainDoc(u[op])) throw new CommandError(9, `Modifiers operate on fields but we found type ${typeName(u[op])} instead. For example: {$mod: {<field>: ...}} not {${op}: ${V.formatValue(u[op])}}`, 'FailedToParse');
      for (const path of V.keysOf(u[op])) {
        if (path.includes('$')) throw new CommandError(2, `positional operators are not supported by the convo stand-in: '${path}'`, 'BadValue');
        paths.push(path);
        if (op === '$rename') paths.push(u[op][path]);
      }
    }
    checkConflicts(paths);
    for (const op of keys) {
      for (const path of V.keysOf(u[op])) OPERATORS[op](out, path, u[op][path], ctx);
    }
    return out;
  }
  for (const k of keys) {
    if (k.startsWith('$')) throw new CommandError(2, `The dollar ($) prefixed field '${k}' in '${k}' is not allowed in the context of an update's replacement document.`, 'BadValue');
  }
  // Replacement: keep the original _id, placed first.
  const out = V.clone(u);
  if (doc._id !== undefined) {
    if (out._id !== undefined && !V.valuesEqual(out._id, doc._id)) {
      throw new CommandError(66, `After applying the update, the (immutable) field '_id' was found to have been altered to _id: ${V.formatValue(out._id)}`, 'ImmutableField');
    }
    V.setKey(out, '_id', doc._id);
  }
  return idFirst(out);
}

/** Seed document for an upsert: equality fields of the query. */
function upsertSeed(filter) {
  const doc = {};
  (function collect(q) {
    if (!V.isPlainDoc(q)) return;
    for (const k of V.keysOf(q)) {
      const v = q[k];
      if (k === '$and' && Array.isArray(v)) { v.forEach(collect); continue; }
      if (k.startsWith('$')) continue;
      if (V.isPlainDoc(v) && V.keysOf(v).some((x) => x.startsWith('$'))) {
        if (Object.prototype.hasOwnProperty.call(v, '$eq')) setField(doc, k, V.clone(v.$eq));
        continue;
      }
      setField(doc, k, V.clone(v));
    }
  })(filter);
  return doc;
}

module.exports = { applyUpdate, upsertSeed, isOperatorDoc, idFirst, getField, setField };
