'use strict';
// lib/sortedlist.js against a plain sorted array: the same entries in the same
// order after every insert and removal, bounds and ranges equal to the
// array's, with leaves small enough that splits and merges happen often.

const test = require('node:test');
const assert = require('node:assert/strict');
const { SortedList } = require('../lib/sortedlist');

// a fixed-seed generator, so a failure repeats
function rng(seed) {
  let x = seed >>> 0;
  return () => {
    x = (x * 1664525 + 1013904223) >>> 0;
    return x / 2 ** 32;
  };
}

const cmp = (a, b) => a.k - b.k || a.id - b.id;
const keyOnly = (a, b) => a.k - b.k;

function check(list, model) {
  assert.equal(list.size, model.length);
  assert.deepEqual([...list], model);
  for (const leaf of list.leaves) {
    assert.ok(leaf.length > 0 && leaf.length <= list.leafMax, `leaf of ${leaf.length}`);
  }
}

const lowerIndex = (model, before) => {
  const i = model.findIndex((x) => !before(x));
  return i < 0 ? model.length : i;
};

test('inserts and removals keep the order of a sorted array', () => {
  const r = rng(25);
  const list = new SortedList(cmp, 8);
  const model = [];
  let id = 0;
  for (let step = 0; step < 4000; step++) {
    if (model.length && r() < 0.4) {
      const victim = model[Math.floor(r() * model.length)];
      assert.equal(list.remove(victim, (x) => x === victim), true);
      model.splice(model.indexOf(victim), 1);
    } else {
      const e = { k: Math.floor(r() * 50), id: id++ };
      list.insert(e);
      model.splice(lowerIndex(model, (x) => cmp(x, e) < 0), 0, e);
    }
    if (step % 97 === 0) check(list, model);
  }
  check(list, model);
  assert.equal(list.remove({ k: 3, id: -1 }, () => false), false, 'nothing removed when nothing matches');
  while (model.length) {
    const e = model.pop();
    assert.equal(list.remove(e, (x) => x === e), true);
  }
  check(list, model);
  assert.equal(list.leaves.length, 0);
});

test('removal finds an entry among many equal ones across leaves', () => {
  // cmp ties every entry: the one asked for is found by `same`, wherever it sits
  const list = new SortedList(keyOnly, 4);
  const all = [];
  for (let i = 0; i < 40; i++) { const e = { k: 1, id: i }; all.push(e); list.insert(e); }
  for (const i of [39, 0, 17, 5, 38]) {
    assert.equal(list.remove({ k: 1 }, (x) => x === all[i]), true);
    assert.ok(![...list].includes(all[i]));
  }
  assert.equal(list.size, 35);
  // an entry whose key no longer says where it is (looked for in the wrong place) is still found
  const stray = [...list][30];
  assert.equal(list.remove({ k: -5 }, (x) => x === stray), true);
  assert.equal(list.size, 34);
});

test('bound and range read what the array reads, both ways', () => {
  const r = rng(7);
  const list = new SortedList(cmp, 5);
  const model = [];
  for (let i = 0; i < 300; i++) {
    const e = { k: Math.floor(r() * 40), id: i };
    list.insert(e);
    model.splice(lowerIndex(model, (x) => cmp(x, e) < 0), 0, e);
  }
  for (let lo = -1; lo <= 41; lo++) {
    for (const hi of [lo, lo + 1, lo + 7, 45]) {
      const from = list.bound((x) => x.k < lo);
      const to = list.bound((x) => x.k <= hi);
      const want = model.filter((x) => x.k >= lo && x.k <= hi);
      assert.deepEqual([...list.range(from, to, 1)], want, `[${lo}, ${hi}] forwards`);
      assert.deepEqual([...list.range(from, to, -1)], want.slice().reverse(), `[${lo}, ${hi}] backwards`);
    }
  }
  const empty = new SortedList(cmp);
  const b = empty.bound(() => true);
  assert.deepEqual([...empty.range(b, b, 1)], []);
  assert.deepEqual([...empty.range(b, b, -1)], []);
});
