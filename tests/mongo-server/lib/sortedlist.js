'use strict';
// A sorted list kept as a B-tree of height two: leaves of at most LEAF_MAX
// entries, in order, under one array of leaves.  An insert or a removal
// binary-searches the leaves (by their last entry), then the leaf, and moves
// at most LEAF_MAX entries; a full leaf splits in two, moving n / LEAF_MAX
// leaf pointers once every LEAF_MAX / 2 inserts or more.  So an insert costs
// O(log n + LEAF_MAX) plus, amortised, 2n / LEAF_MAX^2 pointer moves (under 8
// at a million entries) — against the n / 2 of one sorted array, which is
// what made the stand-in's index inserts grow with the collection.
//
// Positions are cursors {l, i} (leaf, index in it); they stay valid until the
// list is next changed.

const LEAF_MAX = 512;

class SortedList {
  /** cmp(a, b): negative, 0 or positive; entries equal under cmp keep no set order. */
  constructor(cmp, leafMax = LEAF_MAX) {
    this.cmp = cmp;
    this.leafMax = Math.max(4, leafMax);
    this.leaves = [];
    this.size = 0;
  }

  /** The leaf index where an entry not before e belongs (the last leaf when none). */
  leafFor(before) {
    let lo = 0;
    let hi = this.leaves.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      const leaf = this.leaves[mid];
      if (before(leaf[leaf.length - 1])) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /**
   * The first position whose entry `before` is false for (`before` true for a
   * prefix of the list, false from there on); {l: leaves.length, i: 0} at the end.
   */
  bound(before) {
    if (!this.size) return { l: 0, i: 0 };
    const l = this.leafFor(before);
    const leaf = this.leaves[l];
    let lo = 0;
    let hi = leaf.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (before(leaf[mid])) lo = mid + 1;
      else hi = mid;
    }
    return lo === leaf.length ? { l: l + 1, i: 0 } : { l, i: lo };
  }

  insert(e) {
    if (!this.size) {
      this.leaves.push([e]);
      this.size = 1;
      return;
    }
    const before = (x) => this.cmp(x, e) < 0;
    const l = this.leafFor(before);
    const leaf = this.leaves[l];
    let lo = 0;
    let hi = leaf.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (before(leaf[mid])) lo = mid + 1;
      else hi = mid;
    }
    leaf.splice(lo, 0, e);
    this.size++;
    if (leaf.length > this.leafMax) this.leaves.splice(l + 1, 0, leaf.splice(leaf.length >> 1));
  }

  /**
   * Removes the entry for which same(x) is true, looked for where e sorts
   * (then everywhere, should it not be there); false when there is none.
   */
  remove(e, same) {
    if (!this.size) return false;
    let { l, i } = this.bound((x) => this.cmp(x, e) < 0);
    // entries equal under cmp may sit on both sides of a leaf boundary
    for (; l < this.leaves.length; l++, i = 0) {
      const leaf = this.leaves[l];
      for (; i < leaf.length && this.cmp(leaf[i], e) === 0; i++) {
        if (same(leaf[i])) return this.removeAt(l, i);
      }
      if (i < leaf.length) break;
    }
    for (l = 0; l < this.leaves.length; l++) {
      const at = this.leaves[l].findIndex(same);
      if (at >= 0) return this.removeAt(l, at);
    }
    return false;
  }

  removeAt(l, i) {
    const leaf = this.leaves[l];
    leaf.splice(i, 1);
    this.size--;
    if (!leaf.length) {
      this.leaves.splice(l, 1);
    } else if (l + 1 < this.leaves.length && leaf.length + this.leaves[l + 1].length <= this.leafMax >> 1) {
      // two small neighbours merge, so leaves stay at least a quarter full on average
      leaf.push(...this.leaves[l + 1]);
      this.leaves.splice(l + 1, 1);
    }
    return true;
  }

  /** Entries from position `from` up to (not including) `to`, forwards (dir > 0) or backwards. */
  * range(from, to, dir) {
    if (dir > 0) {
      for (let { l, i } = from; l < to.l || (l === to.l && i < to.i); i++) {
        if (i >= this.leaves[l].length) { l++; i = -1; continue; }
        yield this.leaves[l][i];
      }
      return;
    }
    let { l, i } = to;
    for (;;) {
      i--;
      while (i < 0) {
        l--;
        if (l < 0) return;
        i = this.leaves[l].length - 1;
      }
      if (l < from.l || (l === from.l && i < from.i)) return;
      yield this.leaves[l][i];
    }
  }

  * [Symbol.iterator]() {
    for (const leaf of this.leaves) yield* leaf;
  }
}

module.exports = { SortedList, LEAF_MAX };
