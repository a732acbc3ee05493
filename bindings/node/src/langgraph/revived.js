// revived.js — ConvoSaver's cache of the items it revived from threads' logs, by (thread,
// generation, origin, seq): a read says what it holds (the Store's knownGeneration/Length/
// Origin), libconvo leaves those texts out, and only items not revived before are parsed, so
// a getTuple at turn 1,000 costs what it costs at turn 10. Bounded: an LRU of threads and a
// total of items. Items are handed out again as they are (docs/node.md "Revived messages").
import { fromLogMessages } from './log.js';

/** One thread's log as revived at one generation and origin; also the token of the saver's
 * seq hints for that thread (a new Log leaves every hint of the old one unused). Seq by seq,
 * in three dense arrays (no object per entry: a read looks at each held item once, and the
 * list it hands out is a copy of `items`): the item, and its content and id when revived. */
class Log {
  constructor(thread, generation, origin) {
    this.thread = thread;
    this.generation = generation;
    this.origin = origin;
    this.items = []; // seq -> the item (undefined: not revived)
    this.contents = []; // seq -> its content when revived
    this.ids = []; // seq -> its id when revived
    this.count = 0; // entries set
    this.length = 0; // entries [0, length) are all set
  }
}

// How many of the log's first `length` items still have the content and id they were revived
// with (an object changed in place, content or id, is no longer what the log holds; LangGraph's
// reducer gives an id to a message without one).
function unchangedPrefix(log, length) {
  const { items, contents, ids } = log;
  let k = 0;
  for (; k < length; k++) {
    const v = items[k];
    if (v !== null && typeof v === 'object' && (v.content !== contents[k] || v.id !== ids[k])) break;
  }
  return k;
}

// Whether the log's item at seq was changed in place since it was revived.
function changedAt(log, seq) {
  const v = log.items[seq];
  return v !== null && typeof v === 'object' && (v.content !== log.contents[seq] || v.id !== log.ids[seq]);
}

export class Revived {
  #threads = new Map(); // thread -> Log, least recently used first
  #items = 0;
  #maxThreads;
  #maxItems;

  constructor({ threads = 64, items = 100000 } = {}) {
    this.#maxThreads = threads;
    this.#maxItems = items;
  }

  /** The thread's Log (the seq hints' token), or null when none is held. */
  current(thread) {
    return this.#threads.get(thread) ?? null;
  }

  /** Forgets the thread (deleted, or a put found another generation). */
  drop(thread) {
    const log = this.#threads.get(thread);
    if (!log) return;
    this.#items -= log.count;
    this.#threads.delete(thread);
  }

  /** What a read of thread may say it holds: { log, items, length } (items: a snapshot the
   * read takes elided items from), or null. An item changed in place since it was revived is
   * dropped with every one after it: the read gives their texts again. */
  hold(thread) {
    const log = this.#threads.get(thread);
    if (!log) return null;
    this.#threads.delete(thread); // most recently used
    this.#threads.set(thread, log);
    const k = unchangedPrefix(log, log.length);
    if (k < log.length) {
      // new arrays: reads under way keep theirs
      this.#items -= log.count - k;
      log.items = log.items.slice(0, k);
      log.contents = log.contents.slice(0, k);
      log.ids = log.ids.slice(0, k);
      log.count = k;
      log.length = k;
    }
    return log.length > 0 && log.origin >= 0 ? { log, items: log.items, length: log.length } : null;
  }

  /** The known* options of a read holding `held`. */
  static known(held) {
    return held ? { knownGeneration: held.log.generation, knownLength: held.length,
      knownOrigin: held.log.origin } : undefined;
  }

  /** The Log a checkpoint read with `held` was resolved against: held's when the thread is
   * still at that generation and origin, else a new one (replacing the thread's; not when
   * `start` is false: a listing across threads does not fill the cache with them), or null
   * when the read does not tell (no reference, or message 0 not read: not cached). */
  logOf(thread, cp, held, start = true) {
    if (cp.generation < 0 || cp.origin < 0) return null;
    if (held && held.log.generation === cp.generation && held.log.origin === cp.origin) return held.log;
    const log = this.#threads.get(thread);
    if (log && log.generation === cp.generation && log.origin === -1) log.origin = cp.origin; // adopted
    if (log && log.generation === cp.generation && log.origin === cp.origin) return log;
    return start ? this.#start(thread, cp.generation, cp.origin) : null;
  }

  /** The thread's Log, else a new one at the generation and origin (-1: not known yet; it then
   * serves the seq hints of puts only) a writer read before its first put. */
  adopt(thread, generation, origin) {
    return this.#threads.get(thread) ?? this.#start(thread, generation, origin);
  }

  #start(thread, generation, origin) {
    this.drop(thread);
    const log = new Log(thread, generation, origin);
    this.#threads.set(thread, log);
    this.#evict(log);
    return log;
  }

  /** The items a resolved list of the Store stores (texts null below the held length): held
   * items as they are, the others revived once and kept in `log`; their seqs are learnt as
   * hints under `log`. A list that starts with the held items in seq order (a message channel
   * read at its log's length) is a copy of that many held items and what follows. */
  async items(serde, hints, stored, thread, log, held) {
    const { texts, seqs } = stored;
    const n = texts.length;
    const from = held && log === held.log ? heldPrefix(texts, seqs, held.length) : 0;
    const values = from ? held.items.slice(0, from) : [];
    const reviveAt = [];
    for (let i = from; i < n; i++) {
      const q = seqs[i];
      if (texts[i] === null) {
        const v = held && log === held.log && q < held.length ? held.items[q] : undefined;
        if (v === undefined) throw new Error(`convo: the log's item ${q} was left out of a read but is not held`);
        values.push(v);
        continue;
      }
      if (log && q >= 0 && log.items[q] !== undefined && !changedAt(log, q)) values.push(log.items[q]);
      else {
        reviveAt.push(i);
        values.push(null);
      }
    }
    if (!reviveAt.length) return values;
    const revived = await fromLogMessages(serde, reviveAt.map((i) => texts[i]));
    const learnt = [];
    const learntSeqs = [];
    reviveAt.forEach((i, k) => {
      values[i] = revived[k];
      if (seqs[i] < 0 || !log) return;
      this.#add(log, seqs[i], revived[k]);
      learnt.push(revived[k]);
      learntSeqs.push(seqs[i]);
    });
    hints.learn(learnt, learntSeqs, thread, log);
    return values;
  }

  #add(log, seq, v) {
    // a read finishing after its thread was dropped or replaced adds nothing
    if (this.#threads.get(log.thread) !== log) return;
    if (log.items[seq] === undefined) {
      if (this.#items >= this.#maxItems && !this.#evict(log)) return;
      this.#items++;
      log.count++;
    }
    log.items[seq] = v;
    log.contents[seq] = v?.content;
    log.ids[seq] = v?.id;
    while (log.items[log.length] !== undefined) log.length++;
  }

  // Drops least recently used threads other than `keep` while over a bound; whether there
  // is room for one more item.
  #evict(keep) {
    for (const [thread, log] of this.#threads) {
      if (this.#threads.size <= this.#maxThreads && this.#items < this.#maxItems) break;
      if (log !== keep) this.drop(thread);
    }
    return this.#items < this.#maxItems;
  }
}

// How many of a resolved list's first items are held items 0, 1, ... (text left out, seq i at
// index i), at most `length`.
function heldPrefix(texts, seqs, length) {
  const end = Math.min(texts.length, length);
  let i = 0;
  while (i < end && texts[i] === null && seqs[i] === i) i++;
  return i;
}
