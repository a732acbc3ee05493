'use strict';
// lib/store.js's lookup tables made on first use (a compound index's groups,
// a field's equality table) stay right through later inserts, replacements
// and removals: what they give equals a plain filter over every record.

const test = require('node:test');
const assert = require('node:assert/strict');
const { Store, Index } = require('../lib/store');
const V = require('../lib/values');

function rng(seed) {
  let x = seed >>> 0;
  return () => {
    x = (x * 1664525 + 1013904223) >>> 0;
    return x / 2 ** 32;
  };
}

test('groups and equality tables made on first use follow later writes', () => {
  const r = rng(25);
  const coll = new Store().db('d').ensure('c');
  coll.addIndex(new Index({ v: 2, key: { u: new V.Int32(1), t: new V.Int32(1) }, name: 'u_t' }));
  const doc = (i) => ({ _id: new V.Int32(i), u: `u${Math.floor(r() * 4)}`, t: new V.Int32(Math.floor(r() * 20)) });
  let next = 0;
  for (; next < 50; next++) coll.insert(doc(next));
  assert.equal([...coll.ordered.values()][0].groups, null, 'no groups before a find uses them');
  assert.equal(coll.fieldIndex.get('u'), null, 'no equality table before a filter uses it');

  const want = (u, limit) => [...coll.records.values()].filter((rec) => rec.doc.u === u)
    .sort((a, b) => V.compareValues(a.doc.t, b.doc.t) || a.seq - b.seq).slice(0, limit);
  const wantIn = (us) => [...coll.records.values()].filter((rec) => us.includes(rec.doc.u));
  const check = () => {
    for (const u of ['u0', 'u1', 'u2', 'u3', 'u9']) {
      assert.deepEqual(coll.sortedMatch({ u }, { t: new V.Int32(1) }, 7), want(u, 7), `sorted ${u}`);
      assert.deepEqual(coll.fieldCandidates({ u: { $in: [u, 'u1'] } }).recs, wantIn([u, 'u1']), `$in ${u}`);
    }
  };
  check();
  assert.notEqual([...coll.ordered.values()][0].groups, null);
  assert.notEqual(coll.fieldIndex.get('u'), null);
  for (let step = 0; step < 300; step++) {
    const recs = [...coll.records.values()];
    const x = r();
    if (x < 0.4 || !recs.length) coll.insert(doc(next++));
    else if (x < 0.7) coll.remove(recs[Math.floor(r() * recs.length)]);
    else {
      const rec = recs[Math.floor(r() * recs.length)];
      coll.replace(rec, { ...doc(0), _id: rec.doc._id });
    }
    if (step % 10 === 0) check();
  }
  check();
});
