// saver.js — ConvoSaver, a LangGraph BaseCheckpointSaver over a convo Store. Message
// channels (default `messages`) live in the thread's log: a put appends the list's new
// items with the checkpoint in one atomic call, getTuple rebuilds the list from the log.
import {
  BaseCheckpointSaver, WRITES_IDX_MAP, TASKS, maxChannelVersion, writesSortKey, compareWritesSortKeys,
} from '@langchain/langgraph-checkpoint';
import { Store } from '../store.js';
import { NotFoundError, ConflictError, InvalidError, codes } from '../errors.js';
import { toLogMessage, logMessageCache, ownerOf, isOwner, fromLogMessages } from './log.js';
import {
  RECORD_TYPE, encodeRecord, decodeRecord, seqsOf, prefixRanges, addRange, rangesEnd,
} from '../internal/records.js';

const MAX_ENTRIES = 1024; // checkpoints whose message records are remembered
const MAX_MIRRORS = 64;   // threads whose log is remembered
const MAX_RETRIES = 8;    // puts retried after another writer grew the log
// The body's key naming the message channels whose list is the log's first N messages
// (their record is not stored: { channel: N }).
const PREFIX_KEY = '__convo_log__';

// The record of a list that is the log's first n messages.
function prefixRecord(n) {
  return { ranges: n > 0 ? [[0, n]] : [], tail: null };
}

function isPrefix(r) {
  return r && !r.tail && (r.ranges.length === 0 || (r.ranges.length === 1 && r.ranges[0][0] === 0));
}

// The body without the saver's PREFIX_KEY, and that key's value (null when absent). A
// checkpoint with a field of its own named PREFIX_KEY is stored with [prefixes, field]
// under that key (the saver's own value is never an array): the field is put back.
function takePrefixes(body) {
  if (!body || typeof body !== 'object' || !Object.hasOwn(body, PREFIX_KEY)) return [body, null];
  const prefixes = body[PREFIX_KEY];
  if (Array.isArray(prefixes)) {
    body[PREFIX_KEY] = prefixes[1];
    return [body, prefixes[0]];
  }
  delete body[PREFIX_KEY];
  return [body, prefixes];
}

// The body to store: the checkpoint without its values, with the prefixes (if any).
function withPrefixes(rest, prefixes) {
  if (Object.hasOwn(rest, PREFIX_KEY)) return { ...rest, [PREFIX_KEY]: [prefixes, rest[PREFIX_KEY]] };
  return Object.keys(prefixes).length ? { ...rest, [PREFIX_KEY]: prefixes } : rest;
}

function remember(map, key, value, max) {
  map.delete(key);
  map.set(key, value);
  if (map.size > max) map.delete(map.keys().next().value);
}

function invalid(message) {
  return new InvalidError(codes.EINVAL, `ConvoSaver: ${message}`);
}

// A number (or bigint) as thread id is taken as its decimal text, as LangGraph's own savers
// take it (PostgresSaver and SqliteSaver store the text, MemorySaver uses it as a key):
// `thread_id: 1` and `thread_id: '1'` name the same thread. Any other type is refused by
// the Store (InvalidError).
function threadText(id) {
  return (typeof id === 'number' && Number.isFinite(id)) || typeof id === 'bigint' ? String(id) : id;
}

function configurableOf(config) {
  const c = config?.configurable;
  return c && threadText(c.thread_id) !== c.thread_id ? { ...c, thread_id: threadText(c.thread_id) } : c;
}

function requireThread(config) {
  const c = configurableOf(config);
  if (!c || c.thread_id === undefined || c.thread_id === null || c.thread_id === '') {
    throw invalid('config.configurable.thread_id is required');
  }
  return c;
}

// A list filter: metadata containment, so an object; Object.keys of a number is empty
// (the filter was ignored) and of a string its indexes.
function listFilter(filter) {
  if (filter === undefined || filter === null) return null;
  if (typeof filter !== 'object' || Array.isArray(filter)) {
    throw invalid(`list filter must be an object, not ${Array.isArray(filter) ? 'an array' : typeof filter}`);
  }
  return Object.keys(filter).length ? filter : null;
}

// LangGraph's order of pending writes: (task path, task id, idx).
function sortWrites(writes) {
  const keyed = writes.map((w) => [writesSortKey(w.taskPath ?? '', w.taskId, w.idx), w]);
  keyed.sort((a, b) => compareWritesSortKeys(a[0], b[0]));
  return keyed.map(([, w]) => w);
}

export class ConvoSaver extends BaseCheckpointSaver {
  #store;
  #owned;
  #entries = new Map(); // thread\0ns\0id -> { records: Map(channel -> record | null), versions }
  #mirrors = new Map(); // thread -> the log's messages as stored (JSON strings)
  #waiting = new Map(); // thread\0ns\0id -> [{ resolve, reject }]: putWrites before its put

  #writesWaitMs;
  #closed = false;

  constructor(urlOrStore, { messageChannels = ['messages'], serde, writesWaitMs = 60000 } = {}) {
    super(serde);
    this.messageChannels = [...messageChannels];
    this.#writesWaitMs = writesWaitMs;
    this.#owned = !(urlOrStore instanceof Store);
    this.#store = this.#owned ? Store.open(urlOrStore) : Promise.resolve(urlOrStore);
    this.#store.catch(() => {}); // reported by the first call that needs the store
  }

  // convo stores a (channel, version) value once per thread and namespace, so a
  // version must never name two values: a branch from an older checkpoint (time
  // travel) would reuse integer versions. As LangGraph's PostgresSaver: the count,
  // zero-padded so versions sort as strings, then a random part; 16 digits and 10
  // base-36 characters (LangGraph's 32 + 16 digits cost ~200 bytes a checkpoint: each
  // version is stored in the body up to four times, in the checkpoint's versions and
  // with the value). A count written wider (32 digits) keeps its width, so the versions
  // of a thread always compare as strings in the order of their counts.
  getNextVersion(current) {
    let n = 0;
    let width = 16;
    if (typeof current === 'number') n = current;
    else if (typeof current === 'string') {
      const count = current.split('.')[0];
      n = parseInt(count, 10) || 0;
      if (/^[0-9]+$/.test(count)) width = Math.max(width, count.length);
    }
    const random = Math.random().toString(36).slice(2, 12).padEnd(10, '0');
    return `${String(n + 1).padStart(width, '0')}.${random}`;
  }

  /** The Store under the saver. */
  store() {
    return this.#store;
  }

  async close() {
    // putWrites calls still waiting for a put fail now (their timers would keep the
    // process alive for writesWaitMs), as do those that would start waiting later
    this.#closed = true;
    for (const key of [...this.#waiting.keys()]) this.#wake(key, false);
    if (this.#owned) await (await this.#store).close();
  }

  async getTuple(config) {
    const c = configurableOf(config) ?? {};
    if (c.thread_id === undefined || c.thread_id === null) return undefined;
    const store = await this.#store;
    let cp;
    try {
      cp = await store.checkpointGet(c.thread_id, c.checkpoint_ns ?? '', c.checkpoint_id ?? null);
    } catch (e) {
      if (e instanceof NotFoundError) return undefined;
      throw e;
    }
    return this.#tuple(store, cp);
  }

  async *list(config, options = {}) {
    const c = configurableOf(config) ?? {};
    const { limit, before, filter } = options ?? {};
    const filterIn = listFilter(filter);
    const store = await this.#store;
    const b = configurableOf(before);
    const list = await store.checkpointList({
      threadId: c.thread_id ?? null,
      ns: c.checkpoint_ns ?? null,
      before: b?.checkpoint_id ?? null,
      beforeThreadId: b?.checkpoint_id ? (b.thread_id ?? null) : null,
      beforeNs: b?.checkpoint_id ? (b.checkpoint_ns ?? null) : null,
      limit: c.checkpoint_id ? 0 : (limit ?? 0),
      filter: filterIn,
    });
    let n = 0;
    for (const cp of list) {
      if (c.checkpoint_id && cp.id !== c.checkpoint_id) continue;
      if (limit && n >= limit) return;
      n++;
      yield await this.#tuple(store, cp);
    }
  }

  async put(config, checkpoint, metadata, newVersions) {
    const c = requireThread(config);
    const threadId = c.thread_id;
    const ns = c.checkpoint_ns ?? '';
    const store = await this.#store;
    const { channel_values: values = {}, ...rest } = checkpoint;
    const versions = { ...checkpoint.channel_versions, ...newVersions };
    const logged = this.messageChannels.filter(
      (ch) => ch in newVersions && Array.isArray(values[ch]));
    const plain = [];
    for (const [channel, version] of Object.entries(versions)) {
      if (logged.includes(channel)) continue;
      let value = null;
      if (channel in newVersions && channel in values) {
        const [type, bytes] = await this.serde.dumpsTyped(values[channel]);
        value = { type, bytes };
      }
      plain.push({ channel, version, value });
    }
    const key = `${threadId}\0${ns}\0${checkpoint.id}`;
    try {
      await this.#putOnce(store, c, threadId, ns, checkpoint, metadata, rest, plain, values, versions,
        logged, newVersions);
    } catch (e) {
      this.#wake(key, false);
      throw e;
    }
    this.#wake(key, true);
    return { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: checkpoint.id } };
  }

  async #putOnce(store, c, threadId, ns, checkpoint, metadata, rest, plain, values, versions, logged,
    newVersions) {
    for (let attempt = 0; ; attempt++) {
      const plan = await this.#plan(store, threadId, ns, c.checkpoint_id, values, versions, logged,
        newVersions);
      // A message channel whose list is the log's first N messages (the usual turn)
      // stores no record: the body says { channel: N }. A record per checkpoint was a
      // row and an index entry of its own on every driver.
      const prefixes = {};
      for (const [ch, r] of plan.records) {
        if (ch in versions && isPrefix(r)) prefixes[ch] = rangesEnd(r.ranges);
      }
      const [bodyType, bodyBytes] = await this.serde.dumpsTyped(withPrefixes(rest, prefixes));
      const channels = plan.channels.map((x) => (x.channel in prefixes ? { ...x, value: null } : x));
      try {
        await store.checkpointPut({
          threadId, ns, id: checkpoint.id, parentId: c.checkpoint_id ?? null,
          metadata: metadata ?? {}, body: { type: bodyType, bytes: bodyBytes },
          channels: plain.concat(channels), logLength: plan.logLength,
          messages: plan.messages, expectedLength: plan.messages.length ? plan.base : -1,
          // the mirror's messages were compared with the list: they must still be the log's
          expectedGeneration: plan.messages.length ? plan.generation : -1,
        });
      } catch (e) {
        // another writer grew the log since it was read: read it again and redo the plan
        if (e instanceof ConflictError && plan.messages.length && attempt < MAX_RETRIES) {
          this.#mirrors.delete(threadId);
          continue;
        }
        throw e;
      }
      const mirror = this.#mirrors.get(threadId);
      if (mirror && mirror.length === plan.base) {
        mirror.owners.length = plan.base;
        mirror.owners.push(...plan.owners);
        mirror.push(...plan.messages);
      }
      else if (plan.messages.length) this.#mirrors.delete(threadId);
      remember(this.#entries, `${threadId}\0${ns}\0${checkpoint.id}`,
        { records: plan.records, versions }, MAX_ENTRIES);
      return;
    }
  }

  async putWrites(config, writes, taskId, taskPath = '') {
    const c = requireThread(config);
    const store = await this.#store;
    const w = [];
    for (const [i, [channel, value]] of writes.entries()) {
      const [type, bytes] = await this.serde.dumpsTyped(value);
      w.push({ idx: WRITES_IDX_MAP[channel] ?? i, channel, value: { type, bytes } });
    }
    const ns = c.checkpoint_ns ?? '';
    try {
      await store.checkpointPutWrites(c.thread_id, ns, c.checkpoint_id, taskId, taskPath ?? '', w);
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
      // LangGraph's loop does not wait for a checkpoint's put before it saves the
      // writes of that checkpoint's tasks (the put is chained after the previous
      // puts; the writes go at once), and convo keeps writes only for a stored
      // checkpoint: wait until this saver has put it, then save them.
      await this.#putOf(`${c.thread_id}\0${ns}\0${c.checkpoint_id}`, e);
      await store.checkpointPutWrites(c.thread_id, ns, c.checkpoint_id, taskId, taskPath ?? '', w);
    }
  }

  // Resolves once this saver has put the checkpoint `key` (at once if it has already);
  // rejects with `notFound` if that put fails or does not come within writesWaitMs.
  #putOf(key, notFound) {
    if (this.#entries.has(key)) return Promise.resolve();
    if (this.#closed) return Promise.reject(notFound);
    return new Promise((resolve, reject) => {
      const waiter = { resolve, reject: () => reject(notFound) };
      const list = this.#waiting.get(key) ?? [];
      list.push(waiter);
      this.#waiting.set(key, list);
      const timer = setTimeout(() => {
        const l = this.#waiting.get(key) ?? [];
        const i = l.indexOf(waiter);
        if (i >= 0) l.splice(i, 1);
        if (!l.length) this.#waiting.delete(key);
        waiter.reject();
      }, this.#writesWaitMs);
      waiter.resolve = () => { clearTimeout(timer); resolve(); };
      const rejectNow = waiter.reject;
      waiter.reject = () => { clearTimeout(timer); rejectNow(); };
    });
  }

  // Wakes the putWrites calls waiting for the put of `key`.
  #wake(key, ok) {
    const list = this.#waiting.get(key);
    if (!list) return;
    this.#waiting.delete(key);
    for (const w of list) (ok ? w.resolve : w.reject)();
  }

  async deleteThread(id) {
    const threadId = threadText(id);
    const store = await this.#store;
    this.#mirrors.delete(threadId);
    for (const k of [...this.#entries.keys()]) {
      if (k.startsWith(`${threadId}\0`)) this.#entries.delete(k);
    }
    try {
      await store.delete(threadId);
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
    }
  }

  // Where each changed message channel's list goes: the items past what its parent
  // already holds in the log are appended when the list extends the parent's; a list
  // that does not (time travel, removal, replacement) keeps the prefix it shares with
  // the log and stores the rest inline.
  async #plan(store, threadId, ns, parentId, values, versions, logged, newVersions) {
    const records = new Map();
    let parent = null;
    if (this.messageChannels.length && parentId) {
      parent = await this.#entry(store, threadId, ns, parentId);
      if (parent) for (const [ch, r] of parent.records) records.set(ch, r);
    }
    // An unchanged message channel whose version is not the parent's (LangGraph's
    // updateState(..., '__copy__') puts a copy with the copied checkpoint's parent and no
    // new versions): the parent's record is not its value. Its list, when the log's
    // first N messages, goes in the body as such; else the value stored with that version.
    const unknown = [];
    for (const ch of this.messageChannels) {
      if (ch in newVersions) {
        if (!logged.includes(ch)) records.set(ch, null);
      } else if (ch in versions && String(parent?.versions?.[ch]) !== String(versions[ch])) {
        records.delete(ch);
        if (Array.isArray(values[ch])) unknown.push(ch);
      }
    }
    const plan = { channels: [], messages: [], owners: [], base: 0, generation: 0, records,
      logLength: 0 };
    if (unknown.length) {
      let mirror = await this.#mirror(store, threadId);
      if (unknown.some((ch) => values[ch].length > mirror.length)) {
        this.#mirrors.delete(threadId);
        mirror = await this.#mirror(store, threadId);
      }
      const cached = logMessageCache(this.serde);
      for (const ch of unknown) {
        const items = values[ch];
        let m = 0;
        while (m < items.length && m < mirror.length && mirror[m] === (cached(items[m]) ??
          await toLogMessage(this.serde, items[m]))) m++;
        if (m === items.length) records.set(ch, prefixRecord(m));
      }
    }
    if (logged.length) {
      let mirror = await this.#mirror(store, threadId);
      const needed = Math.max(0, ...logged.map((ch) => rangesEnd(records.get(ch)?.ranges ?? [])));
      if (needed > mirror.length) {
        this.#mirrors.delete(threadId);
        mirror = await this.#mirror(store, threadId);
      }
      plan.base = mirror.length;
      plan.generation = mirror.generation;
      let next = plan.base;
      // Every item of the list is compared with the log on every put (a thousand at turn
      // 1,000). An item this saver appended is known again by identity (mirror.owners, by
      // seq); only others are looked up in the serde's cache or serialized. No array of
      // seqs or texts is built for the comparison. (Before, with a cache lookup per item,
      // a put cost ~0.3 us more per item of history: docs/performance.md.)
      const cached = logMessageCache(this.serde);
      const owners = mirror.owners;
      for (const ch of logged) {
        const items = values[ch];
        const prev = records.has(ch) ? records.get(ch) : { ranges: [], tail: null };
        // m = the length of the longest prefix of items that is the record's messages in the log
        let m = 0;
        let count = 0;
        if (prev) {
          for (const [s, e] of prev.ranges) count += e - s;
          compare: for (const [s, e] of prev.ranges) {
            for (let q = s; q < e; q++) {
              if (m === items.length) break compare;
              if (!isOwner(owners[q], items[m]) &&
                  mirror[q] !== (cached(items[m]) ?? await toLogMessage(this.serde, items[m]))) break compare;
              m++;
            }
          }
        }
        let record;
        if (prev && !prev.tail && m === count) {
          const fresh = [];
          for (let k = m; k < items.length; k++) {
            fresh.push(cached(items[k]) ?? await toLogMessage(this.serde, items[k]));
            plan.owners.push(ownerOf(items[k]));
          }
          record = { ranges: addRange(prev.ranges, next, next + fresh.length), tail: null };
          plan.messages.push(...fresh);
          next += fresh.length;
        } else {
          const restItems = items.slice(m);
          record = { ranges: prefixRanges(prev ? prev.ranges : [], m),
            tail: restItems.length ? await this.serde.dumpsTyped(restItems) : null };
        }
        records.set(ch, record);
        plan.channels.push({ channel: ch, version: versions[ch],
          value: encodeRecord(record.ranges, record.tail) });
      }
    }
    for (const r of records.values()) if (r) plan.logLength = Math.max(plan.logLength, rangesEnd(r.ranges));
    return plan;
  }

  // The message records of a stored checkpoint, from memory or from the store.
  async #entry(store, threadId, ns, id) {
    const key = `${threadId}\0${ns}\0${id}`;
    const hit = this.#entries.get(key);
    if (hit) return hit;
    let cp;
    try {
      cp = await store.checkpointGet(threadId, ns, id);
    } catch (e) {
      if (e instanceof NotFoundError) return null;
      throw e;
    }
    const records = new Map();
    const versions = {};
    let prefixes;
    for (const ch of cp.channels) {
      if (!this.messageChannels.includes(ch.channel)) continue;
      versions[ch.channel] = ch.version;
      if (ch.value) {
        records.set(ch.channel, ch.value.type === RECORD_TYPE ? decodeRecord(ch.value) : null);
        continue;
      }
      prefixes ??= takePrefixes(await this.serde.loadsTyped(cp.body.type, cp.body.bytes))[1] ?? {};
      if (Object.hasOwn(prefixes, ch.channel)) records.set(ch.channel, prefixRecord(prefixes[ch.channel]));
    }
    const entry = { records, versions };
    remember(this.#entries, key, entry, MAX_ENTRIES);
    return entry;
  }

  // The thread's log as stored, from memory or loaded whole.
  async #mirror(store, threadId) {
    const hit = this.#mirrors.get(threadId);
    if (hit) return hit;
    let texts = [];
    texts.generation = 0; // a thread not there yet
    try {
      texts = await store.loadTexts(threadId);
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
    }
    texts.owners = [];   // by seq: the item each text was appended from by this saver
    remember(this.#mirrors, threadId, texts, MAX_MIRRORS);
    return texts;
  }

  async #tuple(store, cp) {
    const [body, prefixes] = takePrefixes(await this.serde.loadsTyped(cp.body.type, cp.body.bytes));
    const records = [];
    const channelValues = {};
    for (const ch of cp.channels) {
      if (!ch.value) {
        // a stored value (an older record) wins; else the body may say it is a log prefix
        if (prefixes && Object.hasOwn(prefixes, ch.channel)) {
          records.push([ch.channel, prefixRecord(prefixes[ch.channel])]);
        }
        continue;
      }
      if (ch.value.type === RECORD_TYPE) records.push([ch.channel, decodeRecord(ch.value)]);
      else channelValues[ch.channel] = await this.serde.loadsTyped(ch.value.type, ch.value.bytes);
    }
    if (records.length) {
      const all = records.flatMap(([, r]) => r.ranges);
      let from = Infinity, to = 0;
      for (const [s, e] of all) if (e > s) { from = Math.min(from, s); to = Math.max(to, e); }
      let texts = [];
      if (to > 0) {
        texts = await store.loadTexts(cp.threadId, from, to - from);
      }
      for (const [channel, r] of records) {
        const items = await fromLogMessages(this.serde, seqsOf(r.ranges).map((s) => texts[s - from]));
        if (r.tail) items.push(...(await this.serde.loadsTyped(r.tail[0], r.tail[1])));
        channelValues[channel] = items;
      }
    }
    const checkpoint = { ...body, channel_values: channelValues };
    if (checkpoint.v < 4 && cp.parentId) await this.#migratePendingSends(store, cp, checkpoint);
    const tuple = {
      config: { configurable: { thread_id: cp.threadId, checkpoint_ns: cp.ns, checkpoint_id: cp.id } },
      checkpoint,
      metadata: cp.metadata,
      pendingWrites: [],
    };
    for (const w of sortWrites(cp.writes)) {
      tuple.pendingWrites.push([w.taskId, w.channel, await this.serde.loadsTyped(w.value.type, w.value.bytes)]);
    }
    if (cp.parentId) {
      tuple.parentConfig = { configurable: { thread_id: cp.threadId, checkpoint_ns: cp.ns,
        checkpoint_id: cp.parentId } };
    }
    return tuple;
  }

  // A checkpoint older than format 4 kept its pending sends as its parent's TASKS
  // writes: they become the TASKS channel, as LangGraph's own savers do.
  async #migratePendingSends(store, cp, checkpoint) {
    let parent;
    try {
      parent = await store.checkpointGet(cp.threadId, cp.ns, cp.parentId);
    } catch (e) {
      if (e instanceof NotFoundError) return;
      throw e;
    }
    const sends = [];
    for (const w of sortWrites(parent.writes)) {
      if (w.channel === TASKS) sends.push(await this.serde.loadsTyped(w.value.type, w.value.bytes));
    }
    checkpoint.channel_values[TASKS] = sends;
    checkpoint.channel_versions ??= {};
    const versions = Object.values(checkpoint.channel_versions);
    checkpoint.channel_versions[TASKS] = versions.length > 0
      ? maxChannelVersion(...versions) : this.getNextVersion(undefined);
  }
}
