// history.js — ConvoChatMessageHistory, a LangChain.js BaseListChatMessageHistory over one
// convo thread: addMessages is one atomic append; getMessages reads only what this instance
// has not read yet, and reads the whole thread again when another writer rewrote its tail.
import { BaseListChatMessageHistory } from '@langchain/core/chat_history';
import { load } from '@langchain/core/load';
import {
  AIMessage, ChatMessage, HumanMessage, SystemMessage, ToolMessage,
} from '@langchain/core/messages';
import { Store } from '../store.js';
import { NotFoundError, InvalidError, codes } from '../errors.js';
import { text, options } from '../internal/args.js';
import { roleOf, contentOf, isMessage } from '../internal/roles.js';
import { logText, valueText, plainLangChainValue } from '../internal/logtext.js';

/** The log message that stores a LangChain message: its role and content, then the
 * message as LangChain serializes it (the layout of ConvoSaver's message channels). */
export function toLogText(message) {
  if (!isMessage(message)) {
    throw new InvalidError(codes.EINVAL, 'addMessages takes LangChain messages (BaseMessage objects)');
  }
  return logText(roleOf(message), contentOf(message), 'json', JSON.stringify(message));
}

// A message some other writer stored as plain role-tagged JSON (`convo append`, another
// framework): the LangChain class of its role, its content as text when it is not one.
function fromPlain(m) {
  const content = typeof m.content === 'string' || Array.isArray(m.content) ? m.content :
    m.content === undefined || m.content === null ? '' : JSON.stringify(m.content);
  const fields = { content };
  if (typeof m.id === 'string') fields.id = m.id;
  if (typeof m.name === 'string') fields.name = m.name;
  switch (m.role) {
    case 'user': case 'human': return new HumanMessage(fields);
    case 'assistant': case 'ai': return new AIMessage(fields);
    case 'system': return new SystemMessage(fields);
    case 'tool':
      return new ToolMessage({ ...fields, tool_call_id: typeof m.tool_call_id === 'string' ? m.tool_call_id : '' });
    default: return new ChatMessage({ ...fields, role: String(m.role) });
  }
}

async function revive(valueJson) {
  const m = await load(valueJson);
  if (!isMessage(m)) throw new Error('not a message');
  return m;
}

/** The LangChain message a log message stores. */
export async function fromLogText(t) {
  const v = plainLangChainValue(t);
  if (v !== null) {
    try {
      return await revive(v);
    } catch {
      // not one LangChain message after all: read as below
    }
  }
  const m = JSON.parse(t);
  try {
    if (m.serde === 'json' && 'value' in m) return await revive(JSON.stringify(m.value));
    if (m.serde === 'json/c') {
      const vt = valueText(t);
      if (vt !== null) return await revive(vt);
    }
    if (m.serde === 'json' && typeof m.base64 === 'string') {
      return await revive(Buffer.from(m.base64, 'base64').toString('utf8'));
    }
  } catch {
    // a value LangChain cannot revive: its role and content below
  }
  return fromPlain(m);
}

/**
 * The messages of one convo thread (the session) as a LangChain chat message history.
 * Options: { url | store, sessionId }; given a URL it opens its own Store and close()
 * closes it, given a Store it leaves it open.
 */
export class ConvoChatMessageHistory extends BaseListChatMessageHistory {
  lc_namespace = ['langchain', 'stores', 'message', 'convo'];

  #store;
  #owned;
  #closed = false;
  #queue = Promise.resolve();
  // What this instance has read (or appended right after what it read): the thread's
  // first #messages.length messages at generation #generation (-1: unknown), the last
  // one's stored text #lastText.
  #messages = [];
  #generation = -1;
  #lastText = null;

  constructor(opts) {
    const { url, store, sessionId } = options(opts, 'ConvoChatMessageHistory options');
    super({ sessionId });
    this.sessionId = text(sessionId, 'sessionId');
    if ((url === undefined) === (store === undefined)) {
      throw new InvalidError(codes.EINVAL, 'ConvoChatMessageHistory takes one of url and store');
    }
    if (store !== undefined && !(store instanceof Store)) {
      throw new InvalidError(codes.EINVAL, 'store must be a convo Store (await Store.open(url))');
    }
    this.#owned = url !== undefined;
    this.#store = this.#owned ? Store.open(text(url, 'url')) : Promise.resolve(store);
    this.#store.catch(() => {}); // reported by the first call that needs the store
  }

  /**
   * One page of the sessions of a store, most recently active first: those whose extra
   * contains `where` (e.g. { userId }). Options as store.listThreads (order, reverse,
   * after, limit, withExtra, withLastMessage); resolves to { sessions: [{ sessionId,
   * createdAt, updatedAt, length, extra?, lastMessage?, cursor }], next } (next: the
   * `after` of the next page, null on the last). lastMessage is a LangChain message.
   */
  static async list(store, opts) {
    if (!(store instanceof Store)) {
      throw new InvalidError(codes.EINVAL, 'ConvoChatMessageHistory.list takes a convo Store');
    }
    const { where = null, ...rest } = options(opts, 'list options');
    const page = await store.listThreads({ ...rest, where });
    const sessions = await Promise.all(page.threads.map(async ({ id, lastMessage, ...row }) => {
      const s = { sessionId: id, ...row };
      if (lastMessage !== undefined) {
        const t = lastMessage === null || typeof lastMessage === 'string' ? lastMessage : lastMessage.json;
        s.lastMessage = t === null ? null : await fromLogText(t);
      }
      return s;
    }));
    return { sessions, next: page.next };
  }

  /** The Store under this history (opened by the constructor when given a URL). */
  async store() {
    return this.#live();
  }

  // One call of this instance at a time: a read and an append in flight together
  // would each extend what the instance has read.
  #serial(fn) {
    const p = this.#queue.then(fn);
    this.#queue = p.catch(() => {});
    return p;
  }

  async #live() {
    if (this.#closed) throw new InvalidError(codes.EINVAL, 'the chat message history is closed');
    return this.#store;
  }

  /** The session's messages, oldest first (a new array; the messages are shared). */
  getMessages() {
    return this.#serial(async () => {
      const store = await this.#live();
      await this.#catchUp(store);
      return this.#messages.slice();
    });
  }

  // Reads the messages past those already read, from the last one read: it must still be
  // there, unchanged, at the same generation; else (another writer rewrote the tail or
  // deleted the thread) the whole thread is read again.
  async #catchUp(store) {
    const n = this.#messages.length;
    let h;
    try {
      h = await store.load(this.sessionId, { fromSeq: n > 0 ? n - 1 : 0, withExtra: false });
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
      this.#reset([], 0);
      return;
    }
    const first = h.messages[0];
    if (n > 0 && !(h.generation === this.#generation && h.length >= n && first?.seq === n - 1 &&
        first.json === this.#lastText)) {
      return this.#readAll(store);
    }
    const fresh = n > 0 ? h.messages.slice(1) : h.messages;
    const decoded = await Promise.all(fresh.map((m) => fromLogText(m.json)));
    if (n === 0) this.#messages = decoded;
    else for (const m of decoded) this.#messages.push(m);
    this.#generation = h.generation;
    if (fresh.length) this.#lastText = fresh[fresh.length - 1].json;
  }

  async #readAll(store) {
    let h;
    try {
      h = await store.load(this.sessionId, { withExtra: false });
    } catch (e) {
      if (!(e instanceof NotFoundError)) throw e;
      this.#reset([], 0);
      return;
    }
    const decoded = await Promise.all(h.messages.map((m) => fromLogText(m.json)));
    this.#reset(decoded, h.generation, h.messages.length ? h.messages[h.messages.length - 1].json : null);
  }

  #reset(messages, generation, lastText = null) {
    this.#messages = messages;
    this.#generation = generation;
    this.#lastText = lastText;
  }

  addMessage(message) {
    return this.addMessages([message]);
  }

  /** Appends the messages in one atomic write: all of them or none. */
  addMessages(messages) {
    if (!Array.isArray(messages)) {
      return Promise.reject(new InvalidError(codes.EINVAL, 'addMessages takes an array of messages'));
    }
    return this.#serial(async () => {
      const store = await this.#live();
      if (messages.length === 0) return;
      const texts = messages.map(toLogText);
      const r = await store.append(this.sessionId, texts);
      // Right after what this instance read: it has read these too. A rewrite by another
      // writer since the last read is seen by the next read (generation, last text).
      if (r.firstSeq === this.#messages.length) {
        for (const m of messages) this.#messages.push(m);
        this.#lastText = texts[texts.length - 1];
      }
    });
  }

  /**
   * Removes every message: a tail rewrite to zero messages, so the thread keeps its extra
   * (title, userId), its creation time and its place in the thread index; its generation
   * goes up, so other instances read it again. Nothing is written for an unknown session.
   */
  clear() {
    return this.#serial(async () => {
      const store = await this.#live();
      try {
        const r = await store.replaceTail(this.sessionId, { keep: 0 });
        this.#reset([], r.generation);
      } catch (e) {
        if (!(e instanceof NotFoundError)) throw e;
        this.#reset([], 0);
      }
    });
  }

  /** Merges `patch` into the thread's extra (shallow: each key replaced), e.g. { userId, title }. */
  saveExtra(patch) {
    return this.#serial(async () => (await this.#live()).saveExtra(this.sessionId, patch));
  }

  /** The thread's extra object ({} for an unknown session). */
  getExtra() {
    return this.#serial(async () => {
      const store = await this.#live();
      try {
        return (await store.load(this.sessionId, { fromSeq: Number.MAX_SAFE_INTEGER })).extra;
      } catch (e) {
        if (e instanceof NotFoundError) return {};
        throw e;
      }
    });
  }

  /** Ends this history: closes the Store when it opened it; idempotent. */
  async close() {
    if (this.#closed) return;
    this.#closed = true;
    await this.#queue;
    if (this.#owned) await (await this.#store.catch(() => null))?.close();
  }
}

if (typeof Symbol.asyncDispose === 'symbol') {
  Object.defineProperty(ConvoChatMessageHistory.prototype, Symbol.asyncDispose, {
    value() { return this.close(); }, writable: true, configurable: true,
  });
}
