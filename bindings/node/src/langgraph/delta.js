// delta.js — ConvoSaver's mapping of LangGraph's DeltaChannel (MessagesDeltaValue) onto the
// thread's log: a delta channel named in `messageChannels` keeps its messages in the log too.
// The deltas (pending writes) and snapshots (DeltaSnapshot) are lists of items; a put that
// commits a step stores the channel's *delta list* (the nearest snapshot's items, then every
// item written since, in the order LangGraph replays them) as the channel's value under a
// reserved key, so libconvo's rule appends the step's new messages to the log with that put
// and turns the parent's writes into references. getTuple never shows that list; the value
// LangGraph reads back is rebuilt from the writes, as LangGraph's own walk does, but with
// a bounded number of store calls (deltaHistory below).
import { DeltaSnapshot, isDeltaSnapshot, writesSortKey, compareWritesSortKeys } from '@langchain/langgraph-checkpoint';
import { NotFoundError } from '../errors.js';

/** The key under which a delta list is stored (never shown as a channel value). */
export const DELTA_KEY = '__convo_delta__';
/** The key of a DeltaSnapshot stored as a list: { lg_name: 'DeltaSnapshot', value: [...] }. */
export const SNAPSHOT_KEY = 'value';

const MAX_ENTRIES = 256; // checkpoints whose delta lists / writes a saver remembers
const REMOVE_HEAD = '{"role":"remove"'; // a RemoveMessage's log text: kept inline, not logged

function remember(map, key, value) {
  map.delete(key);
  map.set(key, value);
  if (map.size > MAX_ENTRIES) map.delete(map.keys().next().value);
}

/** Whether a stored list of items is a delta list alone (not a channel value LangGraph put). */
export function isDeltaList(items) {
  return Boolean(items) && items.key === DELTA_KEY && !items.rest;
}

/** A snapshot stored with its checkpoint's delta list: which items of that list it holds,
 * in its order, as segments of the `rest` object: [from, to) ranges of the delta list's
 * indexes, or a string, an item that is not in the list (its log message text). So the
 * snapshot's messages are the log's, whatever the reducer did (removed, replaced or moved
 * messages), and the put still appends the step's new messages. The delta list's first
 * `prefix` items are the log's messages 0, 1, ... (index = seq): only the rest is indexed. */
export async function selectionOf(delta, list, seqOf, textOf) {
  const { prefix, n } = delta;
  const bySeq = new Map();
  for (let i = prefix; i < n; i++) if (delta.seqs[i] >= 0) bySeq.set(delta.seqs[i], i);
  const indexOf = (q) => (q < 0 ? -1 : q < prefix ? q : bySeq.get(q) ?? -1);
  let byText = null;
  const used = new Set();
  const segs = [];
  for (const item of list) {
    const q = seqOf(item);
    let j = indexOf(q);
    if (used.has(j)) j = -1;
    let text = null;
    if (j < 0) {
      text = await textOf(item);
      if (!byText) {
        byText = new Map();
        for (let i = n - 1; i >= 0; i--) {
          const at = byText.get(delta.texts[i]);
          if (at) at.push(i); else byText.set(delta.texts[i], [i]);
        }
      }
      const at = byText.get(text);
      while (at && at.length && used.has(at[at.length - 1])) at.pop();
      if (at && at.length) j = at.pop();
    }
    if (j < 0) {
      segs.push(text);
      continue;
    }
    used.add(j);
    const last = segs[segs.length - 1];
    if (Array.isArray(last) && last[1] === j) last[1] = j + 1;
    else segs.push([j, j + 1]);
  }
  return segs;
}

/** The items a delta list stored with a selection (`stored.rest`) holds as a snapshot:
 * { texts, seqs, key: null, rest } (rest: the snapshot's other members), or null when the
 * selection is not one (a list not written by this module). */
export async function selected(serde, stored) {
  const { convo_select: segs, ...rest } = await serde.loadsTyped(stored.rest.type, stored.rest.bytes);
  if (!Array.isArray(segs)) return null;
  const texts = [];
  const seqs = [];
  for (const seg of segs) {
    if (typeof seg === 'string') {
      texts.push(seg);
      seqs.push(-1);
      continue;
    }
    for (let i = seg[0]; i < seg[1]; i++) {
      texts.push(stored.texts[i]);
      seqs.push(stored.seqs[i]);
    }
  }
  return { texts, seqs, key: null, rest };
}

/** A DeltaSnapshot of a message channel whose value is a list: { list, rest } to store it
 * as items under SNAPSHOT_KEY (or with a delta list), else null. */
export function snapshotList(value) {
  if (!isDeltaSnapshot(value) || !Array.isArray(value.value)) return null;
  return { list: value.value, rest: { lg_name: value.lg_name } };
}

/** The value an object read back for a stored snapshot stands for. */
export function snapshotOut(obj) {
  return isDeltaSnapshot(obj) && Array.isArray(obj[SNAPSHOT_KEY]) ? new DeltaSnapshot(obj[SNAPSHOT_KEY]) : obj;
}

// LangGraph's order of a checkpoint's pending writes: (task path, task id, idx).
function sorted(writes) {
  const keyed = writes.map((w) => [writesSortKey(w.taskPath ?? '', w.taskId, w.idx), w]);
  keyed.sort((a, b) => compareWritesSortKeys(a[0], b[0]));
  return keyed.map(([, w]) => w);
}

/**
 * What a saver remembers to build a put's delta list in O(new items): the delta list it
 * stored (or read) per checkpoint, and the message-list writes it stored per checkpoint.
 * A list is { texts, seqs, n, prefix, generation }: items [0, n) of the arrays texts and seqs
 * (the arrays are shared along a chain of checkpoints: a child's list extends its parent's
 * in place when nothing else did), seqs[i] >= 0 known for the saver's generation token
 * `generation`, and the first `prefix` items the log's messages 0, 1, ... (passed to the
 * Store as the list's logPrefix, so neither this module nor libconvo walks them).
 */
export class DeltaLists {
  #lists = new Map();  // thread\0ns\0id -> Map channel -> list
  #writes = new Map(); // thread\0ns\0id -> [{ taskPath, taskId, idx, channel, texts }]

  /** Records the items of a write of a message list to checkpoint `key` (texts only). */
  recordWrite(key, taskId, taskPath, idx, channel, texts) {
    if (texts.some((t) => t === null)) return; // given by seq: not a write of this module's
    let l = this.#writes.get(key);
    if (!l) remember(this.#writes, key, (l = []));
    const at = l.findIndex((w) => w.taskId === taskId && w.idx === idx);
    const w = { taskPath: taskPath ?? '', taskId, idx, channel, texts };
    if (at >= 0) l[at] = w; else l.push(w);
  }

  /** The delta list of `channel` for a put of `key` whose parent is `parentKey` (parent:
   * its stored checkpoint, read when this saver does not know the parent's list), as the
   * Store's items after a log prefix ({ items, prefix, texts, seqs, n }), or null when it
   * cannot be made (the parent's value is not a list). */
  async listIn(readParent, parentKey, channel, generation) {
    let base = parentKey ? this.#lists.get(parentKey)?.get(channel) : null;
    let writes = parentKey ? this.#writes.get(parentKey) : null;
    if (parentKey && !base) {
      const parent = await readParent();
      if (parent === undefined) return null;
      const ch = parent?.channels.find((c) => c.channel === channel);
      if (ch && ch.value && !ch.items) return null; // a plain value (Overwrite...): not a list
      const texts = ch?.items ? Array.from(ch.items.texts) : [];
      base = { texts, seqs: texts.map(() => -1), n: texts.length, prefix: 0, generation: null };
      writes = (parent?.writes ?? []).filter((w) => w.items).map((w) => ({ taskPath: w.taskPath,
        taskId: w.taskId, idx: w.idx, channel: w.channel, texts: w.items.texts }));
    }
    base ??= { texts: [], seqs: [], n: 0, prefix: 0, generation: null };
    let hinted = base.generation === generation && base.prefix > 0;
    for (let i = base.prefix; !hinted && base.generation === generation && i < base.n; i++) {
      hinted = base.seqs[i] >= 0;
    }
    // the parent's arrays grown in place when this is their first child, else a copy
    const shared = hinted && base.texts.length === base.n && base.seqs.length === base.n;
    const texts = shared ? base.texts : base.texts.slice(0, base.n);
    const seqs = shared ? base.seqs : hinted ? base.seqs.slice(0, base.n) : new Array(base.n).fill(-1);
    for (const w of sorted((writes ?? []).filter((x) => x.channel === channel && x.idx >= 0))) {
      for (const t of w.texts) {
        if (t.startsWith(REMOVE_HEAD)) continue;
        texts.push(t);
        seqs.push(-1);
      }
    }
    const n = texts.length;
    const prefix = hinted ? base.prefix : 0;
    const items = new Array(n - prefix);
    for (let i = prefix; i < n; i++) items[i - prefix] = seqs[i] >= 0 ? null : texts[i];
    return { items: { items, seqs: hinted ? seqs.slice(prefix, n) : null, key: DELTA_KEY, log: true },
      prefix, hinted, texts, seqs, n };
  }

  /** After a put of `key`: the lists it stored (channel -> { list: listIn's, seqsOut: the
   * seqs of the items after its prefix }), and the lists of the parent it kept (channels
   * whose version it did not change). */
  learn(key, parentKey, stored, kept, generation) {
    const m = new Map();
    const parent = parentKey ? this.#lists.get(parentKey) : null;
    for (const ch of kept) if (parent?.has(ch)) m.set(ch, parent.get(ch));
    for (const [ch, { list, seqsOut }] of stored) {
      const { texts, seqs, n } = list;
      let prefix = list.prefix;
      for (let i = prefix; i < n; i++) seqs[i] = seqsOut ? seqsOut[i - prefix] : -1;
      while (prefix < n && seqs[prefix] === prefix) prefix++;
      m.set(ch, { texts, seqs, n, prefix, generation });
    }
    if (m.size) remember(this.#lists, key, m);
  }

  /** Forgets a thread (deleteThread). */
  forget(threadId) {
    for (const map of [this.#lists, this.#writes]) {
      for (const k of [...map.keys()]) if (k.startsWith(`${threadId}\0`)) map.delete(k);
    }
  }
}

/**
 * LangGraph's getDeltaChannelHistory answered from the store: the checkpoint, then its
 * ancestors listed in one call per stretch of the chain (a time-travel branch point starts
 * a new stretch) without their channels' items, each ancestor's writes resolved from the log
 * by libconvo, and the seed's value read alone (one more call). Returns exactly
 * what BaseCheckpointSaver's walk over getTuple returns: per channel, the writes of every
 * ancestor from the nearest one holding a value of the channel (its `seed`) to the parent,
 * oldest first, each checkpoint's in (task path, task id, idx) order.
 *   valueOf(stored channel or write, its checkpoint) -> the value getTuple gives for it
 *   known: what the saver holds of the thread's log (the Store's known* read options)
 *   hasValue(stored channel) -> whether getTuple shows that channel value
 *   headOf(thread, ns, id) -> { parentId, counters } of a checkpoint the saver put (its
 *     counters_since_delta_snapshot), so the checkpoint itself is not read; else undefined
 */
export async function deltaHistory(store, config, channels, { valueOf, hasValue, threadOf, known, headOf }) {
  if (channels.length === 0) return {};
  const collected = Object.fromEntries(channels.map((ch) => [ch, []]));
  const seeds = {};
  const result = () => Object.fromEntries(channels.map((ch) => [ch, Object.hasOwn(seeds, ch)
    ? { writes: collected[ch], seed: seeds[ch] } : { writes: collected[ch] }]));
  const c = config?.configurable ?? {};
  const threadId = threadOf(c.thread_id);
  if (threadId === undefined || threadId === null) return result();
  const ns = c.checkpoint_ns ?? '';
  const get = async (id) => {
    try {
      return await store.checkpointGet(threadId, ns, id, known);
    } catch (e) {
      if (e instanceof NotFoundError) return undefined;
      throw e;
    }
  };
  const head = c.checkpoint_id ? headOf?.(threadId, ns, c.checkpoint_id) : undefined;
  const target = head ? { id: c.checkpoint_id, parentId: head.parentId,
    metadata: { counters_since_delta_snapshot: head.counters } } : await get(c.checkpoint_id ?? null);
  if (!target) return result();
  // how far back the nearest snapshot is: LangGraph counts the supersteps since it (an
  // updateState checkpoint has no count: its parent's is taken at the branch point)
  const depthOf = (cp) => {
    const counters = cp.metadata?.counters_since_delta_snapshot ?? {};
    let d = 0;
    for (const ch of channels) if (counters[ch]) d = Math.max(d, counters[ch][1] + 2);
    return d;
  };
  let depth = Math.max(8, depthOf(target));
  // the window's checkpoints come without their channels' items (their writes and which
  // channel holds a value are all the walk needs); the seed's value is read alone
  const window = new Map();
  const listed = new Set();
  const page = async (before) => {
    window.clear();
    listed.clear();
    let cps;
    try {
      cps = await store.checkpointList({ threadId, ns, before, limit: depth, withoutChannelItems: true, ...known });
    } catch (e) {
      if (e instanceof NotFoundError) return false; // `before` removed since the saver put it
      throw e;
    }
    for (const cp of cps) {
      window.set(cp.id, cp);
      listed.add(cp);
    }
    return true;
  };
  const remaining = new Set(channels);
  const chain = []; // newest first: [checkpoint, { channel: [write, ...] }]
  let cursor = target.parentId;
  let listedBefore = null;
  walk: while (cursor && remaining.size) {
    let cp = window.get(cursor);
    if (!cp) {
      if (listedBefore !== target.id) {
        listedBefore = target.id;
        if (!(await page(target.id))) return result();
        cp = window.get(cursor);
      }
      if (!cp) {
        cp = await get(cursor); // a branch point, or past the window
        if (!cp) break;
        depth = depthOf(cp) || depth * 2;
        await page(cursor);
      }
    }
    const mine = {};
    for (const w of sorted(cp.writes)) if (remaining.has(w.channel)) (mine[w.channel] ??= []).push(w);
    chain.push([cp, mine]);
    for (const ch of [...remaining]) {
      const stored = cp.channels.find((x) => x.channel === ch);
      if (stored && hasValue(stored)) {
        const whole = listed.has(cp) && stored.items ? await get(cp.id) : cp;
        if (!whole) break walk; // removed since it was listed: the chain ends there
        seeds[ch] = await valueOf(whole.channels.find((x) => x.channel === ch), whole);
        remaining.delete(ch);
      }
    }
    cursor = cp.parentId;
  }
  for (let i = chain.length - 1; i >= 0; i--) {
    const [cp, mine] = chain[i];
    for (const [ch, ws] of Object.entries(mine)) {
      for (const w of ws) collected[ch].push([w.taskId, ch, await valueOf(w, cp)]);
    }
  }
  return result();
}
