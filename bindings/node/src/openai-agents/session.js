// session.js — ConvoSession: an OpenAI Agents SDK Session (and
// SessionHistoryTransactionAwareSession) whose items are the messages of one convo thread.
// Appends are one atomic call; pop, replace_suffix, clear and compaction are tail rewrites.
import { randomUUID } from 'node:crypto';
import { isDeepStrictEqual } from 'node:util';
import { Store } from '../store.js';
import { ConflictError, InvalidError, NotFoundError, codes } from '../errors.js';
import { text, options, list } from '../internal/args.js';
import { encodeItem, decodeItem, keepItem, itemOf, freezeItem, digest } from './items.js';

// Idempotency keys share a namespace per thread with every other writer's: ours are prefixed.
const KEY_PREFIX = 'openai-agents:';
// What the sessions of one Store have read of a thread (its items, as keepItem keeps them, at
// a generation), shared, since an app often makes a new session object per request: a Store ->
// Map of session id -> { kept, generation }, the MAX_READ most recently read sessions.
const MAX_READ = 64;
const reads = new WeakMap();

function readsOf(store) {
  let m = reads.get(store);
  if (!m) reads.set(store, (m = new Map()));
  return m;
}

function remember(store, sessionId, value) {
  const m = readsOf(store);
  m.delete(sessionId);
  if (value) m.set(sessionId, value);
  if (m.size > MAX_READ) m.delete(m.keys().next().value);
}

function invalid(message) {
  return new InvalidError(codes.EINVAL, `ConvoSession: ${message}`);
}

function conflict(message, cause) {
  const e = new ConflictError(codes.ECONFLICT, `ConvoSession: ${message}`);
  if (cause) Object.assign(e, { cause, length: cause.length, generation: cause.generation });
  return e;
}

function notFound(e) {
  return e instanceof NotFoundError;
}

// The items of a transaction, checked and encoded before anything is written.
function encodeAll(items, what, op = null) {
  return list(items, what).map((item, i) => encodeItem(item, i === 0 ? op : null, `${what}[${i}]`));
}

// { type, items } or { type, expectedSuffix, replacement }, with nothing else (as the SDK's
// MemorySession requires).
function checkTransaction(args) {
  const { operationId, transaction } = options(args, 'applyHistoryTransaction arguments');
  if (typeof operationId !== 'string' || !operationId.trim()) {
    throw invalid('operationId must be a non-empty string');
  }
  const t = options(transaction, 'transaction');
  const fields = { append_items: ['items'], replace_suffix: ['expectedSuffix', 'replacement'] }[t.type];
  if (!fields) throw invalid(`unknown transaction type ${JSON.stringify(t.type)}`);
  const extra = Object.keys(t).filter((k) => k !== 'type' && !fields.includes(k));
  if (extra.length) throw invalid(`a ${t.type} transaction has no field ${extra[0]}`);
  return { operationId, transaction: t };
}

export class ConvoSession {
  #sessionId;
  #url;
  #store;
  #opening = null;
  #owned;
  #closed = false;
  #extra;
  #extraSaved = null;
  #mutable;

  /**
   * { url | store, sessionId?, extra? }: a URL opens a Store that close() closes; a Store
   * is left open. sessionId names the thread (default: a random UUID). extra is merged
   * into the thread's extra object at this instance's first write (e.g. { userId, title }:
   * what ConvoSession.list filters on). getItems() hands out deep-frozen items, shared
   * between calls (its cost grows with the items appended since the last call, not with
   * the history); mutableItems: true makes it hand out new objects the caller may change,
   * a deep copy of every item at every call (a cost that grows with the history).
   */
  constructor(opts) {
    const { url, store, sessionId, extra, mutableItems = false } = options(opts, 'ConvoSession options');
    if ((url === undefined) === (store === undefined)) throw invalid('give either url or store');
    if (store !== undefined && !(store instanceof Store)) throw invalid('store must be a convo Store');
    this.#url = url === undefined ? null : text(url, 'url');
    this.#store = store ?? null;
    this.#owned = store === undefined;
    this.#sessionId = sessionId === undefined || sessionId === null ? randomUUID() : text(sessionId, 'sessionId');
    if (extra !== undefined && extra !== null && (typeof extra !== 'object' || Array.isArray(extra))) {
      throw invalid('extra must be an object');
    }
    this.#extra = extra && Object.keys(extra).length ? extra : null;
    if (typeof mutableItems !== 'boolean') throw invalid('mutableItems must be a boolean');
    this.#mutable = mutableItems;
  }

  async #open() {
    if (this.#closed) throw invalid('the session is closed');
    if (this.#store) return this.#store;
    this.#opening ??= Store.open(this.#url).then((s) => (this.#store = s), (e) => {
      this.#opening = null;
      throw e;
    });
    return this.#opening;
  }

  // The store for a write, once this instance's extra is saved in the thread.
  async #writer() {
    const store = await this.#open();
    if (this.#extra) {
      this.#extraSaved ??= store.saveExtra(this.#sessionId, this.#extra).catch((e) => {
        this.#extraSaved = null;
        throw e;
      });
      await this.#extraSaved;
    }
    return store;
  }

  /** The thread's id. */
  async getSessionId() {
    if (this.#closed) throw invalid('the session is closed');
    return this.#sessionId;
  }

  // Every item of the thread, as keepItem keeps them: what the sessions of this Store read
  // before, and the messages past it when the thread's generation is the same (else all
  // again). Each message is parsed once, when first read.
  async #kept(store) {
    const seen = readsOf(store).get(this.#sessionId);
    const keptOf = (h) => h.messages.map((m) => keepItem(m.json));
    let kept, generation;
    try {
      const h = await store.load(this.#sessionId, { fromSeq: seen ? seen.kept.length : 0, withExtra: false });
      generation = h.generation;
      if (!seen) {
        kept = keptOf(h);
      } else if (h.generation === seen.generation && h.length >= seen.kept.length) {
        kept = seen.kept.concat(keptOf(h));
      } else {
        const all = await store.load(this.#sessionId, { withExtra: false });
        [kept, generation] = [keptOf(all), all.generation];
      }
    } catch (e) {
      if (!notFound(e)) throw e;
      remember(store, this.#sessionId, null);
      return [];
    }
    remember(store, this.#sessionId, { kept, generation });
    return kept;
  }

  /**
   * The last `limit` items, oldest first (all without a limit), deep-frozen (unless
   * mutableItems): the same objects at every call while they stay in the history. With a
   * limit and nothing read before, only the thread's tail is read; after a first full read
   * (by any session of this Store), only messages appended since are.
   */
  async getItems(limit) {
    const store = await this.#open();
    if (limit !== undefined && limit !== null) {
      if (typeof limit !== 'number' || Number.isNaN(limit)) throw invalid('limit must be a number');
      if (limit <= 0) return [];
      if (!readsOf(store).has(this.#sessionId) && Number.isSafeInteger(limit)) {
        try {
          const h = await store.load(this.#sessionId, { tail: limit, withExtra: false });
          const items = h.messages.map((m) => decodeItem(m.json));
          return this.#mutable ? items : items.map(freezeItem);
        } catch (e) {
          if (notFound(e)) return [];
          throw e;
        }
      }
    }
    const kept = await this.#kept(store);
    const from = limit > 0 ? Math.max(0, kept.length - limit) : 0;
    return kept.slice(from).map((k) => itemOf(k, this.#mutable));
  }

  /** Appends the items in one atomic write. */
  async addItems(items) {
    const texts = encodeAll(items, 'items');
    if (texts.length === 0) return;
    const store = await this.#writer();
    await store.append(this.#sessionId, texts);
  }

  /** Removes the last item and resolves to it (undefined when there is none). */
  async popItem() {
    const store = await this.#open();
    let popped;
    try {
      popped = await store.pop(this.#sessionId);
    } catch (e) {
      if (notFound(e)) return undefined;
      throw e;
    }
    return popped.length ? decodeItem(popped[0].json) : undefined;
  }

  /** Removes every item: a tail rewrite to none, so the thread keeps its extra, creation
   * time and place in the thread index. */
  async clearSession() {
    const store = await this.#open();
    try {
      await store.replaceTail(this.#sessionId, { keep: 0 });
    } catch (e) {
      if (!notFound(e)) throw e;
    }
  }

  /** The history becomes `items` (a compaction item first) in one atomic tail rewrite. */
  async replaceHistoryWithCompaction(items) {
    const texts = encodeAll(items, 'items');
    const store = await this.#writer();
    try {
      await store.replaceTail(this.#sessionId, { keep: 0, messages: texts });
    } catch (e) {
      if (!notFound(e)) throw e;
      if (texts.length) await store.append(this.#sessionId, texts, { expectedLength: 0 });
    }
  }

  /**
   * An atomic, idempotent change: { operationId, transaction: { type: 'append_items', items }
   * | { type: 'replace_suffix', expectedSuffix, replacement } }. A retry with the same
   * operationId and transaction is not applied again; the same operationId with another
   * transaction, or a suffix that is no longer the history's, is a ConflictError and
   * changes nothing.
   */
  async applyHistoryTransaction(args) {
    const { operationId, transaction } = checkTransaction(args);
    const key = KEY_PREFIX + operationId;
    const op = digest(transaction);
    if (transaction.type === 'append_items') {
      const texts = encodeAll(transaction.items, 'transaction.items', op);
      if (texts.length === 0) return;
      const store = await this.#writer();
      try {
        await store.append(this.#sessionId, texts, { idempotencyKey: key });
      } catch (e) {
        if (e instanceof ConflictError) throw conflict(`operation ${operationId}: ${e.message}`, e);
        throw e;
      }
      return;
    }
    const expected = encodeAll(transaction.expectedSuffix, 'transaction.expectedSuffix');
    const replacement = encodeAll(transaction.replacement, 'transaction.replacement', op);
    const store = await this.#writer();
    await this.#replaceSuffix(store, key, operationId, transaction, expected, replacement);
  }

  async #replaceSuffix(store, key, operationId, transaction, expected, replacement) {
    const { expectedSuffix, replacement: items } = transaction;
    let h;
    try {
      h = await store.load(this.#sessionId,
        { tail: Math.max(expectedSuffix.length, items.length, 1), withExtra: false });
    } catch (e) {
      if (!notFound(e)) throw e;
      if (expectedSuffix.length) throw conflict('the session history suffix no longer matches the transaction');
      if (replacement.length) await this.#appendFirst(store, key, operationId, replacement);
      return;
    }
    const tail = h.messages.map((m) => decodeItem(m.json));
    const ends = (want) => want.length <= tail.length &&
      isDeepStrictEqual(tail.slice(tail.length - want.length), want);
    // where the transaction applies: over the suffix the caller expects, as this read saw
    // it (byte for byte); or, when the history ends with the replacement, perhaps a retry of
    // this very transaction: the store answers it as a replay (the key and these messages
    // at that keep) or refuses it (the suffix there is not the expected one)
    const tries = [];
    if (ends(expectedSuffix)) {
      tries.push({ keep: h.length - expectedSuffix.length,
        view: h.messages.slice(h.messages.length - expectedSuffix.length) });
    }
    if (items.length && ends(items)) tries.push({ keep: h.length - items.length, view: expected });
    if (!tries.length) throw conflict('the session history suffix no longer matches the transaction');
    let first;
    for (const { keep, view } of tries) {
      try {
        await store.replaceTail(this.#sessionId, { keep, messages: replacement, expectedSuffix: view,
          idempotencyKey: key });
        return;
      } catch (e) {
        if (!(e instanceof ConflictError)) throw e;
        first ??= e;
      }
    }
    throw conflict(`operation ${operationId}: ${first.message}`, first);
  }

  // replace_suffix of [] on a thread that does not exist yet: an append to an empty thread.
  async #appendFirst(store, key, operationId, texts) {
    try {
      await store.append(this.#sessionId, texts, { idempotencyKey: key, expectedLength: 0 });
    } catch (e) {
      if (e instanceof ConflictError) throw conflict(`operation ${operationId}: ${e.message}`, e);
      throw e;
    }
  }

  /** Merges patch into the thread's extra object (a title, the user it belongs to, ...). */
  async saveExtra(patch) {
    const store = await this.#open();
    await store.saveExtra(this.#sessionId, options(patch, 'patch'));
  }

  /** The thread's extra object (null when the thread does not exist). */
  async getExtra() {
    const store = await this.#open();
    try {
      return (await store.load(this.#sessionId, { fromSeq: Number.MAX_SAFE_INTEGER })).extra;
    } catch (e) {
      if (notFound(e)) return null;
      throw e;
    }
  }

  /** Closes the Store this session opened (not one it was given). Idempotent. */
  async close() {
    if (this.#closed) return;
    this.#closed = true;
    const opening = this.#opening;
    if (!this.#owned) return;
    const store = this.#store ?? (opening ? await opening.catch(() => null) : null);
    if (store) await store.close();
  }

  /**
   * One page of the sessions of a store, newest activity first: { sessions: [{ sessionId,
   * createdAt, updatedAt, length, extra, lastItem? }], next } (times in microseconds since
   * the epoch; next: the `after` of the next page, null on the last). Options: where (an
   * extra-containment filter, e.g. { userId: 'u1' }), limit (default 100), after, order
   * ('recent', 'created' or 'id'), reverse, withLastItem (the session's last item, or null).
   */
  static async list(store, opts) {
    if (!(store instanceof Store)) throw invalid('list takes a convo Store');
    const { withLastItem = false, ...rest } = options(opts, 'list options');
    const page = await store.listThreads({ ...rest, withExtra: true, withLastMessage: withLastItem === true });
    return {
      sessions: page.threads.map((t) => {
        const s = { sessionId: t.id, createdAt: t.createdAt, updatedAt: t.updatedAt, length: t.length, extra: t.extra };
        if (withLastItem === true) s.lastItem = t.lastMessage === null ? null : decodeItem(t.lastMessage);
        return s;
      }),
      next: page.next,
    };
  }
}

// `await using session = new ConvoSession(...)` closes it at the end of the block (where the
// runtime has Symbol.asyncDispose).
if (typeof Symbol.asyncDispose === 'symbol') {
  Object.defineProperty(ConvoSession.prototype, Symbol.asyncDispose, {
    value() { return this.close(); }, writable: true, configurable: true,
  });
}
