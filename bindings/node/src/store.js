// store.js — Store: every call of include/convo.h as a Promise. Calls that reach
// the backend run on libuv's thread pool (koffi async), so the event loop keeps going;
// a store opened with { sync: true } runs them on the calling thread instead.
import {
  C, loadLibrary, callAsync, copyBytes, copyText, newError, koffi, WriteFn, ReadFn,
} from './internal/library.js';
import { fromCall, InvalidError, ConflictError, codes } from './errors.js';
import { text, optText, int, list, options, known, bool } from './internal/args.js';
import { listOptions, readPage } from './internal/threads.js';
import { itemsIn, itemsOut, seqsOut, releaseItems } from './internal/items.js';
import { drive } from './internal/drive.js';

/** For this package's adapters, not exported by it: `store[steps]` gives some calls as
 * generators of their steps (../internal/drive.js), so that an adapter on a store opened with
 * { sync: true } finishes its own call without waiting for a turn of the event loop. */
export const steps = Symbol('convo.Store.steps');


function fail(rc, err) {
  return fromCall(rc, err, C.convo_strerror);
}

function json(value, what) {
  if (value === undefined || value === null) return null;
  if (typeof value === 'string') return value;
  try {
    return JSON.stringify(value);
  } catch (e) {
    throw new InvalidError(codes.EINVAL, `${what}: ${e.message}`);
  }
}

function toBytes(b, what = 'a blob is { type, bytes } with bytes') {
  if (typeof b === 'string') return Buffer.from(b);
  if (Buffer.isBuffer(b)) return b;
  if (b instanceof Uint8Array) return Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  throw new InvalidError(codes.EINVAL, `${what} a Uint8Array or string`);
}

function blobIn(v, what) {
  if (!v) return null;
  const bytes = toBytes(v.bytes);
  return { type: text(v.type, `${what}.type`), bytes, len: bytes.length };
}

function blobOut(b) {
  if (!b || b.type === null) return null;
  return { type: b.type, bytes: copyBytes(b.bytes, b.len) };
}

function messageBuffers(messages) {
  const bufs = list(messages, 'messages').map((m) => (typeof m === 'string' ? Buffer.from(m) :
    Buffer.isBuffer(m) || m instanceof Uint8Array ? toBytes(m) : Buffer.from(JSON.stringify(m))));
  return { bufs, lengths: bufs.map((b) => b.length) };
}

// A message of the caller's view of a tail: a loaded message ({ seq, json, ... }: its
// exact text), or what append takes.
function suffixBuffers(suffix) {
  return messageBuffers(list(suffix, 'expectedSuffix').map((m) =>
    (m && typeof m === 'object' && typeof m.json === 'string' && typeof m.seq === 'number' ? m.json : m)));
}

// A pop that loses a race with another writer reads the tail again, this many times
// at most (as `convo pop` does).
const POP_ATTEMPTS = 50;

// A checkpoint read back from the library, as a plain object.
/** What a caller holds of a thread's log (convo_checkpoint_get_ex): { knownGeneration,
 * knownLength, knownOrigin } as the three C fields (-1, 0, -1 when absent). */
function knownOpts(o) {
  const { knownGeneration = -1, knownLength = 0, knownOrigin = -1 } = o;
  return { known_generation: int(knownGeneration, 'knownGeneration', -1),
    known_length: int(knownLength, 'knownLength', 0), known_origin: int(knownOrigin, 'knownOrigin', -1) };
}

const LIST_KEYS = ['threadId', 'ns', 'before', 'beforeThreadId', 'beforeNs', 'limit', 'filter',
  'knownGeneration', 'knownLength', 'knownOrigin', 'withoutChannelItems', 'onlyChannel'];

/** convo_checkpoint_list_opts from { threadId, ns, before, beforeThreadId, beforeNs, limit, filter,
 * knownGeneration, knownLength, knownOrigin, withoutChannelItems, onlyChannel }. */
function listOpts(query, what) {
  const o = known(query, LIST_KEYS, what);
  const { threadId = null, ns = null, before = null, beforeThreadId = null, beforeNs = null,
    limit = 0, filter = null, withoutChannelItems = false, onlyChannel = null } = o;
  const without = bool(withoutChannelItems, 'withoutChannelItems');
  const only = optText(onlyChannel, 'onlyChannel');
  return {
    version: only !== null ? 5 : without ? 4 : 3, only_channel: only,
    thread_id: optText(threadId, 'threadId'), checkpoint_ns: optText(ns, 'ns'),
    before: optText(before, 'before'), limit: int(limit, 'limit', 0),
    filter_json: json(filter, 'filter'), before_thread_id: optText(beforeThreadId, 'beforeThreadId'),
    before_ns: optText(beforeNs, 'beforeNs'), ...knownOpts(o), without_channel_items: without ? 1 : 0,
  };
}

function checkpointOut(cp) {
  const out = {
    threadId: C.convo_checkpoint_thread_id(cp),
    ns: C.convo_checkpoint_ns(cp),
    id: C.convo_checkpoint_id(cp),
    parentId: C.convo_checkpoint_parent_id(cp),
    metadata: JSON.parse(C.convo_checkpoint_metadata(cp)),
    logLength: Number(C.convo_checkpoint_log_length(cp)),
    // what its items' seqs were resolved at (-1 without references; origin -1 when message 0
    // was not read): a reader keeping revived items passes them back as knownGeneration/Origin
    generation: Number(C.convo_checkpoint_generation(cp)),
    origin: Number(C.convo_checkpoint_log_origin(cp)),
    createdAt: Number(C.convo_checkpoint_created_at(cp)),
    body: blobOut(C.convo_checkpoint_body(cp)),
    channels: [],
    writes: [],
  };
  const nch = Number(C.convo_checkpoint_channel_count(cp));
  for (let i = 0; i < nch; i++) {
    const version = [null];
    const value = {};
    const channel = C.convo_checkpoint_channel(cp, i, version, value);
    const items = itemsOut(C.convo_checkpoint_channel_items, cp, i, blobOut);
    out.channels.push({ channel, version: version[0], value: blobOut(value), items });
  }
  const nw = Number(C.convo_checkpoint_write_count(cp));
  for (let i = 0; i < nw; i++) {
    const taskPath = [null], idx = [0], channel = [null], value = {};
    const taskId = C.convo_checkpoint_write(cp, i, taskPath, idx, channel, value);
    out.writes.push({ taskId, taskPath: taskPath[0], idx: Number(idx[0]), channel: channel[0],
      value: blobOut(value), items: itemsOut(C.convo_checkpoint_write_items, cp, i, blobOut) });
  }
  return out;
}

export class Store {
  #handle;
  #sync;
  #pending = 0;
  #closing = null;
  #drained = null;

  constructor(handle, sync = false) {
    if (!handle || typeof handle === 'string') {
      throw new TypeError('use `await Store.open(url)`');
    }
    this.#handle = handle;
    this.#sync = sync === true;
  }

  /**
   * Opens a store by URL (memory:, sqlite:PATH, redis://, postgres://, mongodb://).
   * opts.indexedKeys: the top-level extra keys the thread index keeps an index for
   * (recorded in the store by the first opener that names them; an opener naming
   * others is an InvalidError; omitted = whatever the store recorded).
   * opts.sync: true runs each call's C function on the calling thread (the promise is
   * settled when the call returns; the event loop waits for it): for an embedded store
   * (memory:, sqlite:) whose calls take microseconds; false (the default): on libuv's
   * thread pool. The open itself always runs on the pool.
   */
  static async open(url, opts) {
    const { indexedKeys = null, sync = false } = known(opts, ['indexedKeys', 'sync'], 'open options');
    text(url, 'url');
    bool(sync, 'sync');
    const keys = indexedKeys === null ? null :
      list(indexedKeys, 'indexedKeys').map((k, i) => text(k, `indexedKeys[${i}]`));
    loadLibrary();
    const out = [null];
    const err = newError();
    const rc = keys === null ? await callAsync(C.convo_open, out, url, err) :
      await callAsync(C.convo_open_ex, out, url, { version: 2, max_message_bytes: 0,
        max_batch_messages: 0, max_extra_bytes: 0, max_checkpoint_bytes: 0, roles: null,
        indexed_keys: [...keys, null] }, err);
    if (rc !== 0) throw fail(rc, err);
    return new Store(out[0], sync);
  }

  get driver() {
    return C.convo_store_driver(this.#live());
  }

  /** Whether calls run on the calling thread (Store.open's `sync`). */
  get sync() {
    return this.#sync;
  }

  static get version() {
    loadLibrary();
    return C.convo_version();
  }

  #live() {
    if (!this.#handle || this.#closing) throw new InvalidError(codes.EINVAL, 'the store is closed');
    return this.#handle;
  }

  // Runs one C call that fills err: at once on a store opened with { sync: true } (returns
  // or throws), else on the pool (a promise); keeps the store open until it is done.
  #call(fn, ...args) {
    const s = this.#live();
    const err = newError();
    if (!this.#sync) return this.#callOnPool(fn, s, args, err);
    const rc = fn(s, ...args, err);
    if (rc !== 0) throw fail(rc, err);
    return undefined;
  }

  async #callOnPool(fn, s, args, err) {
    this.#pending++;
    let rc;
    try {
      rc = await callAsync(fn, s, ...args, err);
    } finally {
      if (--this.#pending === 0 && this.#drained) this.#drained();
    }
    if (rc !== 0) throw fail(rc, err);
  }

  // (a method replaced on the instance, e.g. by a test's spy, is called as it is)
  get [steps]() {
    const own = (name, gen) => (this[name] === Store.prototype[name] ? gen :
      function* viaMethod(...args) { return yield this[name](...args); }.bind(this));
    return {
      checkpointPut: own('checkpointPut', (cp) => this.#checkpointPut(cp)),
      checkpointPutWrites: own('checkpointPutWrites', (...args) => this.#checkpointPutWrites(...args)),
    };
  }

  // #call for a write to threadId whose ConflictError gets the thread's length and
  // generation read just after it (the C error carries only text); left undefined when
  // that read fails.
  async #write(threadId, fn, ...args) {
    try {
      await this.#call(fn, threadId, ...args);
    } catch (e) {
      if (e instanceof ConflictError && e.length === undefined) {
        const state = await this.#state(threadId).catch(() => null);
        if (state) Object.assign(e, state);
      }
      throw e;
    }
  }

  // { length, generation } of a thread, without reading a message.
  async #state(threadId) {
    const h = await this.load(threadId, { fromSeq: Number.MAX_SAFE_INTEGER, withExtra: false });
    return { length: h.length, generation: h.generation };
  }

  /** Closes the store once the calls under way are done. */
  close() {
    if (this.#closing) return this.#closing;
    if (!this.#handle) return Promise.resolve();
    this.#closing = (async () => {
      if (this.#pending > 0) await new Promise((r) => { this.#drained = r; });
      C.convo_close(this.#handle);
      this.#handle = null;
    })();
    return this.#closing;
  }

  async append(threadId, messages, opts_) {
    const { idempotencyKey = null, expectedLength = -1, expectedGeneration = -1 } =
      options(opts_, 'append options');
    text(threadId, 'threadId');
    const { bufs, lengths } = messageBuffers(messages);
    const opts = { version: 2, idempotency_key: optText(idempotencyKey, 'idempotencyKey'),
      expected_length: int(expectedLength, 'expectedLength', -1),
      expected_generation: int(expectedGeneration, 'expectedGeneration', -1) };
    const res = {};
    await this.#write(threadId, C.convo_append, bufs, lengths, bufs.length, opts, res);
    return { firstSeq: Number(res.first_seq), count: Number(res.count), replayed: !!res.replayed };
  }

  async load(threadId, opts_) {
    const { fromSeq = 0, limit = 0, tail = 0, withExtra = true } = options(opts_, 'load options');
    const out = [null];
    const opts = { version: 1, from_seq: int(fromSeq, 'fromSeq', 0), limit: int(limit, 'limit', 0),
      tail: int(tail, 'tail', 0), with_extra: withExtra ? 1 : 0 };
    await this.#call(C.convo_load, text(threadId, 'threadId'), opts, out);
    const h = out[0];
    try {
      const n = Number(C.convo_history_count(h));
      const messages = new Array(n);
      const len = [0];
      for (let i = 0; i < n; i++) {
        const p = C.convo_history_message(h, i, len);
        messages[i] = {
          seq: Number(C.convo_history_seq(h, i)),
          role: C.convo_history_role(h, i),
          createdAt: Number(C.convo_history_created_at(h, i)),
          json: copyText(p, len[0]),
        };
      }
      return { messages, length: Number(C.convo_history_length(h)),
        generation: Number(C.convo_history_generation(h)),
        extra: withExtra ? JSON.parse(C.convo_history_extra(h)) : null };
    } finally {
      C.convo_history_free(h);
    }
  }

  /** The texts of `limit` messages from `fromSeq` (0 = to the end), with the thread's
   * generation as texts.generation: what ConvoSaver reads its message channels from. */
  async loadTexts(threadId, fromSeq = 0, limit = 0) {
    const log = await this.loadLog(threadId, { fromSeq, limit });
    // read with the messages: they stay as they are while the generation does
    log.texts.generation = log.generation;
    return log.texts;
  }

  /** { texts, length, generation }: the texts of the messages from `fromSeq` (`limit` 0 =
   * to the end; seqs are dense: texts[i] is seq fromSeq + i) and the thread's length and
   * generation, without the seq, role and time of each message: what an adapter keeping its
   * own copy of the log reads (a third of load's time on 2,000 messages). */
  async loadLog(threadId, opts_) {
    const { fromSeq = 0, limit = 0 } = options(opts_, 'loadLog options');
    const out = [null];
    const opts = { version: 1, from_seq: int(fromSeq, 'fromSeq', 0), limit: int(limit, 'limit', 0),
      tail: 0, with_extra: 0 };
    await this.#call(C.convo_load, text(threadId, 'threadId'), opts, out);
    const h = out[0];
    try {
      const n = Number(C.convo_history_count(h));
      const texts = new Array(n);
      const len = [0];
      for (let i = 0; i < n; i++) texts[i] = copyText(C.convo_history_message(h, i, len), len[0]);
      return { texts, length: Number(C.convo_history_length(h)), generation: Number(C.convo_history_generation(h)) };
    } finally {
      C.convo_history_free(h);
    }
  }

  /**
   * Keeps messages [0, keep) and stores `messages` after them, in one atomic step; the
   * thread's generation goes up by one. Conditions: expectedLength, expectedGeneration,
   * expectedSuffix (the messages [keep, length) as the caller saw them). Resolves to
   * { firstSeq, count, removed, generation, replayed }.
   */
  async replaceTail(threadId, opts_) {
    const { keep, messages = [], expectedLength = -1, expectedGeneration = -1,
      expectedSuffix = null, idempotencyKey = null, dropCheckpoints = false } =
      options(opts_, 'replaceTail options');
    text(threadId, 'threadId');
    int(keep, 'keep', 0);
    if (typeof dropCheckpoints !== 'boolean') {
      throw new InvalidError(codes.EINVAL, 'dropCheckpoints must be a boolean');
    }
    const { bufs, lengths } = messageBuffers(messages);
    const suffix = expectedSuffix === null ? null : suffixBuffers(expectedSuffix);
    const opts = {
      version: 1,
      idempotency_key: optText(idempotencyKey, 'idempotencyKey'),
      expected_length: int(expectedLength, 'expectedLength', -1),
      expected_generation: int(expectedGeneration, 'expectedGeneration', -1),
      // an empty view is a non-NULL pointer with a count of 0
      expected_suffix: suffix ? (suffix.bufs.length ? suffix.bufs : [Buffer.alloc(1)]) : null,
      expected_suffix_lengths: suffix && suffix.bufs.length ? suffix.lengths : null,
      nexpected_suffix: suffix ? suffix.bufs.length : 0,
      drop_checkpoints: dropCheckpoints ? 1 : 0,
    };
    const res = {};
    await this.#write(threadId, C.convo_replace_tail, keep, bufs.length ? bufs : null,
      bufs.length ? lengths : null, bufs.length, opts, res);
    return { firstSeq: Number(res.first_seq), count: Number(res.count), removed: Number(res.removed),
      generation: Number(res.generation), replayed: !!res.replayed };
  }

  /**
   * Removes the last `count` messages (fewer when there are fewer) and resolves to them,
   * as load gives them, oldest first ([] and nothing written for an empty thread). Reads
   * the tail, then removes exactly it on the (length, generation) read: a pop that loses
   * a race reads again, unless expectedLength was given.
   */
  async pop(threadId, opts_) {
    const { count = 1, expectedLength = -1, dropCheckpoints = false } = options(opts_, 'pop options');
    text(threadId, 'threadId');
    int(count, 'count', 1);
    int(expectedLength, 'expectedLength', -1);
    for (let attempt = 0; attempt < POP_ATTEMPTS; attempt++) {
      const h = await this.load(threadId, { tail: count, withExtra: false });
      if (expectedLength >= 0 && h.length !== expectedLength) {
        throw Object.assign(new ConflictError(codes.ECONFLICT, `thread has ${h.length} messages, ` +
          `not the expected ${expectedLength}: nothing removed`), { length: h.length, generation: h.generation });
      }
      if (h.messages.length === 0) return [];
      try {
        await this.replaceTail(threadId, { keep: h.length - h.messages.length, expectedLength: h.length,
          expectedGeneration: h.generation, dropCheckpoints });
        return h.messages;
      } catch (e) {
        const moved = e.length !== undefined && (e.length !== h.length || e.generation !== h.generation);
        if (!(e instanceof ConflictError) || expectedLength >= 0 || !moved) throw e;
      }
    }
    throw new ConflictError(codes.ECONFLICT,
      `the thread changed under each of ${POP_ATTEMPTS} attempts to pop: nothing removed`);
  }

  async saveExtra(threadId, patch) {
    await this.#call(C.convo_save_extra, text(threadId, 'threadId'), json(patch, 'patch'));
  }

  /**
   * One page of the thread index: threads whose extra contains `where` (an object; null =
   * every thread), by order 'recent' (last activity, newest first; the default), 'created'
   * (newest first) or 'id' (byte order); reverse: the other direction; after: a cursor
   * (a row's or `next`) of the same order and direction. Resolves to { threads: [{ id,
   * createdAt, updatedAt, length, extra?, lastMessage?, cursor }], next } (times in
   * microseconds since the epoch; extra with withExtra, lastMessage (its JSON text, null for
   * an empty thread) with withLastMessage; next null on the last page).
   */
  async listThreads(opts) {
    const o = listOptions(opts);
    const out = [null];
    await this.#call(C.convo_thread_list_ex, o, out);
    try {
      return readPage(out[0], o);
    } finally {
      C.convo_thread_page_free(out[0]);
    }
  }

  /** Every thread listThreads(opts) gives, page after page (limit: the page size). */
  threads(opts) {
    listOptions(opts); // bad options throw here, not at the first next()
    const self = this;
    return (async function* walk() {
      let after = opts?.after ?? null;
      for (;;) {
        const page = await self.listThreads({ ...opts, after });
        yield* page.threads;
        if (page.next === null) return;
        after = page.next;
      }
    })();
  }

  /** One page of thread ids in byte order after `after`: { ids, next } (convo_thread_list:
   * every driver, also one without the thread index). */
  async threadIds(opts) {
    const { after = null, limit = 0 } = options(opts, 'threadIds options');
    const out = [null];
    await this.#call(C.convo_thread_list, optText(after, 'after'), int(limit, 'limit', 0), out);
    const p = out[0];
    try {
      const n = Number(C.convo_thread_page_count(p));
      const ids = [];
      for (let i = 0; i < n; i++) ids.push(C.convo_thread_page_id(p, i));
      return { ids, next: C.convo_thread_page_next(p) };
    } finally {
      C.convo_thread_page_free(p);
    }
  }

  async delete(threadId) {
    await this.#call(C.convo_thread_delete, text(threadId, 'threadId'));
  }

  /** Copies [0, upto) of src into the new thread dst, which starts at src's generation;
   * withCheckpoints: the checkpoints within them too (LangGraph's copyThread). */
  async fork(src, dst, upto = -1, opts_ = undefined) {
    const { expectedGeneration = -1, withCheckpoints = false } = options(opts_, 'fork options');
    const opts = { version: 2, expected_generation: int(expectedGeneration, 'expectedGeneration', -1),
      with_checkpoints: bool(withCheckpoints, 'withCheckpoints') ? 1 : 0 };
    await this.#call(C.convo_thread_fork_ex, text(src, 'src'), text(dst, 'dst'), int(upto, 'upto', -1),
      opts);
  }

  /**
   * Stores a checkpoint: { threadId, ns, id, parentId, metadata, body: {type, bytes},
   * channels: [{channel, version, value: {type, bytes} | null, items?, logPrefix?}], logLength,
   * messages: [json...], expectedLength, expectedGeneration } (messages appended in the same
   * write). A channel with `items` ({ items: [json text | null], seqs?: [seq | -1], key?,
   * rest?: {type, bytes}, log? }) is a list kept in the thread's log (log references,
   * docs/checkpoints.md); resolves to { seqsOut: { channel: [seq | -1, ...] } } for those.
   * `logPrefix: k` (with items) says the list is the log's messages [0, k) followed by the
   * items given, whose seqsOut are then the only ones returned.
   */
  async checkpointPut(cp) {
    return drive(this.#checkpointPut(cp));
  }

  *#checkpointPut(cp) {
    if (typeof cp !== 'object' || cp === null || Array.isArray(cp)) {
      throw new InvalidError(codes.EINVAL, 'checkpointPut takes a checkpoint object');
    }
    const lists = [];
    const prefixes = [];
    try {
      const channels = list(cp.channels ?? [], 'channels').map((c, i) => {
        const what = `channels[${i}]`;
        const channel = text(c?.channel, `${what}.channel`);
        const prefix = int(c?.logPrefix ?? 0, `${what}.logPrefix`, 0);
        const items = c.items === undefined || c.items === null ? null :
          itemsIn(c.items, `${what}.items`, blobIn);
        lists.push(items);
        prefixes.push(prefix);
        if (items && c.value) {
          throw new InvalidError(codes.EINVAL, `${what} has both a value and items`);
        }
        if (prefix && !items) throw new InvalidError(codes.EINVAL, `${what}.logPrefix needs items`);
        return { channel, version: String(c.version), value: blobIn(c.value, `${what}.value`) };
      });
      const withItems = lists.some((x) => x);
      const msgs = cp.messages && cp.messages.length ? messageBuffers(cp.messages) : null;
      const body = blobIn(cp.body, 'body') ?? { type: null, bytes: null, len: 0 };
      const input = {
        version: 5,
        thread_id: text(cp.threadId, 'threadId'),
        checkpoint_ns: optText(cp.ns, 'ns') ?? '',
        checkpoint_id: text(cp.id, 'id'),
        parent_id: optText(cp.parentId, 'parentId'),
        metadata_json: json(cp.metadata, 'metadata'),
        body,
        channels: channels.length ? channels : null,
        nchannels: channels.length,
        log_length: int(cp.logLength ?? 0, 'logLength', 0),
        messages: msgs ? msgs.bufs : null,
        message_lengths: msgs ? msgs.lengths : null,
        nmessages: msgs ? msgs.bufs.length : 0,
        expected_length: int(cp.expectedLength ?? -1, 'expectedLength', -1),
        expected_generation: int(cp.expectedGeneration ?? -1, 'expectedGeneration', -1),
        channel_items: withItems ? lists.map((x) => x?.input ?? null) : null,
        channel_log_prefix: prefixes.some((k) => k > 0) ? BigInt64Array.from(prefixes, BigInt) : null,
      };
      yield this.#call(C.convo_checkpoint_put, input);
      const out = {};
      lists.forEach((x, i) => { if (x) out[channels[i].channel] = seqsOut(x.out, x.n); });
      return { seqsOut: out };
    } finally {
      releaseItems(lists);
    }
  }

  /** writes: [{ idx, channel, value: {type, bytes} } or { idx, channel, items }] (items as
   * checkpointPut's: a list kept inline until the put that appends it to the log). */
  async checkpointPutWrites(threadId, ns, checkpointId, taskId, taskPath, writes) {
    return drive(this.#checkpointPutWrites(threadId, ns, checkpointId, taskId, taskPath, writes));
  }

  *#checkpointPutWrites(threadId, ns, checkpointId, taskId, taskPath, writes) {
    const lists = [];
    try {
      const w = list(writes, 'writes').map((x, i) => {
        const what = `writes[${i}]`;
        const items = x?.items === undefined || x?.items === null ? null :
          itemsIn(x.items, `${what}.items`, blobIn);
        lists.push(items);
        if (items && x.value) throw new InvalidError(codes.EINVAL, `${what} has both a value and items`);
        return { idx: int(x?.idx, `${what}.idx`, Number.MIN_SAFE_INTEGER),
          channel: text(x.channel, `${what}.channel`),
          value: items ? { type: null, bytes: null, len: 0 } : blobIn(x.value, `${what}.value`) };
      });
      const args = [text(threadId, 'threadId'), optText(ns, 'ns') ?? '', text(checkpointId, 'checkpointId'),
        text(taskId, 'taskId'), optText(taskPath, 'taskPath') ?? ''];
      if (!lists.some((x) => x)) {
        yield this.#call(C.convo_checkpoint_put_writes, ...args, w.length ? w : null, w.length);
        return;
      }
      yield this.#call(C.convo_checkpoint_put_writes_ex, { version: 1, thread_id: args[0],
        checkpoint_ns: args[1], checkpoint_id: args[2], task_id: args[3], task_path: args[4],
        writes: w, n: w.length, items: lists.map((x) => x?.input ?? null) });
    } finally {
      releaseItems(lists);
    }
  }

  /** The checkpoint (id null = the latest of the namespace); NotFoundError when unknown.
   * opts { knownGeneration, knownLength, knownOrigin }: the caller holds the texts of messages
   * [0, knownLength) of the thread as they were at that generation and origin (a checkpoint's
   * `generation` and `origin` read earlier); while the thread is still so, items with a seq
   * below knownLength come back with a null text and those messages are not read. */
  async checkpointGet(threadId, ns = '', id = null, opts = undefined) {
    const o = known(opts, ['knownGeneration', 'knownLength', 'knownOrigin'], 'checkpointGet options');
    const out = [null];
    await this.#call(C.convo_checkpoint_get_ex, { version: 1, thread_id: text(threadId, 'threadId'),
      checkpoint_ns: optText(ns, 'ns') ?? '', checkpoint_id: optText(id, 'id'), ...knownOpts(o) }, out);
    try {
      return checkpointOut(out[0]);
    } finally {
      C.convo_checkpoint_free(out[0]);
    }
  }

  /** Newest first: { threadId, ns, before, beforeThreadId, beforeNs, limit, filter } (and what
   * the caller holds of threadId's log, as for checkpointGet). withoutChannelItems: a channel
   * whose value is a list comes back with its key and rest and no items (texts and seqs []),
   * and the log is not read for it: for a walk that needs only writes and metadata.
   * onlyChannel: each checkpoint with that channel alone (its list without items) and its
   * writes to it, no body, metadata {} (list opts v5): for a walk over one channel. */
  async checkpointList(query) {
    const opts = listOpts(query, 'checkpointList options');
    const out = [null];
    await this.#call(C.convo_checkpoint_list, opts, out);
    const set = out[0];
    try {
      const n = Number(C.convo_checkpoint_set_count(set));
      const list = [];
      for (let i = 0; i < n; i++) list.push(checkpointOut(C.convo_checkpoint_set_get(set, i)));
      return list;
    } finally {
      C.convo_checkpoint_set_free(set);
    }
  }

  async checkpointPrune(threadId, keepLast) {
    await this.#call(C.convo_checkpoint_prune, text(threadId, 'threadId'), int(keepLast, 'keepLast', 0));
  }

  /** Removes what checkpointList(query) lists, with its writes and the values nothing else
   * needs; the number removed. { filter: { run_id } }: LangGraph's deleteForRuns. */
  async checkpointDelete(query) {
    const removed = [0];
    await this.#call(C.convo_checkpoint_delete, listOpts(query, 'checkpointDelete options'), removed);
    return Number(removed[0]);
  }

  /** The dump (docs/dump-format.md) of the threads named (none = all) as one Buffer. */
  async export(threadIds = []) {
    list(threadIds, 'threadIds').forEach((t, i) => text(t, `threadIds[${i}]`));
    const chunks = [];
    const cb = koffi.register((ctx, buf, len) => {
      chunks.push(copyBytes(buf, len));
      return 0;
    }, koffi.pointer(WriteFn));
    const stats = {};
    try {
      await this.#call(C.convo_export, threadIds.length ? threadIds : null, threadIds.length,
        cb, null, null, stats);
    } finally {
      koffi.unregister(cb);
    }
    return Buffer.concat(chunks);
  }

  /** Imports a dump; returns its stats. */
  async import(dump) {
    const data = toBytes(dump, 'the dump to import must be');
    let off = 0;
    const cb = koffi.register((ctx, buf, len) => {
      const n = Math.min(Number(len), data.length - off);
      if (n > 0) koffi.encode(buf, koffi.array('uint8_t', n), data.subarray(off, off + n));
      off += n;
      return n;
    }, koffi.pointer(ReadFn));
    const stats = {};
    try {
      await this.#call(C.convo_import, cb, null, null, stats);
    } finally {
      koffi.unregister(cb);
    }
    return Object.fromEntries(Object.entries(stats).map(([k, v]) => [k, Number(v)]));
  }

  /** Removes threads whose ttl has passed; the number removed. */
  async sweep() {
    const removed = [0];
    await this.#call(C.convo_sweep, removed);
    return Number(removed[0]);
  }

  /** Bytes the backend uses for this store's data. */
  async bytes() {
    const b = [0];
    await this.#call(C.convo_store_bytes, b);
    return Number(b[0]);
  }
}

// `await using store = await Store.open(url)` closes it at the end of the block; only where
// the runtime has Symbol.asyncDispose (Node 18.18+, 20.4+): on an older one close() is the way.
if (typeof Symbol.asyncDispose === 'symbol') {
  Object.defineProperty(Store.prototype, Symbol.asyncDispose, {
    value() { return this.close(); }, writable: true, configurable: true,
  });
}
