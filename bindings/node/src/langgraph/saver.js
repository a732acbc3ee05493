// saver.js — ConvoSaver, a LangGraph BaseCheckpointSaver over a convo Store: a thin mapper
// onto libconvo's log references. Message channels (default `messages`), the `__start__`
// input's messages and pending writes to message channels go to the Store as lists of items
// (./items.js); libconvo decides what enters the thread's log and keeps each message once.
import {
  BaseCheckpointSaver, WRITES_IDX_MAP, TASKS, maxChannelVersion, writesSortKey, compareWritesSortKeys,
} from '@langchain/langgraph-checkpoint';
import { Store, steps } from '../store.js';
import { drive, driveAsync } from '../internal/drive.js';
import { NotFoundError, ConflictError, InvalidError, CorruptError, codes } from '../errors.js';
import { fromLogMessages, toLogMessage, dumpsTyped } from './log.js';
import { Hints, INPUT, listInSteps, inputKey, asCommitted } from './items.js';
import { Revived } from './revived.js';
import { RECORD_TYPE, takePrefixes, wrapOwnField, legacyRecords, recordsSpan, seqsOf } from './legacy.js';
import { DeltaLists, deltaHistory, isDeltaList, snapshotList, selectionOf, selected, snapshotOut,
  DELTA_KEY, SNAPSHOT_KEY } from './delta.js';

const MAX_PUTS = 1024;      // checkpoints this saver remembers having put (for putWrites)

function remember(map, key, value, max) {
  map.delete(key);
  map.set(key, value);
  if (map.size > max) map.delete(map.keys().next().value);
}

function invalid(message) {
  return new InvalidError(codes.EINVAL, `ConvoSaver: ${message}`);
}

// The drivers in the process (memory:, sqlite:): their calls take microseconds, so the saver
// runs them on the main thread (Store.open's `sync`) and each of its promises is settled
// before LangGraph's next step runs, as LangGraph's SqliteSaver does with better-sqlite3.
const EMBEDDED = new Set(['memory', 'sqlite']);

function syncFor(urlOrStore, sync) {
  if (urlOrStore instanceof Store) {
    if (sync !== undefined) throw invalid('sync is for a URL: open the Store with Store.open(url, { sync })');
    return undefined;
  }
  if (sync !== undefined && typeof sync !== 'boolean') throw invalid(`sync must be a boolean, not ${typeof sync}`);
  const scheme = typeof urlOrStore === 'string' ? urlOrStore.slice(0, Math.max(0, urlOrStore.indexOf(':'))) : '';
  return sync ?? EMBEDDED.has(scheme.toLowerCase());
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
  #opened = null;           // the Store once #store has resolved: a put need not wait for it
  #owned;
  #puts = new Map();       // thread\0ns\0id -> { parentId, counters }: checkpoints this saver put
  #revived;                 // revived items per thread, generation and seq (revived.js)
  #hints = new Hints();
  #delta = new DeltaLists(); // delta.js: what a put of a DeltaChannel's list needs
  #writing = new Map();     // thread\0ns\0id -> Set of putWrites calls under way on it
  #waiting = new Map(); // thread\0ns\0id -> [{ resolve, reject }]: putWrites before its put

  #writesWaitMs;
  #closed = false;

  constructor(urlOrStore, { messageChannels = ['messages'], serde, writesWaitMs = 60000,
    coerceMessages = true, cache = {}, sync } = {}) {
    super(serde);
    const syncCalls = syncFor(urlOrStore, sync);
    const { threads = 64, items = 100000 } = cache === false ? { threads: 0, items: 0 } : cache;
    for (const [k, v] of [['threads', threads], ['items', items]]) {
      if (!Number.isSafeInteger(v) || v < 0) throw invalid(`cache.${k} must be an integer >= 0, not ${v}`);
    }
    this.#revived = new Revived({ threads, items });
    this.messageChannels = [...messageChannels];
    this.coerceMessages = coerceMessages;
    this.#writesWaitMs = writesWaitMs;
    this.#owned = !(urlOrStore instanceof Store);
    this.#store = this.#owned ? Store.open(urlOrStore, { sync: syncCalls }) : Promise.resolve(urlOrStore);
    this.#store.then((s) => { this.#opened = s; }, () => {}); // an error is reported by the first call that needs the store
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
    // the items revived before are not read again (their texts come back null)
    const held = this.#revived.hold(c.thread_id);
    let cp;
    try {
      cp = await store.checkpointGet(c.thread_id, c.checkpoint_ns ?? '', c.checkpoint_id ?? null,
        Revived.known(held));
    } catch (e) {
      if (e instanceof NotFoundError) return undefined;
      throw e;
    }
    return this.#tuple(store, cp, held);
  }

  async *list(config, options = {}) {
    const c = configurableOf(config) ?? {};
    const { limit, before, filter } = options ?? {};
    const filterIn = listFilter(filter);
    const store = await this.#store;
    const b = configurableOf(before);
    const held = c.thread_id === undefined || c.thread_id === null ? null : this.#revived.hold(c.thread_id);
    const list = await store.checkpointList({
      threadId: c.thread_id ?? null,
      ns: c.checkpoint_ns ?? null,
      before: b?.checkpoint_id ?? null,
      beforeThreadId: b?.checkpoint_id ? (b.thread_id ?? null) : null,
      beforeNs: b?.checkpoint_id ? (b.checkpoint_ns ?? null) : null,
      limit: c.checkpoint_id ? 0 : (limit ?? 0),
      filter: filterIn,
      ...Revived.known(held),
    });
    let n = 0;
    for (const cp of list) {
      if (c.checkpoint_id && cp.id !== c.checkpoint_id) continue;
      if (limit && n >= limit) return;
      n++;
      // a listing across threads revives into the cache only threads already in it
      yield await this.#tuple(store, cp, held, c.thread_id !== undefined && c.thread_id !== null);
    }
  }

  /** LangGraph's walk over DeltaChannels' histories, in a bounded number of store calls that
   * read only the log this saver does not hold (delta.js). */
  async getDeltaChannelHistory({ config, channels }) {
    const store = await this.#store;
    const c = configurableOf(config);
    const held = c?.thread_id === undefined || c?.thread_id === null ? null : this.#revived.hold(c.thread_id);
    return deltaHistory(store, config, channels, {
      threadOf: threadText,
      known: Revived.known(held),
      headOf: (threadId, ns, id) => this.#puts.get(`${threadId}\0${ns}\0${id}`),
      hasValue: (ch) => (ch.items ? !isDeltaList(ch.items) : Boolean(ch.value) && ch.value.type !== RECORD_TYPE),
      valueOf: (x, cp) => this.#writeValue(x, cp.threadId, this.#revived.logOf(cp.threadId, cp, held), held),
    });
  }

  // put and putWrites run as generators of their steps (../internal/drive.js): on a store
  // opened with { sync: true } and LangGraph's own serde every step is a value, so the call
  // is done when it returns and its promise is settled before LangGraph's next step runs.
  put(config, checkpoint, metadata, newVersions) {
    return driveAsync(this.#put(config, checkpoint, metadata, newVersions));
  }

  *#put(config, checkpoint, metadata, newVersions) {
    const c = requireThread(config);
    const threadId = c.thread_id;
    const ns = c.checkpoint_ns ?? '';
    const key = `${threadId}\0${ns}\0${checkpoint.id}`;
    try {
      const committed = this.#committedInput(checkpoint, newVersions); // before any await
      const store = this.#opened ?? (yield this.#store);
      // LangGraph's loop does not wait for the writes of a step before it puts the next
      // checkpoint: this put waits for those this saver is storing on its parent, so that
      // it finds them and turns those it commits into log references
      const writing = this.#writing.get(`${threadId}\0${ns}\0${c.checkpoint_id}`);
      if (writing) yield Promise.allSettled([...writing]);
      yield* this.#putOnce(store, c, committed, metadata, newVersions);
    } catch (e) {
      this.#wake(key, false);
      throw e;
    }
    // what getDeltaChannelHistory needs of it (delta.js), so it does not read it again
    const counters = metadata?.counters_since_delta_snapshot;
    remember(this.#puts, key, { parentId: c.checkpoint_id ?? null,
      counters: counters === undefined ? undefined : structuredClone(counters) }, MAX_PUTS);
    this.#wake(key, true);
    return { configurable: { thread_id: threadId, checkpoint_ns: ns, checkpoint_id: checkpoint.id } };
  }

  // One checkpointPut: message lists as items with the seqs this saver knows, conditional on
  // the generation it last read the thread at (a thread rewritten since: the put is made
  // again with texts only, unconditional, and teaches no seq).
  *#putOnce(store, c, checkpoint, metadata, newVersions) {
    const threadId = c.thread_id;
    const { channel_values: values = {}, ...rest } = checkpoint;
    const versions = { ...checkpoint.channel_versions, ...newVersions };
    const [bodyType, bodyBytes] = yield dumpsTyped(this.serde, wrapOwnField(rest));
    let log = this.#revived.current(threadId) ?? (yield this.#readLog(store, threadId)); // hints' token
    for (let attempt = 0; ; attempt++) {
      const { channels, lists, deltas } = yield* this.#channelsIn(store, c, log, values, versions, newVersions);
      let put;
      try {
        put = yield* store[steps].checkpointPut({
          threadId, ns: c.checkpoint_ns ?? '', id: checkpoint.id, parentId: c.checkpoint_id ?? null,
          metadata: metadata ?? {}, body: { type: bodyType, bytes: bodyBytes }, channels,
          expectedGeneration: log ? log.generation : -1,
        });
      } catch (e) {
        if (!(e instanceof ConflictError) || !log || attempt > 0) throw e;
        this.#revived.drop(threadId);
        log = null;
        continue;
      }
      // what followed each list's log prefix: the seqs the put gave its items
      for (const [ch, rest] of lists) this.#hints.learn(rest, put.seqsOut[ch], threadId, log);
      this.#delta.learn(this.#key(c, checkpoint.id), c.checkpoint_id ? this.#key(c, c.checkpoint_id) : null,
        deltas.map(([ch, list]) => [ch, { list, seqsOut: put.seqsOut[ch] }]),
        this.messageChannels.filter((ch) => !(ch in newVersions)), log);
      return;
    }
  }

  // A Log for a thread this saver has not read: its generation and message 0's time, read once
  // before its first put (a thread not there yet: generation 0, origin unknown).
  async #readLog(store, threadId) {
    let generation = 0;
    let origin = -1;
    try {
      const h = await store.load(threadId, { limit: 1, withExtra: false });
      generation = h.generation;
      if (h.messages.length) origin = h.messages[0].createdAt;
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
    }
    return this.#revived.adopt(threadId, generation, origin);
  }

  // The Store's channels of a put: a value for each new version; a message channel's list
  // (log: its new items enter the log) and the input's message list as items.
  *#channelsIn(store, c, log, values, versions, newVersions) {
    const threadId = c.thread_id;
    const channels = [];
    const lists = [];
    const deltas = [];
    for (const [channel, version] of Object.entries(versions)) {
      const message = this.messageChannels.includes(channel);
      const snap = message && channel in values ? snapshotList(values[channel]) : null;
      if (message && channel in newVersions && (snap || !(channel in values))) {
        const d = yield this.#deltaIn(store, c, log, channel, snap);
        if (d) {
          channels.push({ channel, version, items: d.items, logPrefix: d.prefix });
          deltas.push([channel, d]);
          continue;
        }
      }
      if (!(channel in newVersions) || !(channel in values)) {
        channels.push({ channel, version, value: null });
        continue;
      }
      const v = values[channel];
      const key = channel === INPUT ? inputKey(v, this.messageChannels) : snap ? SNAPSHOT_KEY : null;
      if (key === null && !(message && Array.isArray(v))) {
        const [type, bytes] = yield dumpsTyped(this.serde, v);
        channels.push({ channel, version, value: { type, bytes } });
        continue;
      }
      const list = key === null ? v : v[key];
      const r = yield* listInSteps(this.serde, this.#hints, list, threadId, log, key === null || Boolean(snap));
      if (key !== null) {
        const { [key]: _, ...others } = snap ? { ...snap.rest, [key]: list } : v;
        r.items.key = key;
        if (Object.keys(others).length) {
          const [type, bytes] = yield dumpsTyped(this.serde, others);
          r.items.rest = { type, bytes };
        }
      }
      channels.push({ channel, version, items: r.items, logPrefix: r.prefix });
      lists.push([channel, r.prefix ? list.slice(r.prefix) : list]);
    }
    return { channels, lists, deltas };
  }

  // A DeltaChannel's step (delta.js): the channel's delta list, so the step's new messages
  // enter the log with this put; a snapshot is the same list with which of its items the
  // snapshot holds. null when the parent's value is no list.
  async #deltaIn(store, c, log, channel, snap) {
    const d = await this.#delta.listIn(() => this.#parentOf(store, c),
      c.checkpoint_id ? this.#key(c, c.checkpoint_id) : null, channel, log);
    if (d && snap) {
      const segs = await selectionOf(d, snap.list, (x) => this.#hints.seqOf(x, c.thread_id, log),
        (x) => toLogMessage(this.serde, x));
      const [type, bytes] = await this.serde.dumpsTyped({ ...snap.rest, convo_select: segs });
      d.items.rest = { type, bytes };
    }
    return d;
  }

  #key(c, id) {
    return `${c.thread_id}\0${c.checkpoint_ns ?? ''}\0${id}`;
  }

  // The parent of a put (for its delta lists), null when it is not stored.
  async #parentOf(store, c) {
    try {
      return await store.checkpointGet(c.thread_id, c.checkpoint_ns ?? '', c.checkpoint_id);
    } catch (e) {
      if (e instanceof NotFoundError) return null;
      throw e;
    }
  }

  // An input's or a write's message list as add_messages will commit it (items.js). Done
  // as the call comes in, before the step's reducer may run and give the messages ids.
  #committed(list) {
    return this.coerceMessages ? list.map(asCommitted) : list;
  }

  #committedInput(checkpoint, newVersions) {
    const v = checkpoint.channel_values?.[INPUT];
    const key = INPUT in newVersions ? inputKey(v, this.messageChannels) : null;
    if (key === null || !this.coerceMessages) return checkpoint;
    return { ...checkpoint, channel_values: { ...checkpoint.channel_values,
      [INPUT]: { ...v, [key]: this.#committed(v[key]) } } };
  }


  putWrites(config, writes, taskId, taskPath = '') {
    try {
      const c = requireThread(config);
      const done = drive(this.#putWrites(c, writes, taskId, taskPath));
      return done instanceof Promise ? this.#underWay(c, done) : Promise.resolve();
    } catch (e) {
      return Promise.reject(e);
    }
  }

  // A putWrites call that had to wait, known as under way on its checkpoint until it is done.
  async #underWay(c, call) {
    const key = `${c.thread_id}\0${c.checkpoint_ns ?? ''}\0${c.checkpoint_id}`;
    let set = this.#writing.get(key);
    if (!set) this.#writing.set(key, (set = new Set()));
    set.add(call);
    try {
      await call;
    } finally {
      set.delete(call);
      if (!set.size && this.#writing.get(key) === set) this.#writing.delete(key);
    }
  }

  *#putWrites(c, writes, taskId, taskPath) {
    const lists = writes.map(([channel, value]) => (this.messageChannels.includes(channel) &&
      Array.isArray(value) ? this.#committed(value) : null)); // before any await
    const w = [];
    for (const [i, [channel, value]] of writes.entries()) {
      const idx = WRITES_IDX_MAP[channel] ?? i;
      if (lists[i]) {
        // never hinted: a write is not conditional on the generation; its items stay
        // inline until the put that appends them turns them into references
        const r = yield* listInSteps(this.serde, this.#hints, lists[i], c.thread_id, null, false);
        w.push({ idx, channel, items: r.items });
      } else {
        const [type, bytes] = yield dumpsTyped(this.serde, value);
        w.push({ idx, channel, value: { type, bytes } });
      }
    }
    const store = this.#opened ?? (yield this.#store);
    const ns = c.checkpoint_ns ?? '';
    try {
      yield* store[steps].checkpointPutWrites(c.thread_id, ns, c.checkpoint_id, taskId, taskPath ?? '', w);
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
      // LangGraph's loop does not wait for a checkpoint's put before it saves the
      // writes of that checkpoint's tasks (the put is chained after the previous
      // puts; the writes go at once), and convo keeps writes only for a stored
      // checkpoint: wait until this saver has put it, then save them.
      yield this.#putOf(`${c.thread_id}\0${ns}\0${c.checkpoint_id}`, e);
      yield* store[steps].checkpointPutWrites(c.thread_id, ns, c.checkpoint_id, taskId, taskPath ?? '', w);
    }
    // stored: a DeltaChannel's next put lists them (delta.js)
    for (const x of w) {
      if (x.items) this.#delta.recordWrite(this.#key(c, c.checkpoint_id), taskId, taskPath, x.idx, x.channel, x.items.items);
    }
  }

  // Resolves once this saver has put the checkpoint `key` (at once if it has already);
  // rejects with `notFound` if that put fails or does not come within writesWaitMs.
  #putOf(key, notFound) {
    if (this.#puts.has(key)) return Promise.resolve();
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
    this.#revived.drop(threadId);
    this.#delta.forget(threadId);
    for (const k of [...this.#puts.keys()]) {
      if (k.startsWith(`${threadId}\0`)) this.#puts.delete(k);
    }
    try {
      await store.delete(threadId);
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
    }
  }

  // The value a resolved list of the Store stores (the list, or the object holding it under
  // its key), its items revived once per thread, generation and seq (revived.js).
  async #listValue(stored, threadId, log, held) {
    if (typeof stored.key === 'string' && stored.key.startsWith('__convo_') && stored.key !== DELTA_KEY) {
      // a reserved name of a later layout (docs/checkpoints.md, the delta list's layout)
      throw new CorruptError(codes.ECORRUPT,
        `a list stored under '${stored.key}', a layout this version of convo does not know`);
    }
    if (stored.key === DELTA_KEY) { // delta.js: a delta list alone is no value
      const sub = stored.rest ? await selected(this.serde, stored) : null;
      return sub && snapshotOut({ ...sub.rest,
        [SNAPSHOT_KEY]: await this.#revived.items(this.serde, this.#hints, sub, threadId, log, held) });
    }
    const values = await this.#revived.items(this.serde, this.#hints, stored, threadId, log, held);
    if (stored.key === null) return values;
    const obj = stored.rest ? await this.serde.loadsTyped(stored.rest.type, stored.rest.bytes) : {};
    obj[stored.key] = values;
    return stored.key === SNAPSHOT_KEY ? snapshotOut(obj) : obj;
  }

  // The value of a stored pending write.
  async #writeValue(w, threadId, log, held) {
    if (w.items) return this.#listValue(w.items, threadId, log, held);
    return this.serde.loadsTyped(w.value.type, w.value.bytes);
  }

  // The tuple of a checkpoint read with `held` (what the read said it held of the log).
  async #tuple(store, cp, held, cache = true) {
    const [body, prefixes] = takePrefixes(await this.serde.loadsTyped(cp.body.type, cp.body.bytes));
    const log = this.#revived.logOf(cp.threadId, cp, held, cache);
    const channelValues = {};
    for (const ch of cp.channels) {
      if (isDeltaList(ch.items)) continue; // delta.js: not a value LangGraph put
      if (ch.items) {
        channelValues[ch.channel] = await this.#listValue(ch.items, cp.threadId, log, held);
      } else if (ch.value && ch.value.type !== RECORD_TYPE) {
        channelValues[ch.channel] = await this.serde.loadsTyped(ch.value.type, ch.value.bytes);
      }
    }
    await this.#legacyValues(store, cp, prefixes, channelValues);
    const checkpoint = { ...body, channel_values: channelValues };
    if (checkpoint.v < 4 && cp.parentId) await this.#migratePendingSends(store, cp, checkpoint);
    const tuple = {
      config: { configurable: { thread_id: cp.threadId, checkpoint_ns: cp.ns, checkpoint_id: cp.id } },
      checkpoint,
      metadata: cp.metadata,
      pendingWrites: [],
    };
    for (const w of sortWrites(cp.writes)) {
      tuple.pendingWrites.push([w.taskId, w.channel, await this.#writeValue(w, cp.threadId, log, held)]);
    }
    if (cp.parentId) {
      tuple.parentConfig = { configurable: { thread_id: cp.threadId, checkpoint_ns: cp.ns,
        checkpoint_id: cp.parentId } };
    }
    return tuple;
  }

  // Message channels of a checkpoint stored by the saver's earlier format (legacy.js): the
  // log's messages its records name (one load), then their inline tails.
  async #legacyValues(store, cp, prefixes, channelValues) {
    const records = legacyRecords(cp.channels, prefixes);
    if (!records.length) return;
    const [from, to] = recordsSpan(records);
    const texts = to > from ? await store.loadTexts(cp.threadId, from, to - from) : [];
    for (const [channel, r] of records) {
      const items = await fromLogMessages(this.serde, seqsOf(r.ranges).map((q) => texts[q - from]));
      if (r.tail) items.push(...(await this.serde.loadsTyped(r.tail[0], r.tail[1])));
      channelValues[channel] = items;
    }
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
      if (w.channel === TASKS) sends.push(await this.#writeValue(w, cp.threadId, null, null));
    }
    checkpoint.channel_values[TASKS] = sends;
    checkpoint.channel_versions ??= {};
    const versions = Object.values(checkpoint.channel_versions);
    checkpoint.channel_versions[TASKS] = versions.length > 0
      ? maxChannelVersion(...versions) : this.getNextVersion(undefined);
  }
}
