// revived.js — ConvoSaver's cache of the items it revived from threads' logs, by (thread,
// generation, origin, seq): a read says what it holds (the Store's knownGeneration/Length/
// Origin), libconvo leaves those texts out, and only items not revived before are parsed, so
// a getTuple at turn 1,000 costs what it costs at turn 10. Bounded: an LRU of threads and a
// total of items. Items are handed out again as they are (docs/node.md "Revived messages").
import { fromLogMessages } from './log.js';

/** One thread's log as revived at one generation and origin; also the token of the saver's
 * seq hints for that thread (a new Log leaves every hint of the old one unused). */
class Log {
  constructor(thread, generation, origin) {
    this.thread = thread;
    this.generation = generation;
    this.origin = origin;
    this.entries = []; // seq -> { v, content, id }: the item and what it had when revived
    this.count = 0; // entries set
    this.length = 0; // entries [0, length) are all set
  }
}

// An entry whose object was changed in place (content or id; LangGraph's reducer gives an id
// to a message without one) no longer is what the log holds.
function changed(e) {
  return e.v !== null && typeof e.v === 'object' && (e.v.content !== e.content || e.v.id !== e.id);
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

  /** What a read of thread may say it holds: { log, entries, length } (entries: a snapshot
   * the read takes elided items from), or null. An item changed in place since it was
   * revived is dropped with every one after it: the read gives their texts again. */
  hold(thread) {
    const log = this.#threads.get(thread);
    if (!log) return null;
    this.#threads.delete(thread); // most recently used
    this.#threads.set(thread, log);
    let k = 0;
    while (k < log.length && !changed(log.entries[k])) k++;
    if (k < log.length) {
      const kept = log.entries.slice(0, k); // a new array: reads under way keep theirs
      this.#items -= log.count - k;
      log.entries = kept;
      log.count = k;
      log.length = k;
    }
    return log.length > 0 && log.origin >= 0 ? { log, entries: log.entries, length: log.length } : null;
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
   * hints under `log`. */
  async items(serde, hints, stored, thread, log, held) {
    const { texts, seqs } = stored;
    const values = new Array(texts.length);
    const reviveAt = [];
    for (let i = 0; i < texts.length; i++) {
      const q = seqs[i];
      if (texts[i] === null) {
        const e = held && log === held.log ? held.entries[q] : undefined;
        if (!e) throw new Error(`convo: the log's item ${q} was left out of a read but is not held`);
        values[i] = e.v;
        continue;
      }
      const e = log && q >= 0 ? log.entries[q] : undefined;
      if (e && !changed(e)) values[i] = e.v;
      else reviveAt.push(i);
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
    if (log.entries[seq] === undefined) {
      if (this.#items >= this.#maxItems && !this.#evict(log)) return;
      this.#items++;
      log.count++;
    }
    log.entries[seq] = { v, content: v?.content, id: v?.id };
    while (log.entries[log.length] !== undefined) log.length++;
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
